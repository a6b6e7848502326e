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

Readers write their output with ``write_data_dir`` (tables + derived spk2utt, validated, atomic).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import shlex
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
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


class Entry(NamedTuple):
    line: int
    key: str
    value: str


def read_kaldi_entries(
    path: PathLike, allow_empty: bool = False, what: str = "value"
) -> list[Entry]:
    """``<id> <value>`` lines of a UTF-8 table, in file order.

    Blank lines, duplicate ids and (unless ``allow_empty``) lines holding only an id are refused
    with the file and line; ``what`` names the missing value in that message (e.g. "transcript").
    """
    entries: list[Entry] = []
    first_line: dict[str, int] = {}
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
        if key in first_line:
            raise InputError(
                f"duplicate id (first at line {first_line[key]})", path=path, line=number, key=key
            )
        first_line[key] = number
        entries.append(Entry(number, key, value))
    return entries


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
            if not isinstance(value, str):
                value = " ".join(value)
            if not key or _FIELD_SEP.search(key) or "\n" in key + value:
                raise InputError(
                    f"cannot write this id with value {value!r} as one table line",
                    path=path,
                    key=key,
                )
            f.write(f"{key} {value}\n" if value else f"{key}\n")


def spk2utt_from_utt2spk(utt2spk: Mapping[str, str]) -> dict[str, list[str]]:
    """``{speaker: [utterances in C order]}``."""
    spk2utt: dict[str, list[str]] = {}
    for utt in sorted(utt2spk):
        spk2utt.setdefault(utt2spk[utt], []).append(utt)
    return spk2utt


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
    |`` entry, only the existence of the files it reads is checked: nothing is run).
    """
    path = Path(path)
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
    tables = {
        name: read_kaldi_entries(
            path / name, what="transcript" if name.startswith("text") else "value"
        )
        for name in sorted(present)
        if key_kind(name, has_segments) is not None
    }
    for name, entries in tables.items():
        _check_sorted(path / name, entries)
    _check_numbers(path, tables)
    if has_segments:
        _check_segments(path, tables["segments"], tables.get("wav.scp"))

    utterance_tables = [n for n in tables if key_kind(n, has_segments) == "utterance"]
    if not utterance_tables:
        raise InputError(
            "no utterance table (text, wav.scp, utt2spk, feats.scp, ...) in the data dir", path=path
        )
    source = "segments" if has_segments else "wav.scp"
    order = ["text", source, "utt2spk", "feats.scp"]
    utterance_tables.sort(key=lambda n: (order.index(n) if n in order else len(order), n))
    reference = utterance_tables[0]
    for name in utterance_tables[1:]:
        _check_same_ids(path / reference, tables[reference], path / name, tables[name])

    if "spk2utt" in tables:
        if "utt2spk" not in tables:
            raise InputError("spk2utt without utt2spk", path=path / "spk2utt")
        _check_spk2utt(path, tables["utt2spk"], tables["spk2utt"])
    if check_audio and "wav.scp" in tables:
        _check_audio(path / "wav.scp", tables["wav.scp"])
    return [e.key for e in tables[reference]]


def _check_sorted(path: Path, entries: list[Entry]) -> None:
    for previous, entry in zip(entries, entries[1:]):
        if entry.key < previous.key:
            raise InputError(
                f"not sorted: comes after '{previous.key}' (line {previous.line}); sort it with LC_ALL=C sort",
                path=path,
                line=entry.line,
                key=entry.key,
            )


def _check_numbers(path: Path, tables: dict[str, list[Entry]]) -> None:
    for name in ("utt2num_frames", "utt2num_samples"):
        for e in tables.get(name, []):
            if not e.value.isdigit():
                raise InputError(
                    f"'{e.value}' is not a non-negative integer",
                    path=path / name,
                    line=e.line,
                    key=e.key,
                )
    for e in tables.get("utt2dur", []):
        try:
            float(e.value)
        except ValueError:
            raise InputError(
                f"duration '{e.value}' is not a number",
                path=path / "utt2dur",
                line=e.line,
                key=e.key,
            ) from None


def _check_segments(path: Path, segments: list[Entry], wav_scp: list[Entry] | None) -> None:
    recordings = None if wav_scp is None else {e.key for e in wav_scp}
    for e in segments:
        problem = _segment_problem(e.value.split(), recordings)
        if problem:
            raise InputError(problem, path=path / "segments", line=e.line, key=e.key)


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


def _check_same_ids(path_a: Path, a: list[Entry], path_b: Path, b: list[Entry]) -> None:
    keys_a, keys_b = {e.key for e in a}, {e.key for e in b}
    only_a = [e for e in a if e.key not in keys_b]
    only_b = [e for e in b if e.key not in keys_a]
    if not only_a and not only_b:
        return
    counts = f"{len(only_a)} id(s) only in {path_a.name}, {len(only_b)} only in {path_b.name}"
    if only_a:
        first, where, other = only_a[0], path_a, path_b
    else:
        first, where, other = only_b[0], path_b, path_a
    more = len(only_a) + len(only_b) - 1
    message = f"id is not in {other.name}; {more} more mismatch ({counts})"
    raise InputError(message, path=where, line=first.line, key=first.key)


def _check_spk2utt(path: Path, utt2spk: list[Entry], spk2utt: list[Entry]) -> None:
    expected = spk2utt_from_utt2spk({e.key: e.value for e in utt2spk})
    fix = f"; regenerate it with: python -m espnet_ext.data.datadir fix_spk2utt {path}"
    for e in spk2utt:
        utts = e.value.split()
        if e.key not in expected:
            raise InputError(
                f"speaker is not in utt2spk{fix}", path=path / "spk2utt", line=e.line, key=e.key
            )
        if sorted(utts) != expected[e.key]:
            extra = sorted(set(utts) - set(expected[e.key]))
            missing = sorted(set(expected[e.key]) - set(utts))
            detail = (
                "lists an utterance twice"
                if not extra and not missing
                else (
                    f"lists {extra or 'nothing'} not given to this speaker by utt2spk, misses {missing or 'nothing'}"
                )
            )
            raise InputError(
                f"disagrees with utt2spk: {detail}{fix}",
                path=path / "spk2utt",
                line=e.line,
                key=e.key,
            )
    listed = {e.key for e in spk2utt}
    for speaker in expected:
        if speaker not in listed:
            raise InputError(
                f"speaker of utt2spk is missing from spk2utt{fix}",
                path=path / "spk2utt",
                key=speaker,
            )


def _check_audio(wav_scp: Path, entries: list[Entry]) -> None:
    for e in entries:
        for audio, readable in _audio_inputs(e.value):
            problem = (
                audio_problem(audio)
                if readable
                else (None if audio.exists() else f"'{audio}' does not exist")
            )
            if problem:
                raise InputError(problem, path=wav_scp, line=e.line, key=e.key)


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
    """Rewrite ``spk2utt`` from ``utt2spk``; returns its path."""
    data_dir = Path(data_dir)
    target = data_dir / "spk2utt"
    write_kaldi_map(target, spk2utt_from_utt2spk(read_kaldi_map(data_dir / "utt2spk")))
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


def combine_data_dirs(out_dir: PathLike, sources: Sequence[PathLike]) -> list[str]:
    """Concatenate data dirs (Kaldi's combine_data.sh): tables present in every source, spk2utt rebuilt.

    An utterance id in two sources is an error; a speaker/recording id may repeat with the same
    value. Tables missing from some sources are left out and named on stderr. Returns the combined
    utterance ids.
    """
    sources = [Path(s) for s in sources]
    if not sources:
        raise InputError("nothing to combine: give at least one source data dir", path=out_dir)
    for source in sources:
        validate_data_dir(source, require=())
    names = [{p.name for p in table_files(s)} - {"spk2utt", "removed.txt"} for s in sources]
    common = set.intersection(*names)
    has_segments = "segments" in common
    for name in sorted(set.union(*names) - common):
        logger.warning(f"combine: leaving out {name}: not in every source")
    with atomic_dir(out_dir) as tmp:
        for name in sorted(common):
            merged: dict[str, str] = {}
            origin: dict[str, Path] = {}
            for source in sources:
                for e in read_kaldi_entries(source / name, allow_empty=True):
                    if e.key in merged and (
                        key_kind(name, has_segments) == "utterance" or merged[e.key] != e.value
                    ):
                        raise InputError(
                            f"id is also in {origin[e.key]}",
                            path=source / name,
                            line=e.line,
                            key=e.key,
                        )
                    merged[e.key], origin[e.key] = e.value, source / name
            write_kaldi_map(tmp / name, merged)
        if "utt2spk" in common:
            fix_spk2utt(tmp)
        utts = validate_data_dir(tmp, require=())
    return utts


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
        utts = validate_data_dir(args.data_dir, require=require, check_audio=args.check_audio)
        print(f"{args.data_dir}: ok, {len(utts)} utterances")
    elif args.command == "fix_spk2utt":
        print(f"wrote {fix_spk2utt(args.data_dir)}")
    else:
        utts = combine_data_dirs(args.out_dir, args.sources)
        print(f"{args.out_dir}: combined {len(utts)} utterances from {len(args.sources)} data dirs")


if __name__ == "__main__":
    sys.exit(main())
