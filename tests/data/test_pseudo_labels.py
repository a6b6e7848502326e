"""Pseudo-labels for self-training: 1-best text, length-normalised confidence filter, dropped ids listed."""

import pytest

from espnet_ext.data import pseudo_labels
from espnet_ext.errors import InputError


def write(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))


@pytest.fixture()
def dirs(tmp_path):
    data, decode = tmp_path / "unlabeled", tmp_path / "decode"
    write(data / "video.scp", ["a /v/a.npy", "b /v/b.npy", "c /v/c.npy", "d /v/d.npy"])
    write(data / "utt2spk", ["a s1", "b s1", "c s2", "d s2"])
    write(data / "utt2num_frames", ["a 40", "b 30", "c 20", "d 25"])
    write(data / "text", ["a reference not a label", "b x", "c y", "d z"])
    write(decode / "text", ["a one two three", "b four", "c", "d five six"])
    # confidences: a -2/4 = -0.5, b -6/2 = -3, c empty, d -1.5/3 = -0.5
    write(decode / "score", ["a -2.0 4", "b -6.0 2", "c -0.1 1", "d -1.5 3"])
    return data, decode, tmp_path / "pseudo"


def table(path):
    return dict(line.split(" ", 1) if " " in line else (line, "") for line in
                path.read_text().splitlines())  # fmt: skip


def test_confidence_filter_and_tables(dirs):
    data, decode, out = dirs
    assert pseudo_labels.write_pseudo_labels(data, decode, out, min_confidence=-1.0) == (2, 2)
    assert table(out / "text") == {"a": "one two three", "d": "five six"}
    assert table(out / "video.scp") == {"a": "/v/a.npy", "d": "/v/d.npy"}
    assert table(out / "utt2num_frames") == {"a": "40", "d": "25"}
    assert table(out / "utt2confidence") == {"a": "-0.500000", "d": "-0.500000"}
    assert table(out / "spk2utt") == {"s1": "a", "s2": "d"}
    assert table(out / "dropped.txt") == {"b": "confidence -3.0000 < -1.0", "c": "empty 1-best"}


def test_no_threshold_keeps_every_non_empty_hypothesis(dirs):
    data, decode, out = dirs
    assert pseudo_labels.write_pseudo_labels(data, decode, out) == (3, 1)
    assert set(table(out / "text")) == {"a", "b", "d"}


def test_bad_decodings_are_refused_and_leave_nothing(dirs):
    data, decode, out = dirs
    with pytest.raises(InputError, match="keeps none of 4 videos"):
        pseudo_labels.write_pseudo_labels(data, decode, out, min_confidence=0.0)
    assert not out.exists() and not out.with_name("pseudo.tmp").exists()
    write(decode / "score", ["a -2.0 4", "b -6.0", "c -0.1 1", "d -1.5 3"])
    with pytest.raises(InputError, match=r"score:2: key 'b': expected"):
        pseudo_labels.write_pseudo_labels(data, decode, out)
    write(decode / "score", ["a -2.0 4", "b -6.0 2", "c -0.1 1"])
    with pytest.raises(InputError, match="no score for 1 id"):
        pseudo_labels.write_pseudo_labels(data, decode, out)
    write(decode / "text", ["a one"])
    write(decode / "score", ["a -2.0 4"])
    with pytest.raises(InputError, match="3 video.* not decoded"):
        pseudo_labels.write_pseudo_labels(data, decode, out)
    assert not out.exists()


def test_command_line(dirs, capsys):
    data, decode, out = dirs
    pseudo_labels.main(["--data_dir", str(data), "--decode_dir", str(decode), "--out_dir",
                        str(out), "--min_confidence", "-1"])  # fmt: skip
    assert "kept 2 of 4 videos" in capsys.readouterr().out
    assert pseudo_labels.main(["--data_dir", str(data), "--decode_dir", str(decode), "--out_dir",
                               str(out), "--min_confidence", "5"]) == 1  # fmt: skip
    assert capsys.readouterr().err.startswith(
        f"error: {decode}: the confidence filter (min 5.0) keeps none"
    )
