"""Kaldi data dirs: table I/O, validation (each problem located by file and line), spk2utt, combine."""

import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile

from espnet_ext.data import datadir
from espnet_ext.data.datadir import (
    atomic_dir,
    check_data_dir,
    combine_data_dirs,
    fix_spk2utt,
    read_kaldi_entries,
    read_kaldi_map,
    segment_times,
    spk2utt_from_utt2spk,
    validate_data_dir,
    write_data_dir,
    write_kaldi_map,
    write_sorted_tables,
)
from espnet_ext.errors import InputError

UTTS = ["spkA-001", "spkA-002", "spkB-001"]


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def make_wav(path, seconds=0.2):
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(16000 * seconds)) / 16000
    soundfile.write(path, 0.3 * np.sin(2 * np.pi * 220 * t), 16000)
    return path


@pytest.fixture()
def data_dir(tmp_path):
    """A valid data dir of three utterances by two speakers, with real wav files."""
    d = tmp_path / "data"
    wavs = {u: make_wav(tmp_path / "wav" / f"{u}.wav") for u in UTTS}
    write(d / "wav.scp", "".join(f"{u} {wavs[u]}\n" for u in UTTS))
    write(d / "text", "spkA-001 HELLO WORLD\nspkA-002 GOOD MORNING\nspkB-001 ÜBER ALLES\n")
    write(d / "utt2spk", "spkA-001 spkA\nspkA-002 spkA\nspkB-001 spkB\n")
    write(d / "spk2utt", "spkA spkA-001 spkA-002\nspkB spkB-001\n")
    return d


def error_of(call, *args, **kwargs) -> str:
    with pytest.raises(InputError) as info:
        call(*args, **kwargs)
    return str(info.value)


# ------------------------------------------------------------------------------------------------
# table I/O


def test_read_kaldi_map_splits_at_first_blank_and_keeps_the_rest(tmp_path):
    path = write(tmp_path / "text", "u1 A  B\tC \nu2\tX Y\n  u3 Z\n")
    assert read_kaldi_map(path) == {"u1": "A  B\tC", "u2": "X Y", "u3": "Z"}
    assert [e.line for e in read_kaldi_entries(path)] == [1, 2, 3]


@pytest.mark.parametrize(
    "content, line, needle",
    [
        ("u1 a\nu1 b\n", 2, "duplicate id (first at line 1)"),
        ("u1 a\n\nu2 b\n", 2, "blank line"),
        ("u1 a\nu2\n", 2, "empty value"),
        (b"u1 a\nu2 \xff\xfe\n", 2, "not valid UTF-8"),
    ],
)
def test_read_kaldi_map_refuses_bad_lines_naming_file_and_line(tmp_path, content, line, needle):
    path = write(tmp_path / "table", content)
    message = error_of(read_kaldi_map, path)
    assert message.startswith(f"{path}:{line}:") and needle in message


def test_read_kaldi_map_names_a_missing_file(tmp_path):
    assert str(tmp_path / "nope") in error_of(read_kaldi_map, tmp_path / "nope")


def test_write_kaldi_map_sorts_like_c_locale_sort(tmp_path):
    mapping = {
        "b": "1",
        "a-1": "2",
        "a_1": "3",
        "B": "4",
        "a": "5",
        "é": "6",
        "a0": "7",
        "Z9": ["x", "y"],
    }
    path = tmp_path / "out"
    write_kaldi_map(path, mapping)
    lines = path.read_text(encoding="utf-8").splitlines()
    reference = subprocess.run(
        ["sort"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        env={**os.environ, "LC_ALL": "C"},
        check=True,
        text=True,
        encoding="utf-8",
    ).stdout.splitlines()
    assert lines == reference
    assert "Z9 x y" in lines
    assert read_kaldi_map(path)["é"] == "6"


def test_write_kaldi_map_refuses_ids_with_blanks_and_leaves_no_file(tmp_path):
    with pytest.raises(
        InputError, match=f"^{tmp_path / 'out'}: key 'bad id': cannot write this id"
    ):
        write_kaldi_map(tmp_path / "out", {"ok": "1", "bad id": "2"})
    assert list(tmp_path.iterdir()) == []


def test_spk2utt_from_utt2spk_groups_sorted():
    assert spk2utt_from_utt2spk({"s2-b": "s2", "s1-b": "s1", "s1-a": "s1"}) == {
        "s1": ["s1-a", "s1-b"],
        "s2": ["s2-b"],
    }


# ------------------------------------------------------------------------------------------------
# validation


def test_valid_dir_passes_and_returns_ids(data_dir):
    assert validate_data_dir(data_dir, check_audio=True) == UTTS


def test_missing_required_file(data_dir):
    (data_dir / "utt2spk").unlink()
    (data_dir / "spk2utt").unlink()
    message = error_of(validate_data_dir, data_dir)
    assert (
        str(data_dir / "utt2spk") in message
        and "required file is missing" in message
        and "text" in message
    )


def test_missing_data_dir(tmp_path):
    assert str(tmp_path / "nodir") in error_of(validate_data_dir, tmp_path / "nodir")


def test_non_utf8_transcript(data_dir):
    write(data_dir / "text", b"spkA-001 HELLO\nspkA-002 CAF\xe9\nspkB-001 X\n")
    assert error_of(validate_data_dir, data_dir).startswith(
        f"{data_dir / 'text'}:2: not valid UTF-8"
    )


def test_empty_transcript(data_dir):
    write(data_dir / "text", "spkA-001 HELLO\nspkA-002 \nspkB-001 X\n")
    assert error_of(validate_data_dir, data_dir) == (
        f"{data_dir / 'text'}:2: key 'spkA-002': empty transcript: the line has only the id"
    )


def test_text_id_not_in_wav_scp(data_dir):
    write(
        data_dir / "text",
        "spkA-001 HELLO\nspkA-002 X\nspkA-003 EXTRA\nspkA-004 EXTRA\nspkB-001 X\n",
    )
    message = error_of(validate_data_dir, data_dir)
    assert message.startswith(
        f"{data_dir / 'text'}:3: key 'spkA-003': id is not in wav.scp; 1 more mismatch"
    )
    assert "2 id(s) only in text, 0 only in wav.scp" in message


def test_wav_scp_id_not_in_text(data_dir):
    write(data_dir / "text", "spkA-001 HELLO\nspkB-001 X\n")
    message = error_of(validate_data_dir, data_dir)
    assert message.startswith(
        f"{data_dir / 'wav.scp'}:2: key 'spkA-002': id is not in text; 0 more mismatch"
    )


def test_utt2spk_and_spk2utt_disagree(data_dir):
    write(data_dir / "spk2utt", "spkA spkA-001\nspkB spkA-002 spkB-001\n")
    message = error_of(validate_data_dir, data_dir)
    assert message.startswith(f"{data_dir / 'spk2utt'}:1: key 'spkA': disagrees with utt2spk")
    assert "fix_spk2utt" in message


def test_speaker_missing_from_spk2utt(data_dir):
    write(data_dir / "spk2utt", "spkA spkA-001 spkA-002\n")
    assert error_of(validate_data_dir, data_dir).startswith(
        f"{data_dir / 'spk2utt'}: key 'spkB': speaker of utt2spk is missing"
    )


def test_unsorted_table(data_dir):
    write(data_dir / "utt2spk", "spkA-002 spkA\nspkA-001 spkA\nspkB-001 spkB\n")
    assert error_of(validate_data_dir, data_dir).startswith(
        f"{data_dir / 'utt2spk'}:2: key 'spkA-001': not sorted: comes after 'spkA-002' (line 1)"
    )


def test_utt2num_frames_must_be_integers(data_dir):
    write(data_dir / "utt2num_frames", "spkA-001 10\nspkA-002 ten\nspkB-001 3\n")
    assert error_of(validate_data_dir, data_dir).startswith(
        f"{data_dir / 'utt2num_frames'}:2: key 'spkA-002'"
    )


@pytest.fixture()
def segmented_dir(tmp_path):
    d = tmp_path / "seg"
    write(d / "wav.scp", f"rec1 {make_wav(tmp_path / 'rec1.wav', 1.0)}\n")
    write(d / "segments", "rec1-a rec1 0.00 0.40\nrec1-b rec1 0.40 0.90\n")
    write(d / "text", "rec1-a ONE\nrec1-b TWO\n")
    write(d / "utt2spk", "rec1-a rec1\nrec1-b rec1\n")
    return d


def test_segments_dir_is_valid(segmented_dir):
    assert validate_data_dir(segmented_dir, check_audio=True) == ["rec1-a", "rec1-b"]


def test_segment_with_unknown_recording(segmented_dir):
    write(segmented_dir / "segments", "rec1-a rec1 0.00 0.40\nrec1-b rec2 0.40 0.90\n")
    assert error_of(validate_data_dir, segmented_dir) == (
        f"{segmented_dir / 'segments'}:2: key 'rec1-b': recording 'rec2' is not in wav.scp"
    )


def test_segment_start_not_before_end(segmented_dir):
    write(segmented_dir / "segments", "rec1-a rec1 0.40 0.40\nrec1-b rec1 0.40 0.90\n")
    assert error_of(validate_data_dir, segmented_dir).startswith(
        f"{segmented_dir / 'segments'}:1: key 'rec1-a': segment start"
    )


@pytest.mark.parametrize(
    "line, needle",
    [("rec1-b rec1 0.40", "got 3 fields"), ("rec1-b rec1 0.4 end", "must be numbers")],
)
def test_malformed_segment_line(segmented_dir, line, needle):
    write(segmented_dir / "segments", f"rec1-a rec1 0.00 0.40\n{line}\n")
    message = error_of(validate_data_dir, segmented_dir)
    assert (
        message.startswith(f"{segmented_dir / 'segments'}:2: key 'rec1-b': ") and needle in message
    )


def test_text_compared_with_segments_not_wav_scp(segmented_dir):
    write(segmented_dir / "text", "rec1-a ONE\nrec1-c THREE\n")
    assert error_of(validate_data_dir, segmented_dir).startswith(
        f"{segmented_dir / 'text'}:2: key 'rec1-c': id is not in segments"
    )


# ------------------------------------------------------------------------------------------------
# audio


def test_missing_audio_file(data_dir, tmp_path):
    (tmp_path / "wav" / "spkA-002.wav").unlink()
    assert validate_data_dir(data_dir) == UTTS  # without check_audio the tables alone are fine
    message = error_of(validate_data_dir, data_dir, check_audio=True)
    assert message.startswith(f"{data_dir / 'wav.scp'}:2: key 'spkA-002': audio file")
    assert "spkA-002.wav' does not exist" in message


def test_unreadable_audio_file(data_dir, tmp_path):
    write(tmp_path / "wav" / "spkB-001.wav", b"RIFF this is not a wave file at all")
    message = error_of(validate_data_dir, data_dir, check_audio=True)
    assert message.startswith(f"{data_dir / 'wav.scp'}:3: key 'spkB-001': cannot read audio file")


def test_empty_audio_file(data_dir, tmp_path):
    soundfile.write(tmp_path / "wav" / "spkA-001.wav", np.zeros(0), 16000)
    assert "has no samples" in error_of(validate_data_dir, data_dir, check_audio=True)


def test_pipe_entries_check_their_input_files_without_running(data_dir, tmp_path):
    flac = tmp_path / "a.flac"
    soundfile.write(flac, np.zeros(160), 16000)
    canary = tmp_path / "canary"
    program = write(tmp_path / "decode.sh", f"#!/bin/sh\ntouch {canary}\n")
    program.chmod(0o755)
    write(
        data_dir / "wav.scp",
        f"spkA-001 flac -c -d -s {flac} |\n"
        f"spkA-002 {program} {flac} | sox -t flac - -t wav - |\n"
        f"spkB-001 sph2pipe -f wav -p {tmp_path}/missing.sph |\n",
    )
    message = error_of(validate_data_dir, data_dir, check_audio=True)
    assert not canary.exists()  # nothing was run
    assert (
        message
        == f"{data_dir / 'wav.scp'}:3: key 'spkB-001': '{tmp_path}/missing.sph' does not exist"
    )


# ------------------------------------------------------------------------------------------------
# fix, combine


def test_fix_spk2utt_makes_a_bad_dir_valid(data_dir):
    write(data_dir / "spk2utt", "spkA spkA-001\n")
    fix_spk2utt(data_dir)
    assert (data_dir / "spk2utt").read_text() == "spkA spkA-001 spkA-002\nspkB spkB-001\n"
    assert validate_data_dir(data_dir) == UTTS


def test_combine_merges_and_rebuilds_spk2utt(tmp_path, data_dir):
    other = tmp_path / "other"
    write(other / "wav.scp", f"spkC-001 {make_wav(tmp_path / 'c.wav')}\n")
    write(other / "text", "spkC-001 THIRD\n")
    write(other / "utt2spk", "spkC-001 spkC\n")
    write(other / "utt2lang", "spkC-001 en\n")  # only in one source: left out
    out = tmp_path / "combined"
    assert combine_data_dirs(out, [other, data_dir]) == 4  # the number of utterances
    assert (out / "spk2utt").read_text() == "spkA spkA-001 spkA-002\nspkB spkB-001\nspkC spkC-001\n"
    assert read_kaldi_map(out / "text")["spkC-001"] == "THIRD"
    assert not (out / "utt2lang").exists()
    assert validate_data_dir(out, check_audio=True) == UTTS + ["spkC-001"]


def test_combine_refuses_an_utterance_in_two_sources(tmp_path, data_dir):
    out = tmp_path / "combined"
    message = error_of(combine_data_dirs, out, [data_dir, data_dir])
    assert message.startswith(f"{data_dir}/") and "id is also in" in message
    assert not out.exists() and not (tmp_path / "combined.tmp").exists()


def test_atomic_dir_replaces_only_on_success(tmp_path):
    dst = tmp_path / "d"
    with atomic_dir(dst) as tmp:
        (tmp / "a").write_text("1")
    assert (dst / "a").read_text() == "1"
    with pytest.raises(RuntimeError), atomic_dir(dst) as tmp:
        (tmp / "a").write_text("2")
        raise RuntimeError("crash")
    assert (dst / "a").read_text() == "1" and not (tmp_path / "d.tmp").exists()
    with atomic_dir(dst) as tmp:
        (tmp / "b").write_text("3")
    assert sorted(p.name for p in dst.iterdir()) == ["b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


@pytest.mark.parametrize(
    "start, end, needle",
    [
        ("0.3s", "1.0", "x.lst:4: start '0.3s' and end '1.0' must be seconds"),
        ("2.0", "1.0", "x.lst:4: segment start 2.0 must be >= 0 and < end 1.0"),
        ("-0.5", "1.0", "x.lst:4: segment start -0.5 must be >= 0 and < end 1.0"),
        ("1.0", "1.0", "x.lst:4: segment start 1.0 must be >= 0 and < end 1.0"),
    ],
)
def test_segment_times_refuses_what_is_not_a_segment(start, end, needle):
    assert error_of(segment_times, start, end, "x.lst", 4) == needle


def test_segment_times_reads_seconds():
    assert segment_times("0", "1.25", "x.lst", 1) == (0.0, 1.25)


def test_write_data_dir_writes_sorted_tables_spk2utt_and_reports(tmp_path):
    dst = tmp_path / "train"
    tables = {
        "wav.scp": {"talk2": "/a/talk2.wav", "talk1": "/a/talk1.wav"},
        "segments": {"talk2_0": ["talk2", "0.00", "1.50"], "talk1_0": ["talk1", "0.25", "2.00"]},
        "utt2spk": {"talk2_0": "talk2", "talk1_0": "talk1"},
        "text": {"talk2_0": "zwei", "talk1_0": "eins"},
    }
    utts = write_data_dir(dst, tables, files={"removed.txt": "talk3_0 ignored (x.stm:4)\n"})
    assert utts == ["talk1_0", "talk2_0"]
    assert (dst / "wav.scp").read_text() == "talk1 /a/talk1.wav\ntalk2 /a/talk2.wav\n"
    assert (dst / "segments").read_text() == "talk1_0 talk1 0.25 2.00\ntalk2_0 talk2 0.00 1.50\n"
    assert (dst / "spk2utt").read_text() == "talk1 talk1_0\ntalk2 talk2_0\n"
    assert (dst / "removed.txt").read_text() == "talk3_0 ignored (x.stm:4)\n"
    assert sorted(p.name for p in dst.iterdir()) == [
        "removed.txt", "segments", "spk2utt", "text", "utt2spk", "wav.scp"
    ]  # fmt: skip


def test_write_data_dir_refuses_an_inconsistent_dir_and_keeps_the_old_one(tmp_path, data_dir):
    before = {p.name: p.read_text() for p in data_dir.iterdir()}
    tables = {
        "wav.scp": {"u1": "/a/u1.wav", "u2": "/a/u2.wav"},
        "utt2spk": {"u1": "s", "u2": "s"},
        "text": {"u1": "one"},  # u2 has no transcript
    }
    message = error_of(write_data_dir, data_dir, tables)
    assert "u2" in message and "data.tmp" in message
    assert {p.name: p.read_text() for p in data_dir.iterdir()} == before
    assert not (tmp_path / "data.tmp").exists()


# ------------------------------------------------------------------------------------------------
# command line


def run_cli(*args):
    command = [sys.executable, "-m", "espnet_ext.data.datadir", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True)


def test_cli_validate_ok_and_failure(data_dir, tmp_path):
    ok = run_cli("validate", data_dir, "--check_audio")
    assert ok.returncode == 0 and "3 utterances" in ok.stdout
    (tmp_path / "wav" / "spkA-001.wav").unlink()
    bad = run_cli("validate", data_dir, "--check_audio")
    assert bad.returncode == 1 and f"{data_dir / 'wav.scp'}:1: key 'spkA-001'" in bad.stderr
    assert run_cli("validate", data_dir, "--require", "wav.scp,text,feats.scp").returncode == 1


def test_cli_fix_spk2utt(data_dir):
    (data_dir / "spk2utt").unlink()
    assert run_cli("fix_spk2utt", data_dir).returncode == 0
    assert read_kaldi_map(data_dir / "spk2utt") == {"spkA": "spkA-001 spkA-002", "spkB": "spkB-001"}


# ------------------------------------------------------------------------------------------------
# streaming: validation, spk2utt, combine and sorted writing without holding the tables


def test_check_data_dir_counts_what_validate_lists(data_dir):
    assert check_data_dir(data_dir, check_audio=True) == len(validate_data_dir(data_dir)) == 3


def test_repeated_id_of_a_sorted_table_names_its_first_line(data_dir):
    write(data_dir / "text", "spkA-001 HELLO\nspkA-002 X\nspkA-002 Y\nspkB-001 Z\n")
    assert error_of(validate_data_dir, data_dir) == (
        f"{data_dir / 'text'}:3: key 'spkA-002': duplicate id (first at line 2)"
    )


def test_speaker_missing_from_spk2utt_is_the_first_in_utterance_order(data_dir):
    """spkB's utterances sort after spkA's: with both missing, spkA is named, as before streaming."""
    write(data_dir / "utt2spk", "spkA-001 zz\nspkA-002 zz\nspkB-001 aa\n")
    write(data_dir / "spk2utt", "")
    assert error_of(validate_data_dir, data_dir).startswith(
        f"{data_dir / 'spk2utt'}: key 'zz': speaker of utt2spk is missing from spk2utt"
    )


def test_spk2utt_speaker_unknown_to_utt2spk(data_dir):
    write(data_dir / "spk2utt", "spkA spkA-001 spkA-002\nspkAB spkB-001\nspkB spkB-001\n")
    assert error_of(validate_data_dir, data_dir).startswith(
        f"{data_dir / 'spk2utt'}:2: key 'spkAB': speaker is not in utt2spk"
    )


def test_spk2utt_listing_an_utterance_twice(data_dir):
    write(data_dir / "spk2utt", "spkA spkA-001 spkA-002 spkA-001\nspkB spkB-001\n")
    assert "disagrees with utt2spk: lists an utterance twice" in error_of(
        validate_data_dir, data_dir
    )


def test_speaker_id_with_a_blank_is_refused_at_its_line(data_dir):
    write(data_dir / "utt2spk", "spkA-001 spk A\nspkA-002 spkA\nspkB-001 spkB\n")
    assert error_of(fix_spk2utt, data_dir).startswith(
        f"{data_dir / 'utt2spk'}:1: key 'spkA-001': speaker id 'spk A' has a blank"
    )
    assert (data_dir / "spk2utt").read_text() == "spkA spkA-001 spkA-002\nspkB spkB-001\n"
    assert sorted(p.name for p in data_dir.iterdir()) == ["spk2utt", "text", "utt2spk", "wav.scp"]


def test_fix_spk2utt_groups_many_speakers_in_c_order(tmp_path):
    utts = {f"u{i:04d}": f"s{i % 7}{'é' if i % 2 else 'E'}" for i in range(200)}
    write_kaldi_map(tmp_path / "d" / "utt2spk", utts)
    fix_spk2utt(tmp_path / "d")
    expected = {spk: " ".join(us) for spk, us in spk2utt_from_utt2spk(utts).items()}
    assert read_kaldi_map(tmp_path / "d" / "spk2utt") == expected
    assert list(read_kaldi_map(tmp_path / "d" / "spk2utt")) == sorted(expected)
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["spk2utt", "utt2spk"]


def test_combine_interleaves_sources_in_c_order(tmp_path):
    a = {f"a{i}": "A" for i in (1, 5, 9)} | {"é": "A"}
    b = {f"a{i}": "B" for i in (2, 3, 7)} | {"Z": "B"}
    for name, table in (("a", a), ("b", b)):
        write_kaldi_map(tmp_path / name / "text", table)
        write_kaldi_map(tmp_path / name / "utt2spk", {u: f"spk{v}" for u, v in table.items()})
    assert combine_data_dirs(tmp_path / "out", [tmp_path / "a", tmp_path / "b"]) == 8
    assert (tmp_path / "out" / "text").read_text().splitlines() == [
        f"{k} {v}" for k, v in sorted((a | b).items())
    ]
    assert read_kaldi_map(tmp_path / "out" / "spk2utt")["spkA"] == "a1 a5 a9 é"


def test_combine_names_the_later_sources_line_and_the_earlier_file(tmp_path):
    write(tmp_path / "a" / "text", "u1 x\nu3 y\n")
    write(tmp_path / "b" / "text", "u0 x\nu2 x\nu3 z\n")
    message = error_of(combine_data_dirs, tmp_path / "out", [tmp_path / "a", tmp_path / "b"])
    assert message == (
        f"{tmp_path / 'b' / 'text'}:3: key 'u3': id is also in {tmp_path / 'a' / 'text'}"
    )
    assert not (tmp_path / "out").exists()


def test_combine_keeps_a_speaker_repeated_with_the_same_value_only(tmp_path):
    for name, gender in (("a", "f"), ("b", "f")):
        write(tmp_path / name / "text", f"{name}1 x\n")
        write(tmp_path / name / "utt2spk", f"{name}1 spk\n")
        write(tmp_path / name / "spk2gender", f"spk {gender}\n")
    combine_data_dirs(tmp_path / "out", [tmp_path / "a", tmp_path / "b"])
    assert (tmp_path / "out" / "spk2gender").read_text() == "spk f\n"
    assert (tmp_path / "out" / "spk2utt").read_text() == "spk a1 b1\n"
    write(tmp_path / "b" / "spk2gender", "spk m\n")
    assert error_of(combine_data_dirs, tmp_path / "out", [tmp_path / "a", tmp_path / "b"]) == (
        f"{tmp_path / 'b' / 'spk2gender'}:1: key 'spk': id is also in {tmp_path / 'a' / 'spk2gender'}"
    )


def test_combine_sorts_a_table_validation_does_not_know_like_kaldi(tmp_path):
    for name in ("a", "b"):
        write(tmp_path / name / "text", f"{name}1 x\n{name}2 y\n{name}3 z\n")
    write(tmp_path / "a" / "lang", "a1 de\na2 de\na3 de\n")
    # a table nothing sorted: Kaldi's combine_data.sh sorts it
    write(tmp_path / "b" / "lang", "b3 fr\nb1 de\nb2 it\n")
    combine_data_dirs(tmp_path / "out", [tmp_path / "a", tmp_path / "b"])
    assert (tmp_path / "out" / "lang").read_text() == "a1 de\na2 de\na3 de\nb1 de\nb2 it\nb3 fr\n"
    leftovers = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert leftovers == ["lang", "text"]


def test_combine_refuses_an_id_repeated_apart_in_an_unsorted_table(tmp_path):
    for name in ("a", "b"):
        write(tmp_path / name / "text", f"{name}1 x\n{name}2 y\n")
    write(tmp_path / "a" / "lang", "a1 de\na2 de\n")
    write(tmp_path / "b" / "lang", "b2 de\nb1 de\nb2 fr\n")
    assert error_of(combine_data_dirs, tmp_path / "out", [tmp_path / "a", tmp_path / "b"]) == (
        f"{tmp_path / 'b' / 'lang'}:3: key 'b2': duplicate id (first at line 1)"
    )
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.tmp").exists()


def test_write_sorted_tables_sorts_on_disk_like_c_sort(tmp_path, monkeypatch):
    monkeypatch.setattr(datadir, "SORT_MEMORY", "64K")  # spill to temporary files, then merge
    keys = [f"k{(i * 7919) % 5000}{'é' if i % 3 else ''}" for i in range(5000)]
    rows = ((k, (f"value of {k}", "tag")) for k in keys)  # a generator: nothing held
    (tmp_path / "d").mkdir()
    assert write_sorted_tables(tmp_path / "d", ["a", "b"], rows, where="out") == 5000
    lines = (tmp_path / "d" / "a").read_text(encoding="utf-8").splitlines()
    assert lines == [f"{k} value of {k}" for k in sorted(keys)]
    assert list(read_kaldi_map(tmp_path / "d" / "b")) == sorted(keys)
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["a", "b"]  # no sort leftovers


def test_write_sorted_tables_names_a_repeated_id(tmp_path):
    (tmp_path / "d").mkdir()
    rows = [("b", ("1",)), ("a", ("2",)), ("b", ("3",))]
    assert error_of(write_sorted_tables, tmp_path / "d", ["t"], rows, where="data/x") == (
        "data/x: key 'b': two entries of the input have this id"
    )


def test_audio_checks_overlap_and_name_the_first_bad_entry_in_file_order(tmp_path, monkeypatch):
    """--check_audio reads headers in threads (a network file system's waits overlap) over chunks of
    the table; the problem raised is the first in file order, across chunk boundaries too."""
    import threading
    import time

    active, most = 0, 0
    lock = threading.Lock()

    def slow_problem(path):
        nonlocal active, most
        with lock:
            active += 1
            most = max(most, active)
        time.sleep(0.1)  # a header read on a slow file system
        with lock:
            active -= 1
        return "bad" if path.name in ("u12.wav", "u30.wav") else None

    monkeypatch.setattr(datadir, "audio_problem", slow_problem)
    monkeypatch.setattr(datadir, "AUDIO_CHECK_CHUNK", 8)
    keys = [f"u{i:02d}" for i in range(40)]
    write(tmp_path / "wav.scp", "".join(f"{k} /data/{k}.wav\n" for k in keys))
    with pytest.raises(InputError) as info:
        datadir._check_audio(tmp_path / "wav.scp")
    assert str(info.value) == f"{tmp_path / 'wav.scp'}:13: key 'u12': bad"
    assert most > 1  # checked side by side


def test_fix_spk2utt_refuses_an_utterance_repeated_lines_apart(tmp_path):
    """utt2spk out of order with an utterance on lines 1 and 3: refused at its second line, as when the
    whole table was held (fix_spk2utt runs without validation)."""
    write(tmp_path / "d" / "utt2spk", "u2 s1\nu1 s2\nu2 s3\n")
    assert error_of(fix_spk2utt, tmp_path / "d") == (
        f"{tmp_path / 'd' / 'utt2spk'}:3: key 'u2': duplicate id (first at line 1)"
    )
    assert not (tmp_path / "d" / "spk2utt").exists()
    write(tmp_path / "d" / "utt2spk", "u2 s1\nu1 s2\nu3 s1\n")  # out of order, no repeat: fine
    assert (fix_spk2utt(tmp_path / "d")).read_text() == "s1 u2 u3\ns2 u1\n"
