"""The video pipeline's helpers: the video check stage (vsr_prepare), vsr_inference's decoding config and its
resumable jobs."""

import json
import re

import numpy as np
import pytest
from test_lip_reading import corpus, decode, training_options  # noqa: F401 (corpus: a fixture)

from espnet_ext.bin import vsr_inference, vsr_prepare
from espnet_ext.errors import ConfigError, InputError
from espnet_ext.tasks.lip_reading import LipReadingTask


def write_set(tmp_path, videos):
    data = tmp_path / "data"
    data.mkdir()
    rows = []
    for key, frames in videos.items():
        path = tmp_path / f"{key}.npy"
        np.save(path, frames)
        rows.append(f"{key} {path}")
    (data / "video.scp").write_text("\n".join(rows) + "\n")
    (data / "text").write_text("".join(f"{key} one\n" for key in videos))
    return data


def test_prepare_counts_frames_and_copies_tables(tmp_path):
    data = write_set(
        tmp_path, {"a": np.zeros((7, 8, 8), np.uint8), "b": np.zeros((3, 8, 8), np.uint8)}
    )
    assert vsr_prepare.prepare(data, tmp_path / "dump") == 2
    assert (tmp_path / "dump" / "utt2num_frames").read_text() == "a 7\nb 3\n"
    assert (tmp_path / "dump" / "text").read_text() == (data / "text").read_text()


@pytest.mark.parametrize(
    "content,suffix", [(b"\x93NUMPY broken", ".npy"), (b"GIF89a not a video", ".gif")]
)
def test_prepare_refuses_a_video_it_cannot_decode_and_writes_nothing(tmp_path, content, suffix):
    data = write_set(tmp_path, {"a": np.zeros((4, 8, 8), np.uint8)})
    bad = tmp_path / f"b{suffix}"
    bad.write_bytes(content)
    with (data / "video.scp").open("a") as scp:
        scp.write(f"b {bad}\n")
    with pytest.raises(InputError, match=r"video\.scp:2: key 'b': cannot decode video"):
        vsr_prepare.prepare(data, tmp_path / "dump")
    assert not (tmp_path / "dump").exists() and not (tmp_path / "dump.tmp").exists()


def test_decoding_config_under_the_command_line(tmp_path):
    config = tmp_path / "decode.yaml"
    config.write_text("beam_size: 7\nlm_weight: 0.15\nctc_weight: 0.5\n")
    base = ["--data_path_and_name_and_type", "x.scp,video,video", "--model_file", "m.pth",
            "--output_file", "out"]  # fmt: skip
    args = vsr_inference.parse_args(base + ["--config", str(config), "--beam_size", "3"])
    assert (args.beam_size, args.lm_weight, args.ctc_weight) == (3, 0.15, 0.5)
    config.write_text("beam_size: 7\nnbest: 2\n")
    with pytest.raises(ConfigError, match=r"decode\.yaml: unknown option\(s\) nbest"):
        vsr_inference.parse_args(base + ["--config", str(config)])


def test_npy_frames_are_counted_from_their_header_and_a_cut_file_is_refused(tmp_path, monkeypatch):
    # LRS3's mouth crops: ~300 GB, never read whole to be counted; a file cut short still fails here
    from espnet_ext.data import types

    data = write_set(
        tmp_path, {"a": np.zeros((7, 8, 8), np.uint8), "b": np.zeros((5, 8, 8, 3), np.uint8)}
    )
    monkeypatch.setattr(types, "decode_video", None)  # nothing decodes a .npy whole
    monkeypatch.setattr(np, "load", _mapped_only(np.load))
    assert vsr_prepare.prepare(data, tmp_path / "dump") == 2
    assert (tmp_path / "dump" / "utt2num_frames").read_text() == "a 7\nb 5\n"
    whole = (tmp_path / "a.npy").read_bytes()
    (tmp_path / "a.npy").write_bytes(whole[: len(whole) - 10])
    with pytest.raises(InputError, match=r"video\.scp:1: key 'a': cannot decode video"):
        vsr_prepare.prepare(data, tmp_path / "dump2")
    np.save(tmp_path / "a.npy", np.zeros((7, 8, 8), np.float32))
    with pytest.raises(InputError, match="expected uint8 frames"):
        vsr_prepare.prepare(data, tmp_path / "dump3")


def _mapped_only(load):
    def mapped(*args, **kwargs):
        assert kwargs.get("mmap_mode") == "r", "a .npy read whole"
        return load(*args, **kwargs)

    return mapped


def test_prepare_split_over_jobs_counts_what_one_job_counts(tmp_path):
    rng = np.random.default_rng(0)
    videos = {f"u{i}": np.zeros((int(rng.integers(2, 9)), 8, 8), np.uint8) for i in range(7)}
    data = write_set(tmp_path, videos)
    assert vsr_prepare.prepare(data, tmp_path / "one") == 7
    lines = (data / "video.scp").read_text().splitlines()
    parts = []
    for job in range(3):  # utils/pipeline.sh split_keys: round-robin
        keys = tmp_path / f"keys.{job + 1}.scp"
        keys.write_text("".join(line + "\n" for line in lines[job::3]))
        parts.append(tmp_path / f"frames.{job + 1}")
        vsr_prepare.main(
            ["--data_dir", str(data), "--key_file", str(keys), "--part_out", str(parts[-1])]
        )
    vsr_prepare.main(["--data_dir", str(data), "--out_dir", str(tmp_path / "split"), "--parts"]
                     + [str(p) for p in parts])  # fmt: skip
    one, split = (tmp_path / d / "utt2num_frames" for d in ("one", "split"))
    assert split.read_text() == one.read_text()
    assert (tmp_path / "split" / "text").read_text() == (data / "text").read_text()
    # a part lost (a job's output removed) refuses the merge, naming the first uncounted key's scp line
    with pytest.raises(InputError, match=r"video\.scp:2: key 'u1': counted by no part"):
        vsr_prepare.prepare(data, tmp_path / "lost", parts[:1] + parts[2:])
    assert not (tmp_path / "lost").exists()
    with pytest.raises(InputError, match=r"frames\.1:1: key 'u0': counted twice"):
        vsr_prepare.prepare(data, tmp_path / "twice", parts + parts[:1])


def test_a_job_names_the_video_scp_line_of_a_bad_video_and_writes_no_part(tmp_path, capsys):
    data = write_set(
        tmp_path, {"a": np.zeros((4, 8, 8), np.uint8), "b": np.zeros((3, 8, 8), np.uint8)}
    )
    (tmp_path / "b.npy").write_bytes(b"\x93NUMPY broken")
    keys = tmp_path / "keys.2.scp"
    keys.write_text(f"b {tmp_path / 'b.npy'}\n")  # line 1 of the job's keys, line 2 of video.scp
    part = tmp_path / "frames.2"
    with pytest.raises(InputError, match=r"video\.scp:2: key 'b': cannot decode video"):
        vsr_prepare.count_frames(data, keys)
    assert (
        vsr_prepare.main(
            ["--data_dir", str(data), "--key_file", str(keys), "--part_out", str(part)]
        )
        == 1
    )
    assert re.search(r"video\.scp:2: key 'b': cannot decode video", capsys.readouterr().err)
    assert not part.exists()


def test_an_interrupted_job_resumes_where_it_stopped(corpus, tiny_run_options, monkeypatch):  # noqa: F811
    exp = corpus / "exp"
    LipReadingTask.main(cmd=training_options(corpus, tiny_run_options, exp) + ["--max_epoch", "1"])
    test = corpus / "data" / "test"
    whole = corpus / "whole"
    decode(corpus, exp, test, whole / "text", score_file=whole / "score")

    searched = []
    build = vsr_inference.build_beam_search

    def killed_after(k):  # the beam search of the k+1-th video dies (a time limit, a node failure)
        def counted(model, args):
            search = build(model, args)

            def run(**kwargs):
                if len(searched) == k:
                    raise KeyboardInterrupt
                searched.append(1)
                return search(**kwargs)

            return run

        return counted

    out = corpus / "resumed"
    journal = out / "journal"
    options = dict(score_file=out / "score", resume_file=journal)
    monkeypatch.setattr(vsr_inference, "build_beam_search", killed_after(3))
    with pytest.raises(KeyboardInterrupt):
        decode(corpus, exp, test, out / "text", **options)
    assert not (out / "text").exists() and not (out / "score").exists()  # nothing looks finished
    assert (
        len(journal.read_text().splitlines()) == 1 + 3
    )  # the signature, then a line per video decoded
    with journal.open("a") as f:
        f.write('{"key": "t0')  # a line cut by the kill
    searched.clear()
    monkeypatch.setattr(vsr_inference, "build_beam_search", killed_after(100))
    decode(corpus, exp, test, out / "text", **options)
    assert len(searched) == 8 - 3  # only the videos the first run had not decoded
    assert (out / "text").read_text() == (whole / "text").read_text()
    assert (out / "score").read_text() == (whole / "score").read_text()
    # A finished job's rerun decodes nothing; other decoding options decode every video again.
    searched.clear()
    decode(corpus, exp, test, out / "text", **options)
    assert searched == [] and (out / "text").read_text() == (whole / "text").read_text()
    decode(corpus, exp, test, out / "text", ctc_weight=0.5, **options)
    assert len(searched) == 8


def test_a_journal_line_may_hold_unicode_line_separators(tmp_path):
    """json.dumps leaves U+2028, U+2029 and U+0085 in a 1-best as they are: the journal is split on
    newlines only, so such a line reads back (str.splitlines would cut it in two)."""
    journal = tmp_path / "journal"
    entry = {
        "key": "k1",
        "text": "a\u2028b\u2029c\x85d",
        "score": -1.0,
        "tokens": 3,
        "video": "k1.npy",
    }
    journal.write_text(
        json.dumps({"signature": "s"}) + "\n" + json.dumps(entry, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    done = vsr_inference.read_journal(journal, "s", {"k1": "k1.npy", "k2": "k2.npy"})
    assert list(done) == ["k1"] and done["k1"].text == "a\u2028b\u2029c\x85d"
