"""Kaldi data directories as ESPnet2 recipes use them: read, write, validate, combine.

A data dir holds one table per file, ``<key> <value>`` per line, sorted by key in C (byte) order::

    wav.scp          <utt> <path> | <utt> <command ... |>   (keyed by recording when segments exists)
    segments         <utt> <recording> <start_s> <end_s>
    text, text.<x>   <utt> <transcript>
    utt2spk          <utt> <speaker>           spk2utt   <speaker> <utt> <utt> ...
    feats.scp, utt2num_frames, utt2<x>         keyed by utterance
    spk2gender, spk2<x>                        keyed by speaker;   reco2<x> keyed by recording

Command line::

    python -m espnet_ext.data.datadir validate <dir> [--check_audio] [--require wav.scp,text,utt2spk]
    python -m espnet_ext.data.datadir fix_spk2utt <dir>
    python -m espnet_ext.data.datadir combine <out_dir> <dir> <dir> ...

Readers write their output with ``write_data_dir`` (tables + derived spk2utt, validated, atomic);
corpora too large to hold (WMT's millions of pairs) with ``write_sorted_tables``. Validation,
``fix_spk2utt`` and ``combine_data_dirs`` stream their tables: memory does not grow with the number of
utterances (GNU ``sort`` orders what has to be reordered, spilling to disk).
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import itertools
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.fileio import atomic_write, read_utf8_lines

logger = logging.getLogger(__name__)

PathLike = str | Path

DEFAULT_REQUIRED = ("wav.scp", "text", "utt2spk")
_FIELD_SEP = re.compile(
    r"[ \t]+"
)  # Kaldi splits on ASCII blanks only; other spaces belong to the text
_AUDIO_SUFFIXES = (".wav", ".flac", ".sph", ".mp3", ".ogg", ".opus", ".m4a", ".aac", ".au", ".aiff")
# GNU sort's buffer (-S): what one sort holds in memory before it spills sorted runs to its -T dir
SORT_MEMORY = "512M"


class Entry(NamedTuple):
    line: int
    key: str
    value: str


def iter_kaldi_entries(
    path: PathLike, allow_empty: bool = False, what: str = "value"
) -> Iterator[Entry]:
    """``<id> <value>`` lines of a UTF-8 table, in file order, one at a time (ids not compared).

    Blank lines and (unless ``allow_empty``) lines holding only an id are refused with the file and
    line; ``what`` names the missing value in that message (e.g. "transcript").
    """
    for number, line in read_utf8_lines(path):
        fields = _FIELD_SEP.split(line.strip(" \t"), maxsplit=1)
        key = fields[0]
        if not key:
            raise InputError("blank line", path=path, line=number)
        value = fields[1] if len(fields) > 1 else ""
        if not value and not allow_empty:
            raise InputError(
                f"empty {what}: the line has only the id", path=path, line=number, key=key
            )
        yield Entry(number, key, value)


def read_kaldi_entries(
    path: PathLike, allow_empty: bool = False, what: str = "value"
) -> list[Entry]:
    """``<id> <value>`` lines of a UTF-8 table, in file order, in any order of ids.

    Refused with the file and line: what :func:`iter_kaldi_entries` refuses, and duplicate ids.
    """
    entries: list[Entry] = []
    first_line: dict[str, int] = {}
    for entry in iter_kaldi_entries(path, allow_empty, what):
        if entry.key in first_line:
            raise InputError(
                f"duplicate id (first at line {first_line[entry.key]})",
                path=path,
                line=entry.line,
                key=entry.key,
            )
        first_line[entry.key] = entry.line
        entries.append(entry)
    return entries


def sorted_entries(path: PathLike, entries: Iterable[Entry]) -> Iterator[Entry]:
    """``entries`` of the table ``path``, refusing the first that repeats an id or breaks C order.

    In a sorted table a repeated id is next to its first line, so this needs no memory of the ids.
    """
    previous = None
    for entry in entries:
        if previous is not None and entry.key <= previous.key:
            if entry.key == previous.key:
                message = f"duplicate id (first at line {previous.line})"
            else:
                message = (
                    f"not sorted: comes after '{previous.key}' (line {previous.line}); "
                    "sort it with LC_ALL=C sort"
                )
            raise InputError(message, path=path, line=entry.line, key=entry.key)
        previous = entry
        yield entry


def without_adjacent_repeats(path: PathLike, entries: Iterable[Entry]) -> Iterator[Entry]:
    """``entries`` of the table ``path``, refusing an id repeated on consecutive lines: where a sorted
    table has its duplicates, found without holding the ids."""
    previous = None
    for entry in entries:
        if previous is not None and entry.key == previous.key:
            raise InputError(
                f"duplicate id (first at line {previous.line})",
                path=path,
                line=entry.line,
                key=entry.key,
            )
        previous = entry
        yield entry


def entries_in_id_order(
    path: PathLike, entries: Iterable[Entry], tmp_dir: PathLike
) -> Iterator[Entry]:
    """``entries`` of the table ``path`` in C order of their ids, refusing a repeated id at its second
    line (naming the first) wherever the repeat is, without holding them: they go to a file in
    ``tmp_dir``, which GNU sort orders by id and line when they came out of order."""
    lines, in_order, previous = Path(tmp_dir) / "entries_by_id", True, None
    with open(lines, "w", encoding="utf-8") as f:
        for e in without_adjacent_repeats(path, entries):
            in_order = in_order and (previous is None or previous < e.key)
            previous = e.key
            f.write(f"{e.key} {e.line} {e.value}\n")
    if not in_order:  # each id's lines neighbours, its first line first
        gnu_sort([lines], lines, tmp_dir, keys=("1,1", "2,2n"))
    try:
        ordered = (line.split(" ", 2) for _, line in read_utf8_lines(lines))
        yield from without_adjacent_repeats(path, (Entry(int(n), k, v) for k, n, v in ordered))
    finally:
        lines.unlink(missing_ok=True)


def read_kaldi_map(
    path: PathLike, allow_empty: bool = False, what: str = "value"
) -> dict[str, str]:
    """``{id: value}`` of a Kaldi table (see :func:`read_kaldi_entries` for what is refused)."""
    return {e.key: e.value for e in read_kaldi_entries(path, allow_empty, what)}


def write_kaldi_map(path: PathLike, mapping: Mapping[str, str | Sequence[str]]) -> None:
    """Write a table sorted by id in C order, atomically; list values are joined by spaces.

    Python orders str by code point, which is the byte order of their UTF-8 (what ``LC_ALL=C sort``
    uses).
    """
    with atomic_write(path) as f:
        for key in sorted(mapping):
            value = mapping[key]
            f.write(table_line(path, key, value if isinstance(value, str) else " ".join(value)))


def table_line(path: PathLike, key: str, value: str) -> str:
    """``<key> <value>\\n``; an InputError at ``path`` when it would not read back as that entry."""
    if not key or _FIELD_SEP.search(key) or "\n" in key + value:
        raise InputError(
            f"cannot write this id with value {value!r} as one table line", path=path, key=key
        )
    return f"{key} {value}\n" if value else f"{key}\n"


def gnu_sort(
    inputs: Sequence[PathLike], output: PathLike, tmp_dir: PathLike, keys: Sequence[str] = ("1,1",)
) -> None:
    """``LC_ALL=C sort`` of the lines of ``inputs``, whose fields are separated by single spaces, by
    the ``-k`` specs ``keys``, into ``output``.

    Memory stays at :data:`SORT_MEMORY` whatever the size: sort spills sorted runs into ``tmp_dir``.
    Comparing fields in C order is Python's ``str`` order for fields without blanks, so the result
    is what ``sorted`` gives (and what validation checks).
    """
    command = ["sort", "-t", " ", *(f"-k{k}" for k in keys), "-S", SORT_MEMORY, "-T", str(tmp_dir)]
    command += ["-o", str(output), *map(str, inputs)]
    done = subprocess.run(
        command, env={**os.environ, "LC_ALL": "C"}, stderr=subprocess.PIPE, text=True
    )
    if done.returncode != 0:  # a full disk, most likely: not a problem of the input
        raise OSError(f"{' '.join(command)} failed: {done.stderr.strip()}")


def write_sorted_tables(
    directory: PathLike,
    names: Sequence[str],
    rows: Iterable[tuple[str, Sequence[str]]],
    where: PathLike,
) -> int:
    """Write the tables ``names`` into ``directory`` from ``rows`` of ``(id, value of each table)``,
    without holding them: lines go to unsorted files, then GNU sort (:func:`gnu_sort`, its temporary
    files under ``directory``) orders them. Returns the number of rows.

    An id given to two rows is an InputError naming it, located at ``where`` (the data dir being
    written: ``directory`` is its temporary build).
    """
    directory = Path(directory)
    work = directory / ".unsorted"  # hidden: not a table of the dir
    work.mkdir()
    count = 0
    with contextlib.ExitStack() as stack:
        files = [stack.enter_context(open(work / n, "w", encoding="utf-8")) for n in names]
        for key, values in rows:
            for f, name, value in zip(files, names, values):
                f.write(table_line(directory / name, key, value))
            count += 1
    for name in names:
        gnu_sort([work / name], directory / name, work)
        (work / name).unlink()
    shutil.rmtree(work)
    if names:
        entries = iter_kaldi_entries(directory / names[0], allow_empty=True)
        previous = None
        for entry in entries:
            if entry.key == previous:
                raise InputError("two entries of the input have this id", path=where, key=previous)
            previous = entry.key
    return count


def spk2utt_from_utt2spk(utt2spk: Mapping[str, str]) -> dict[str, list[str]]:
    """``{speaker: [utterances in C order]}``."""
    spk2utt: dict[str, list[str]] = {}
    for utt in sorted(utt2spk):
        spk2utt.setdefault(utt2spk[utt], []).append(utt)
    return spk2utt


def speaker_groups(utt2spk: PathLike, tmp_dir: PathLike) -> Iterator[tuple[str, list[str]]]:
    """``(speaker, [its utterances in C order])`` of the table ``utt2spk``, speakers in C order, one
    speaker at a time: GNU sort regroups the lines by speaker (temporary files in ``tmp_dir``).

    A speaker id holding a blank (it could not be a spk2utt key) and a repeated utterance id are refused
    with their line (in a table out of C order, after sorting its ids on disk).
    """
    tmp_dir = Path(tmp_dir)
    by_utt, by_speaker = tmp_dir / "by_utt", tmp_dir / "by_speaker"

    def with_speaker_ids(entries: Iterable[Entry]) -> Iterator[Entry]:
        for e in entries:
            if _FIELD_SEP.search(e.value):
                raise InputError(
                    f"speaker id '{e.value}' has a blank: it cannot be a spk2utt key",
                    path=utt2spk,
                    line=e.line,
                    key=e.key,
                )
            yield e

    with open(by_utt, "w", encoding="utf-8") as f:
        entries = with_speaker_ids(iter_kaldi_entries(utt2spk))
        for e in entries_in_id_order(utt2spk, entries, tmp_dir):
            f.write(f"{e.value} {e.key}\n")
    gnu_sort([by_utt], by_speaker, tmp_dir, keys=("1,1", "2,2"))
    by_utt.unlink()
    speaker, utts = None, []
    for _, line in read_utf8_lines(by_speaker):
        spk, utt = line.split(" ")
        if spk != speaker and utts:
            yield speaker, utts
            utts = []
        speaker = spk
        utts.append(utt)
    if utts:
        yield speaker, utts


def key_kind(name: str, has_segments: bool) -> str | None:
    """What the ids of the table file ``name`` are: "utterance", "recording", "speaker" or None (unknown)."""
    if name in ("text", "segments", "feats.scp", "image.scp", "video.scp") or name.startswith(
        ("text.", "utt2")
    ):
        return "utterance"
    if name == "wav.scp":
        return "recording" if has_segments else "utterance"
    if name.startswith("reco2"):
        return "recording"
    if name.startswith("spk2") or name == "cmvn.scp":
        return "speaker"
    return None


def table_files(data_dir: Path) -> list[Path]:
    """Top-level files of a data dir, in name order; hidden files (markers, temporaries) are not tables."""
    return sorted(p for p in data_dir.iterdir() if p.is_file() and not p.name.startswith("."))


@contextlib.contextmanager
def atomic_dir(dst: PathLike) -> Iterator[Path]:
    """Build a directory in ``<dst>.tmp`` and move it to ``dst`` only if the block succeeds.

    An existing ``dst`` is replaced; leftovers of an interrupted earlier run are removed first.
    """
    dst = Path(dst)
    tmp = dst.with_name(dst.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if dst.exists():
        old = dst.with_name(dst.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(dst, old)
        os.replace(tmp, dst)
        shutil.rmtree(old)
    else:
        os.replace(tmp, dst)


def audio_problem(path: Path) -> str | None:
    """Why ``path`` is not a usable audio file, or None when soundfile can read a non-empty signal."""
    import soundfile

    if not path.is_file():
        return f"audio file '{path}' does not exist"
    try:
        info = soundfile.info(str(path))
    except Exception as e:  # soundfile raises its own error types, and RuntimeError/TypeError
        return f"cannot read audio file '{path}': {e}"
    if info.frames == 0:
        return f"audio file '{path}' has no samples"
    return None


def validate_data_dir(
    path: PathLike, require: Sequence[str] = DEFAULT_REQUIRED, check_audio: bool = False
) -> list[str]:
    """Check a data dir and return its utterance ids (C order); raise InputError at the first problem.

    Checked: the ``require``d files exist; every known table is UTF-8, without blank lines,
    duplicate ids or empty values, and sorted; numeric columns parse; segments point to a recording
    of wav.scp and have start < end; all utterance-keyed tables hold the same ids; spk2utt agrees
    with utt2spk. With ``check_audio`` every wav.scp entry must name readable audio (for a ``cmd ...
    |`` entry, only the existence of the files it reads is checked: nothing is run). Tables are read
    line by line, one at a time, in name order; within a table the first bad line is the one named.
    The returned list is all that grows with the utterances: :func:`check_data_dir` returns their
    number only.
    """
    ids: list[str] = []
    _validate(Path(path), require, check_audio, ids)
    return ids


def check_data_dir(
    path: PathLike, require: Sequence[str] = DEFAULT_REQUIRED, check_audio: bool = False
) -> int:
    """:func:`validate_data_dir` returning the number of utterances: memory does not grow with them."""
    return _validate(Path(path), require, check_audio, None)


def _validate(path: Path, require: Sequence[str], check_audio: bool, ids: list | None) -> int:
    """Validation (see :func:`validate_data_dir`), appending the utterance ids to ``ids`` when given;
    returns their number."""
    if not path.is_dir():
        raise InputError(
            "data dir does not exist (expected a Kaldi data dir with wav.scp, text, utt2spk)",
            path=path,
        )
    present = {p.name for p in table_files(path)}
    for name in require:
        if name not in present:
            found = ", ".join(sorted(present)) or "no files"
            raise InputError(f"required file is missing; the dir has: {found}", path=path / name)
    has_segments = "segments" in present
    tables = sorted(name for name in present if key_kind(name, has_segments) is not None)
    utterance_tables = [n for n in tables if key_kind(n, has_segments) == "utterance"]
    if not utterance_tables:
        raise InputError(
            "no utterance table (text, wav.scp, utt2spk, feats.scp, ...) in the data dir", path=path
        )
    source = "segments" if has_segments else "wav.scp"
    order = ["text", source, "utt2spk", "feats.scp"]
    utterance_tables.sort(key=lambda n: (order.index(n) if n in order else len(order), n))
    reference = utterance_tables[0]

    count = 0
    recordings: set[str] | None = None  # the ids of wav.scp, which segments point to: recordings
    for name in tables:
        number_problem = _NUMBER_CHECKS.get(name)
        keep_recordings = has_segments and name == "wav.scp"
        if keep_recordings:
            recordings = set()
        what = "transcript" if name.startswith("text") else "value"
        for e in sorted_entries(path / name, iter_kaldi_entries(path / name, what=what)):
            problem = number_problem and number_problem(e.value)
            if problem:
                raise InputError(problem, path=path / name, line=e.line, key=e.key)
            if keep_recordings:
                recordings.add(e.key)
            if name == reference:
                count += 1
                if ids is not None:
                    ids.append(e.key)
    if has_segments:
        for e in iter_kaldi_entries(path / "segments"):
            problem = _segment_problem(e.value.split(), recordings)
            if problem:
                raise InputError(problem, path=path / "segments", line=e.line, key=e.key)
    for name in utterance_tables[1:]:
        _check_same_ids(path / reference, path / name)
    if "spk2utt" in present:
        if "utt2spk" not in present:
            raise InputError("spk2utt without utt2spk", path=path / "spk2utt")
        _check_spk2utt(path)
    if check_audio and "wav.scp" in present:
        _check_audio(path / "wav.scp")
    return count


def _integer_problem(value: str) -> str | None:
    return None if value.isdigit() else f"'{value}' is not a non-negative integer"


def _duration_problem(value: str) -> str | None:
    try:
        float(value)
    except ValueError:
        return f"duration '{value}' is not a number"
    return None


_NUMBER_CHECKS = {
    "utt2num_frames": _integer_problem,
    "utt2num_samples": _integer_problem,
    "utt2dur": _duration_problem,
}


def _segment_problem(fields: list[str], recordings: set | None) -> str | None:
    if len(fields) != 3:
        return f"expected '<utt> <recording> <start> <end>', got {len(fields) + 1} fields"
    recording, start, end = fields
    try:
        start_s, end_s = float(start), float(end)
    except ValueError:
        return f"start '{start}' and end '{end}' must be numbers (seconds)"
    if recordings is not None and recording not in recordings:
        return f"recording '{recording}' is not in wav.scp"
    if not 0 <= start_s < end_s:
        return f"segment start {start} must be >= 0 and < its end {end}"
    return None


def _check_same_ids(path_a: Path, path_b: Path) -> None:
    """Two sorted tables hold the same ids: walked side by side, as a merge, without holding them."""
    a_entries = iter_kaldi_entries(path_a, allow_empty=True)
    b_entries = iter_kaldi_entries(path_b, allow_empty=True)
    a, b = next(a_entries, None), next(b_entries, None)
    only_a = only_b = 0
    first_a = first_b = None
    while a is not None or b is not None:
        if b is None or (a is not None and a.key < b.key):
            only_a += 1
            first_a = first_a or a
            a = next(a_entries, None)
        elif a is None or b.key < a.key:
            only_b += 1
            first_b = first_b or b
            b = next(b_entries, None)
        else:
            a, b = next(a_entries, None), next(b_entries, None)
    if not only_a and not only_b:
        return
    counts = f"{only_a} id(s) only in {path_a.name}, {only_b} only in {path_b.name}"
    if first_a is not None:
        first, where, other = first_a, path_a, path_b
    else:
        first, where, other = first_b, path_b, path_a
    message = f"id is not in {other.name}; {only_a + only_b - 1} more mismatch ({counts})"
    raise InputError(message, path=where, line=first.line, key=first.key)


def _check_spk2utt(path: Path) -> None:
    """spk2utt (sorted by speaker) against utt2spk regrouped by speaker, one speaker at a time."""
    fix = f"; regenerate it with: python -m espnet_ext.data.datadir fix_spk2utt {path}"
    # Of the speakers spk2utt lacks, the one named is the first in utterance order, as a
    # {speaker: utterances} built from utt2spk in utterance order would list them.
    missing: tuple[str, str] | None = None  # (first utterance, speaker)

    def lacked(group: tuple[str, list[str]]) -> None:
        nonlocal missing
        candidate = (group[1][0], group[0])
        missing = candidate if missing is None else min(missing, candidate)

    with (
        tempfile.TemporaryDirectory(prefix="spk2utt.") as tmp,
        contextlib.closing(speaker_groups(path / "utt2spk", tmp)) as groups,
    ):
        group = next(groups, None)
        for e in iter_kaldi_entries(path / "spk2utt"):
            while group is not None and group[0] < e.key:
                lacked(group)
                group = next(groups, None)
            if group is None or group[0] != e.key:
                raise InputError(
                    f"speaker is not in utt2spk{fix}", path=path / "spk2utt", line=e.line, key=e.key
                )
            utts, expected = e.value.split(), group[1]
            if sorted(utts) != expected:
                extra = sorted(set(utts) - set(expected))
                lacking = sorted(set(expected) - set(utts))
                detail = (
                    f"lists {extra or 'nothing'} not given to this speaker by utt2spk, "
                    f"misses {lacking or 'nothing'}"
                    if extra or lacking
                    else "lists an utterance twice"
                )
                raise InputError(
                    f"disagrees with utt2spk: {detail}{fix}",
                    path=path / "spk2utt",
                    line=e.line,
                    key=e.key,
                )
            group = next(groups, None)
        while group is not None:
            lacked(group)
            group = next(groups, None)
    if missing is not None:
        raise InputError(
            f"speaker of utt2spk is missing from spk2utt{fix}",
            path=path / "spk2utt",
            key=missing[1],
        )


# Audio headers checked at once: each check mostly waits on the file system (a network one on a cluster:
# milliseconds a file, minutes for LibriSpeech's 281k serially), so threads overlap the waits.
AUDIO_CHECK_THREADS = 16
AUDIO_CHECK_CHUNK = 4096  # entries in flight: the memory of a chunk, whatever the table's size


def _check_audio(wav_scp: Path) -> None:
    """Every entry's audio readable; the first problem in file order is the one raised."""
    entries = iter_kaldi_entries(wav_scp)
    with ThreadPoolExecutor(AUDIO_CHECK_THREADS) as pool:
        while chunk := list(itertools.islice(entries, AUDIO_CHECK_CHUNK)):
            for e, problem in zip(chunk, pool.map(_entry_audio_problem, chunk)):
                if problem:
                    raise InputError(problem, path=wav_scp, line=e.line, key=e.key)


def _entry_audio_problem(entry: Entry) -> str | None:
    for audio, readable in _audio_inputs(entry.value):
        if readable:
            problem = audio_problem(audio)
        else:
            problem = None if audio.exists() else f"'{audio}' does not exist"
        if problem:
            return problem
    return None


def _audio_inputs(value: str) -> list[tuple]:
    """``(path, readable_by_soundfile)`` for the files a wav.scp value reads."""
    if value.endswith("|"):
        return [(Path(f), False) for f in _pipe_input_files(value[:-1])]
    ark = re.fullmatch(r"(.+\.ark):\d+", value)
    if (
        ark
    ):  # an offset into a Kaldi archive: check the archive exists (soundfile cannot read inside it)
        return [(Path(ark.group(1)), False)]
    if Path(value).exists() or len(value.split()) == 1:
        return [(Path(value), True)]
    return [
        (Path(v), True) for v in value.split()
    ]  # ESPnet's multi-column sound: one file per channel


def _pipe_input_files(command: str) -> list[str]:
    """Arguments of a shell pipeline that look like input files (not programs, options or variables)."""
    try:
        tokens = shlex.split(command)
    except ValueError:
        return []
    files, expect_program = [], True
    for token in tokens:
        if token == "|":
            expect_program = True
        elif expect_program:
            expect_program = False
        elif token.startswith("-") or "$" in token:
            continue
        elif "/" in token or token.lower().endswith(_AUDIO_SUFFIXES):
            files.append(token)
    return files


def fix_spk2utt(data_dir: PathLike) -> Path:
    """Rewrite ``spk2utt`` from ``utt2spk`` (:func:`speaker_groups`, one speaker held at a time);
    returns its path."""
    data_dir = Path(data_dir)
    target = data_dir / "spk2utt"
    # sort's files go to a hidden dir of the data dir: its disk has room for the tables
    with (
        tempfile.TemporaryDirectory(prefix=".spk2utt.", dir=data_dir) as tmp,
        atomic_write(target) as f,
    ):
        for speaker, utts in speaker_groups(data_dir / "utt2spk", tmp):
            f.write(f"{speaker} {' '.join(utts)}\n")
    return target


def segment_times(start: str, end: str, path: PathLike, line: int) -> tuple[float, float]:
    """A release's segment bounds as seconds, ``0 <= start < end``; InputError at ``path:line`` if not."""
    try:
        start_s, end_s = float(start), float(end)
    except ValueError:
        raise InputError(
            f"start {start!r} and end {end!r} must be seconds", path=path, line=line
        ) from None
    if not 0 <= start_s < end_s:
        raise InputError(
            f"segment start {start_s} must be >= 0 and < end {end_s}", path=path, line=line
        )
    return start_s, end_s


def write_data_dir(
    dst: PathLike,
    tables: Mapping[str, Mapping[str, str | Sequence[str]]],
    files: Mapping[str, str] | None = None,
) -> list[str]:
    """Write a reader's data dir at ``dst`` whole or not at all; returns its utterance ids.

    ``tables``: file name -> ``{id: value}`` (wav.scp, segments, text, utt2spk, text.<lang>, ...),
    each written sorted by :func:`write_kaldi_map`; spk2utt is derived from utt2spk. ``files``: name
    -> content written as given (a report such as a list of skipped segments, not a table). The dir
    is validated (:func:`validate_data_dir`) before it replaces ``dst``, so a reader's mistake leaves
    nothing that looks finished.
    """
    with atomic_dir(dst) as tmp:
        for name, table in tables.items():
            write_kaldi_map(tmp / name, table)
        write_kaldi_map(tmp / "spk2utt", spk2utt_from_utt2spk(tables["utt2spk"]))
        for name, content in (files or {}).items():
            (tmp / name).write_text(content, encoding="utf-8")
        utts = validate_data_dir(tmp)
    return utts


def combine_data_dirs(out_dir: PathLike, sources: Sequence[PathLike]) -> int:
    """Concatenate data dirs (Kaldi's combine_data.sh): tables present in every source, spk2utt rebuilt.

    An utterance id in two sources is an error naming the later source's line; a speaker/recording
    id may repeat with the same value. Tables missing from some sources are left out and named on
    stderr. The sources' tables are merged line by line (:func:`merge_tables`), so memory
    does not grow with their size. Returns the number of combined utterances.
    """
    sources = [Path(s) for s in sources]
    if not sources:
        raise InputError("nothing to combine: give at least one source data dir", path=out_dir)
    for source in sources:
        check_data_dir(source, require=())
    names = [{p.name for p in table_files(s)} - {"spk2utt", "removed.txt"} for s in sources]
    common = set.intersection(*names)
    has_segments = "segments" in common
    for name in sorted(set.union(*names) - common):
        logger.warning(f"combine: leaving out {name}: not in every source")
    with atomic_dir(out_dir) as tmp:
        for name in sorted(common):
            repeats = key_kind(name, has_segments) != "utterance"
            merge_tables([source / name for source in sources], tmp / name, repeats)
        if "utt2spk" in common:
            fix_spk2utt(tmp)
        count = check_data_dir(tmp, require=())
    return count


def merge_tables(paths: Sequence[Path], out: Path, repeats: bool = False) -> None:
    """Write the sorted tables ``paths`` merged into one sorted table ``out``, streaming.

    An input out of C order (a table validation does not know, which nothing sorted; Kaldi's
    combine_data.sh sorts every table) is sorted on disk first (:func:`entries_in_id_order`, in a
    hidden dir beside ``out``). An id repeated within an input is refused at its second line; an id
    in two inputs is an error at the later input's line naming the earlier one, unless ``repeats``
    (speaker and recording tables) and the values are equal: then it is written once.
    """
    work = out.with_name(f".sorting_{out.name}")

    def keyed(index: int, path: Path) -> Iterator[tuple[str, int, Entry]]:
        entries = iter_kaldi_entries(path, allow_empty=True)
        if not in_id_order(path):
            (work / str(index)).mkdir(parents=True, exist_ok=True)
            entries = entries_in_id_order(path, entries, work / str(index))
        for e in sorted_entries(path, entries):
            yield e.key, index, e

    # heapq.merge is stable on (key, input index): an id's lines come in the order of the inputs
    merged = heapq.merge(*(keyed(i, path) for i, path in enumerate(paths)))
    try:
        _write_merged(merged, paths, out, repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def in_id_order(path: Path) -> bool:
    """Whether no line of the table ``path`` has a smaller id than the line before it (one streaming
    pass; a repeated id is left to the readers to refuse)."""
    previous = None
    for e in iter_kaldi_entries(path, allow_empty=True):
        if previous is not None and e.key < previous:
            return False
        previous = e.key
    return True


def _write_merged(
    merged: Iterable[tuple[str, int, Entry]], paths: Sequence[Path], out: Path, repeats: bool
) -> None:
    with atomic_write(out) as f:
        last: tuple[str, str, Path] | None = None  # (key, value, input) of the last line written
        for key, index, e in merged:
            if last is not None and key == last[0]:
                if not repeats or e.value != last[1]:
                    raise InputError(
                        f"id is also in {last[2]}", path=paths[index], line=e.line, key=key
                    )
                continue
            f.write(table_line(out, key, e.value))
            last = (key, e.value, paths[index])


def command_parser(module: str, doc: str) -> tuple[argparse.ArgumentParser, Any]:
    """The parser of ``python -m <module>`` described by the first line of ``doc``, and its required
    sub-commands (``prepare``, ``check``, ...) to add to: how a data command line starts."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc.split("\n")[0])
    return parser, parser.add_subparsers(dest="command", required=True)


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser, commands = command_parser("espnet_ext.data.datadir", __doc__)
    validate = commands.add_parser(
        "validate", help="check a data dir; exit 1 with file:line on the first problem"
    )
    validate.add_argument("data_dir")
    validate.add_argument(
        "--check_audio", action="store_true", help="check that wav.scp names readable audio"
    )
    validate.add_argument(
        "--require",
        default=",".join(DEFAULT_REQUIRED),
        help="comma-separated files that must exist",
    )
    fix = commands.add_parser("fix_spk2utt", help="regenerate spk2utt from utt2spk")
    fix.add_argument("data_dir")
    combine = commands.add_parser("combine", help="combine data dirs into a new one")
    combine.add_argument("out_dir")
    combine.add_argument("sources", nargs="+")
    args = parser.parse_args(argv)
    if args.command == "validate":
        require = [name for name in args.require.split(",") if name]
        count = check_data_dir(args.data_dir, require=require, check_audio=args.check_audio)
        print(f"{args.data_dir}: ok, {count} utterances")
    elif args.command == "fix_spk2utt":
        print(f"wrote {fix_spk2utt(args.data_dir)}")
    else:
        count = combine_data_dirs(args.out_dir, args.sources)
        print(f"{args.out_dir}: combined {count} utterances from {len(args.sources)} data dirs")


if __name__ == "__main__":
    sys.exit(main())
