"""The filter stage: consistent subsets of every table, removed ids listed with reasons, no empty output."""

import subprocess
import sys

import pytest

from espnet_ext.data.datadir import read_kaldi_map, validate_data_dir
from espnet_ext.data.filter import filter_data_dir
from espnet_ext.errors import InputError

#          utt       speaker  frames  transcript
ROWS = [
    ("a-001", "a", 5, "ONE"),  # too short
    ("a-002", "a", 50, "TWO THREE"),
    ("b-001", "b", 80, "FOUR FIVE SIX SEVEN EIGHT"),  # text long in words (5) and chars (25)
    ("c-001", "c", 500, "NINE"),
]  # too long; its speaker disappears


def write_table(path, rows):
    path.write_text("".join(f"{k} {v}\n" for k, v in rows), encoding="utf-8")


@pytest.fixture()
def src(tmp_path):
    """A feature-dumped data dir with segments, a per-language text, an unknown utterance table and extras."""
    d = tmp_path / "src"
    d.mkdir()
    write_table(
        d / "wav.scp",
        [(f"rec_{u}", f"/audio/{u}.flac") for u, *_ in ROWS] + [("rec_unused", "/audio/x.flac")],
    )
    write_table(d / "segments", [(u, f"rec_{u} 0.0 {f / 100}") for u, _, f, _ in ROWS])
    write_table(d / "text", [(u, t) for u, _, _, t in ROWS])
    write_table(d / "text.de", [(u, t.lower()) for u, _, _, t in ROWS])
    write_table(d / "utt2spk", [(u, s) for u, s, _, _ in ROWS])
    write_table(d / "spk2utt", [("a", "a-001 a-002"), ("b", "b-001"), ("c", "c-001")])
    write_table(d / "spk2gender", [("a", "f"), ("b", "m"), ("c", "m")])
    write_table(
        d / "feats.scp", [(u, f"dump/feats.1.ark:{i * 100 + 9}") for i, (u, *_) in enumerate(ROWS)]
    )
    write_table(d / "utt2num_frames", [(u, str(f)) for u, _, f, _ in ROWS])
    write_table(d / "phn", [(u, "W AH N") for u, *_ in ROWS])  # unknown name, keyed by utterance
    (d / "feats_type").write_text("fbank\n")  # not a table of ids: copied as is
    (d / "split2").mkdir()  # describes the unfiltered set: not copied
    (d / ".complete").write_text("")
    return d


def test_filter_keeps_every_table_consistent(src, tmp_path):
    dst = tmp_path / "dst"
    report = filter_data_dir(src, dst, min_frames=10, max_frames=100, max_text_words=4)
    assert (report.kept, report.total) == (1, 4)
    assert report.summary().startswith(
        "filter: kept 1 of 4 utterances (removed 3: 1 text too long, 1 too long, 1 too short"
    )
    assert read_kaldi_map(dst / "removed.txt") == {
        "a-001": "num_frames=5<min_frames=10",
        "b-001": "text_words=5>max_text_words=4",
        "c-001": "num_frames=500>max_frames=100",
    }
    for name in ("text", "text.de", "utt2spk", "feats.scp", "utt2num_frames", "segments", "phn"):
        assert list(read_kaldi_map(dst / name)) == ["a-002"], name
    assert read_kaldi_map(dst / "feats.scp") == {"a-002": "dump/feats.1.ark:109"}
    assert read_kaldi_map(dst / "wav.scp") == {
        "rec_a-002": "/audio/a-002.flac"
    }  # recordings still used
    assert read_kaldi_map(dst / "spk2utt") == {"a": "a-002"}
    assert read_kaldi_map(dst / "spk2gender") == {"a": "f"}
    assert (dst / "feats_type").read_text() == "fbank\n"
    assert not (dst / "split2").exists() and not (dst / ".complete").exists()
    assert validate_data_dir(dst, require=()) == ["a-002"]
    assert read_kaldi_map(src / "text")["b-001"] == "FOUR FIVE SIX SEVEN EIGHT"  # source untouched


def test_bounds_are_inclusive_and_text_chars_count_spaces(src, tmp_path):
    report = filter_data_dir(src, tmp_path / "dst", min_frames=5, max_frames=500, max_text_chars=24)
    assert report.removed == {"b-001": "text_chars=25>max_text_chars=24"}


def test_no_bounds_copies_everything_and_writes_an_empty_removed_list(src, tmp_path):
    report = filter_data_dir(src, tmp_path / "dst")
    assert report.kept == 4 and report.summary() == "filter: kept 4 of 4 utterances"
    assert (tmp_path / "dst" / "removed.txt").read_text() == ""


def test_refuses_to_produce_an_empty_dir(src, tmp_path):
    with pytest.raises(InputError) as info:
        filter_data_dir(src, tmp_path / "dst", min_frames=1000)
    assert str(info.value).startswith(
        f"{src}: filtering would remove all 4 utterances (e.g. 'a-001': num_frames=5<min_frames=1000)"
    )
    assert not (tmp_path / "dst").exists() and not (tmp_path / "dst.tmp").exists()


def test_frame_bounds_need_utt2num_frames(src, tmp_path):
    (src / "utt2num_frames").unlink()
    with pytest.raises(InputError) as info:
        filter_data_dir(src, tmp_path / "dst", max_frames=100)
    assert str(info.value).startswith(
        f"{src / 'utt2num_frames'}: --min_frames/--max_frames need utt2num_frames"
    )


def test_invalid_source_is_reported_with_file_and_line(src, tmp_path):
    (src / "text").write_text("a-001 ONE\na-002 TWO THREE\nb-001 FOUR\n")
    with pytest.raises(InputError) as info:
        filter_data_dir(src, tmp_path / "dst", max_frames=100)
    assert str(info.value).startswith(f"{src / 'segments'}:4: key 'c-001': id is not in text")


def test_rerun_replaces_output_and_clears_a_stale_tmp(src, tmp_path):
    dst = tmp_path / "dst"
    filter_data_dir(src, dst, max_frames=100)
    (tmp_path / "dst.tmp").mkdir()
    (tmp_path / "dst.tmp" / "junk").write_text("from an interrupted run")
    filter_data_dir(src, dst, min_frames=60)
    assert list(read_kaldi_map(dst / "text")) == ["b-001", "c-001"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst", "src"]


def test_cli_prints_summary_and_fails_with_the_location(src, tmp_path):
    run = [sys.executable, "-m", "espnet_ext.data.filter", str(src), str(tmp_path / "dst")]
    ok = subprocess.run(
        run + ["--min_frames", "10", "--max_text_chars", "20"], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(
        "filter: kept 2 of 4 utterances (removed 2: 1 text too long, 1 too short;"
    )
    bad = subprocess.run(run + ["--max_frames", "1"], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.startswith(
        f"error: {src}: filtering would remove all 4"
    )


def _mt_dir(path, pairs):
    """An MT data dir: text.de / text.en only (no audio tables)."""
    path.mkdir()
    write_table(path / "text.de", [(u, de) for u, de, _ in pairs])
    write_table(path / "text.en", [(u, en) for u, _, en in pairs])
    return path


def test_text_limits_apply_to_each_named_side(tmp_path):
    src = _mt_dir(
        tmp_path / "mt",
        [
            ("u1", "eins zwei", "one two"),
            ("u2", "drei", "three four five six"),
            ("u3", "a b c d e", "seven"),
        ],
    )
    report = filter_data_dir(
        src, tmp_path / "dst", max_text_words=3, text_names=["text.de", "text.en"]
    )
    assert report.removed == {
        "u2": "text_en_words=4>max_text_words=3",
        "u3": "text_de_words=5>max_text_words=3",
    }
    assert read_kaldi_map(tmp_path / "dst" / "text.de") == {"u1": "eins zwei"}
    assert read_kaldi_map(tmp_path / "dst" / "text.en") == {"u1": "one two"}


def test_length_ratio_drops_pairs_above_it_in_both_directions(tmp_path):
    src = _mt_dir(
        tmp_path / "mt",
        [
            ("u1", "a b", "x y z"),
            ("u2", "a", "x y z w"),
            ("u3", "a b c d", "x"),
            ("u4", "a b", "x y z"),
        ],
    )
    report = filter_data_dir(
        src, tmp_path / "dst", text_names=["text.de", "text.en"], max_length_ratio=1.5
    )
    # 3/2 = 1.5 is kept (inclusive bound, as clean-corpus-n.perl); 4/1 in either direction is not.
    assert sorted(report.removed) == ["u2", "u3"]
    assert report.removed["u2"] == "length_ratio=4/1>max_length_ratio=1.5"
    assert (tmp_path / "dst" / "removed.txt").read_text().splitlines() == [
        "u2 length_ratio=4/1>max_length_ratio=1.5",
        "u3 length_ratio=4/1>max_length_ratio=1.5",
    ]
    with pytest.raises(InputError, match="compares two texts"):
        filter_data_dir(src, tmp_path / "dst2", max_length_ratio=1.5)


def test_cli_text_names_and_ratio(tmp_path):
    src = _mt_dir(tmp_path / "mt", [("u1", "a b", "x y"), ("u2", "a", "x y z w")])
    run = [
        sys.executable,
        "-m",
        "espnet_ext.data.filter",
        str(src),
        str(tmp_path / "dst"),
        "--text_names",
        "text.de,text.en",
        "--max_length_ratio",
        "2",
    ]
    out = subprocess.run(run, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("filter: kept 1 of 2 utterances (removed 1: 1 length ratio;")


def test_an_unknown_utterance_table_out_of_order_is_filtered_and_written_sorted(src, tmp_path):
    """An unknown file is filtered when its ids are exactly the utterance ids, in whatever order;
    one of other ids is copied as it is, order and all."""
    write_table(src / "phn", [(u, f"P{i}") for i, (u, *_) in reversed(list(enumerate(ROWS)))])
    notes = "z-note first\na-note second\n"
    (src / "notes").write_text(notes)
    dst = tmp_path / "dst"
    filter_data_dir(src, dst, min_frames=10, max_frames=100)
    assert (dst / "phn").read_text() == "a-002 P1\nb-001 P2\n"
    assert (dst / "notes").read_text() == notes
    assert sorted(p.name for p in dst.iterdir() if p.name.startswith(".")) == []
