"""The pipeline's filter stage: a copy of a data dir keeping only utterances of acceptable length.

Nothing is dropped silently: ``<dst>/removed.txt`` lists every removed id with the reason, the
command prints ``kept N of M``, and a filter that would remove everything is refused. Every table
keyed by utterance is filtered alike (wav.scp, text, text.*, utt2spk, feats.scp, utt2num_frames,
segments, utt2*, and any other table whose ids are exactly the utterance ids); tables keyed by
speaker or recording keep the ids still used; spk2utt is rebuilt; other files are copied.
Subdirectories (split<N>/, .backup/) describe the unfiltered set and are not copied. The output is
built in ``<dst>.tmp`` and renamed. The tables stream (GNU sort orders on disk what needs it): memory
does not grow with the number of utterances, as WMT's millions of pairs need.

    python -m espnet_ext.data.filter <src> <dst> [--min_frames N] [--max_frames N]
        [--max_text_chars N] [--max_text_words N] [--text_names text.de,text.en] [--max_length_ratio R]

Text limits apply to each of ``--text_names`` (default ``text``; for MT the source and target
sides). ``--max_length_ratio R`` needs two text names and drops pairs whose longer side has more
than R times the words of the shorter (the ``-ratio`` of Moses' clean-corpus-n.perl, as fairseq's
IWSLT14 preparation uses).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from espnet_ext.data.datadir import (
    Entry,
    atomic_dir,
    check_data_dir,
    fix_spk2utt,
    gnu_sort,
    iter_kaldi_entries,
    key_kind,
    read_kaldi_map,
    table_files,
    table_line,
)
from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.fileio import read_utf8_lines

REMOVED = "removed.txt"
# where the ids of the kept speakers / recordings come from: (utterance table, id in its value)
KEPT_IDS: dict[str, tuple[str, Callable[[str], str]]] = {
    "speaker": ("utt2spk", lambda value: value),
    "recording": ("segments", lambda value: value.split()[0]),
}


@dataclass
class FilterReport:
    total: int
    removed_count: int
    reason_counts: Counter
    dst: Path

    @property
    def kept(self) -> int:
        return self.total - self.removed_count

    @property
    def removed(self) -> dict[str, str]:
        """utterance id -> why, read from ``<dst>/removed.txt`` when asked: at WMT size it is millions
        of ids, which the filter does not hold."""
        return read_kaldi_map(self.dst / REMOVED)

    def summary(self) -> str:
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(self.reason_counts.items()))
        return f"filter: kept {self.kept} of {self.total} utterances" + (
            f" (removed {self.removed_count}: {why}; ids in {self.dst / REMOVED})"
            if self.removed_count
            else ""
        )


def filter_data_dir(
    src: Path,
    dst: Path,
    min_frames: int | None = None,
    max_frames: int | None = None,
    max_text_chars: int | None = None,
    max_text_words: int | None = None,
    text_names: Sequence[str] = ("text",),
    max_length_ratio: float | None = None,
) -> FilterReport:
    """Write ``dst`` = ``src`` without the utterances outside the (inclusive) bounds; see the module doc.

    Frames come from ``utt2num_frames``; text length is that of the ``text`` transcript, in
    characters (spaces included) or whitespace-separated words. The tables stream: the utterance
    tables (sorted by the same ids, as validation ensures) are walked side by side and written as
    they go; the kept speaker / recording ids are sorted on disk (GNU sort) and the tables keyed by
    them filtered by a merge. Memory does not grow with the number of utterances.
    """
    src, dst = Path(src), Path(dst)
    total = check_data_dir(src, require=())
    problems = _problems(
        src,
        min_frames,
        max_frames,
        max_text_chars,
        max_text_words,
        text_names,
        max_length_ratio,
    )
    has_segments = (src / "segments").is_file()
    tables = [p for p in table_files(src) if p.name not in ("spk2utt", REMOVED)]  # both rewritten
    kinds = {p.name: key_kind(p.name, has_segments) for p in tables}
    reference = next(p for p in tables if kinds[p.name] == "utterance")
    counts: Counter = Counter()
    with atomic_dir(dst) as tmp:
        with tempfile.TemporaryDirectory(prefix=".filter.", dir=tmp) as work_dir:
            work = Path(work_dir)
            utterance_tables: dict[str, Path] = {}  # name -> the sorted table to read
            for path in tables:
                if kinds[path.name] == "utterance":
                    utterance_tables[path.name] = path
                elif kinds[path.name] is None:
                    table = _utterance_table(path, reference, work)
                    if table is None:
                        shutil.copy2(path, tmp / path.name)
                    else:
                        utterance_tables[path.name] = table
            for name in problems.needs:
                if name not in utterance_tables:
                    raise InputError(
                        "not a table of the utterance ids: the filter cannot use it",
                        path=src / name,
                    )
            id_files = {kind: work / f"ids.{kind}" for kind in KEPT_IDS}
            removed, first = _filter_utterances(utterance_tables, problems, counts, tmp, id_files)
            if removed == total:  # also when there is nothing to keep
                example = f" (e.g. '{first[0]}': {'; '.join(first[1])})" if first else ""
                raise InputError(
                    f"filtering would remove all {total} utterances{example}; "
                    "loosen the bounds or check the data",
                    path=src,
                )
            for kind, ids in id_files.items():
                listed = [p for p in tables if kinds[p.name] == kind]
                if listed:
                    gnu_sort([ids], work / f"sorted.{kind}", work)
                for path in listed:
                    _write_listed(path, work / f"sorted.{kind}", tmp / path.name)
        if "utt2spk" in utterance_tables:
            fix_spk2utt(tmp)
        check_data_dir(tmp, require=())
    return FilterReport(total, removed, counts, dst)


def _filter_utterances(
    tables: dict[str, Path],
    problems: _Problems,
    counts: Counter,
    out_dir: Path,
    id_files: dict[str, Path],
) -> tuple[int, tuple[str, list[str]] | None]:
    """Write the kept lines of the utterance ``tables`` (name -> sorted table) into ``out_dir``, the
    removed ids with why into its removed.txt, and the ids of the kept speakers / recordings (one a
    line, unsorted, repeated) into ``id_files``, walking the tables side by side. Returns the number
    removed and the first utterance with why it goes (none: kept), or None when there is none."""
    removed = 0
    first = None
    with contextlib.ExitStack() as stack:
        outs = {
            name: stack.enter_context(open(out_dir / name, "w", encoding="utf-8"))
            for name in tables
        }
        removed_out = stack.enter_context(open(out_dir / REMOVED, "w", encoding="utf-8"))
        id_outs = {
            kind: stack.enter_context(open(path, "w", encoding="utf-8"))
            for kind, path in id_files.items()
        }
        for row in _rows(list(tables.values())):
            values = {name: e.value for name, e in zip(tables, row)}
            key = row[0].key
            why = problems(values, counts)
            if first is None:
                first = (key, why)
            if why:
                removed += 1
                removed_out.write(table_line(out_dir / REMOVED, key, ";".join(why)))
                continue
            for name, e in zip(tables, row):
                outs[name].write(table_line(out_dir / name, key, e.value))
            for kind, (name, id_of) in KEPT_IDS.items():
                if name in values:
                    id_outs[kind].write(id_of(values[name]) + "\n")
    return removed, first


class _Problems:
    """Why one utterance goes (the bounds of :func:`filter_data_dir`), from its row of values by table
    name; ``needs``: the tables that takes."""

    def __init__(self, checks: list[Callable[[dict[str, str]], Iterator[tuple[str, str]]]], needs):
        self.checks, self.needs = checks, needs

    def __call__(self, values: dict[str, str], counts: Counter) -> list[str]:
        """The details of the bounds ``values`` break, in the order of the options; each one's label
        counted in ``counts``."""
        why = []
        for check in self.checks:
            for label, detail in check(values):
                why.append(detail)
                counts[label] += 1
        return why


def _problems(
    src: Path,
    min_frames: int | None,
    max_frames: int | None,
    max_text_chars: int | None,
    max_text_words: int | None,
    text_names: Sequence[str],
    max_length_ratio: float | None,
) -> _Problems:
    """The checks the options ask for; a table they need that ``src`` lacks is an InputError."""
    checks, needs = [], []

    def need(name: str, options: str) -> None:
        if not (src / name).is_file():
            raise InputError(
                f"{options} need {name}, which this data dir does not have", path=src / name
            )
        needs.append(name)

    if min_frames is not None or max_frames is not None:
        need("utt2num_frames", "--min_frames/--max_frames")

        def frames(values):
            n = int(values["utt2num_frames"])
            if min_frames is not None and n < min_frames:
                yield "too short", f"num_frames={n}<min_frames={min_frames}"
            if max_frames is not None and n > max_frames:
                yield "too long", f"num_frames={n}>max_frames={max_frames}"

        checks.append(frames)
    if max_text_chars is not None or max_text_words is not None:
        for name in text_names:
            need(name, "--max_text_chars/--max_text_words")
        checks.append(
            lambda values: _text_problems(values, text_names, max_text_chars, max_text_words)
        )
    if max_length_ratio is not None:
        if len(text_names) != 2:
            raise InputError(
                f"--max_length_ratio compares two texts (--text_names a,b), got {list(text_names)}",
                path=src,
            )
        for name in text_names:
            need(name, "--max_length_ratio")

        def ratio(values):
            lengths = sorted(len(values[name].split()) for name in text_names)
            if lengths[1] > max_length_ratio * max(lengths[0], 1):
                yield (
                    "length ratio",
                    f"length_ratio={lengths[1]}/{lengths[0]}>max_length_ratio={max_length_ratio}",
                )

        checks.append(ratio)
    return _Problems(checks, needs)


def _text_problems(
    values: dict[str, str],
    text_names: Sequence[str],
    max_chars: int | None,
    max_words: int | None,
) -> Iterator[tuple[str, str]]:
    for name in text_names:
        prefix = "text" if name == "text" else name.replace(".", "_")
        text = values[name]
        if max_chars is not None and len(text) > max_chars:
            yield f"{name} too long", f"{prefix}_chars={len(text)}>max_text_chars={max_chars}"
        words = len(text.split())
        if max_words is not None and words > max_words:
            yield f"{name} too long", f"{prefix}_words={words}>max_text_words={max_words}"


def _rows(paths: Sequence[Path]) -> Iterator[tuple[Entry, ...]]:
    """The entries of the tables ``paths`` one utterance at a time: their lines side by side, which
    must hold the same id (an InputError at the first line that does not)."""
    readers = [iter_kaldi_entries(path, allow_empty=True) for path in paths]
    for row in itertools.zip_longest(*readers):
        ref = row[0]
        for path, e in zip(paths[1:], row[1:]):
            if e is None:
                raise InputError(
                    f"ends before {paths[0].name}, which has id '{ref.key}' at line {ref.line}",
                    path=path,
                )
            if ref is None or e.key != ref.key:
                where = (
                    f"line {ref.line} of {paths[0].name} is '{ref.key}'"
                    if ref
                    else f"{paths[0].name} has ended"
                )
                raise InputError(
                    f"the utterance tables do not hold the same ids in the same order ({where})",
                    path=path,
                    line=e.line,
                    key=e.key,
                )
        yield row


def _write_listed(table: Path, ids: Path, out: Path) -> None:
    """The lines of the sorted ``table`` whose id is among the sorted ``ids`` (one a line, repeats
    allowed), to ``out``: a merge of the two."""
    wanted = (line for _, line in read_utf8_lines(ids))
    want = next(wanted, None)
    with open(out, "w", encoding="utf-8") as f:
        for e in iter_kaldi_entries(table, allow_empty=True):
            while want is not None and want < e.key:
                want = next(wanted, None)
            if want == e.key:
                f.write(table_line(out, e.key, e.value))


def _utterance_table(path: Path, reference: Path, work: Path) -> Path | None:
    """The table to read when an unknown file is one whose ids are exactly the utterance ids (e.g.
    ``phn``): itself, or a copy sorted in ``work`` when it is out of order. None when it is not (a file
    that is no table, binary or free text, or one of other ids: copied as it is)."""
    try:
        if _same_ids(path, reference):
            return path
        entries = iter_kaldi_entries(path, allow_empty=True)
        if all(a.key < b.key for a, b in itertools.pairwise(entries)):
            return None  # sorted, without repeats, and other ids
        unsorted, copy = work / f"unsorted.{path.name}", work / f"table.{path.name}"
        with open(unsorted, "w", encoding="utf-8") as f:
            for e in iter_kaldi_entries(path, allow_empty=True):
                f.write(table_line(path, e.key, e.value))
        gnu_sort([unsorted], copy, work)
        unsorted.unlink()
        return copy if _same_ids(copy, reference) else None
    except InputError:
        return None


def _same_ids(path: Path, reference: Path) -> bool:
    """The table ``path`` has the ids of ``reference``, in its order (InputError if it is no table)."""
    pairs = itertools.zip_longest(
        iter_kaldi_entries(path, allow_empty=True), iter_kaldi_entries(reference, allow_empty=True)
    )
    return all(a is not None and b is not None and a.key == b.key for a, b in pairs)


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m espnet_ext.data.filter", description=__doc__.split("\n")[0]
    )
    parser.add_argument("src", help="data dir to filter")
    parser.add_argument("dst", help="filtered copy (replaced if it exists)")
    parser.add_argument(
        "--min_frames", type=int, help="drop utterances with fewer frames (utt2num_frames)"
    )
    parser.add_argument(
        "--max_frames", type=int, help="drop utterances with more frames (utt2num_frames)"
    )
    parser.add_argument(
        "--max_text_chars", type=int, help="drop transcripts longer than this many characters"
    )
    parser.add_argument(
        "--max_text_words", type=int, help="drop transcripts longer than this many words"
    )
    parser.add_argument(
        "--text_names",
        default="text",
        help="comma-separated text tables the text limits apply to (e.g. text.de,text.en)",
    )
    parser.add_argument(
        "--max_length_ratio",
        type=float,
        help="with two --text_names: drop pairs above this word ratio",
    )
    args = parser.parse_args(argv)
    report = filter_data_dir(
        args.src,
        args.dst,
        args.min_frames,
        args.max_frames,
        args.max_text_chars,
        args.max_text_words,
        [name for name in args.text_names.split(",") if name],
        args.max_length_ratio,
    )
    print(report.summary())


if __name__ == "__main__":
    sys.exit(main())
