"""Paired reference/hypothesis Kaldi text files (``<id> <text>`` lines), read strictly, result files, and
the options every scorer's command shares (``--ref``, ``--hyp``, ``--out_dir``).

The two files must hold exactly the same ids. An empty hypothesis is a valid output (every reference
word is then a deletion); an empty reference is a data error.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from espnet_ext.data.datadir import read_kaldi_entries
from espnet_ext.errors import InputError
from espnet_ext.fileio import atomic_write

PathLike = str | Path


@dataclass(frozen=True)
class Pair:
    utt_id: str
    ref: str  # whitespace runs collapsed to one space
    hyp: str


def read_text(path: PathLike, allow_empty: bool, what: str) -> dict[str, tuple[int, str]]:
    """{id: (line number, text with whitespace collapsed)} of a Kaldi text file."""
    table = {}
    for entry in read_kaldi_entries(path, allow_empty, what):
        text = " ".join(entry.value.split())
        if not text and not allow_empty:  # e.g. only non-ASCII blanks after the id
            raise InputError(f"empty {what}", path=path, line=entry.line, key=entry.key)
        table[entry.key] = (entry.line, text)
    return table


def read_ref_hyp(ref_path: PathLike, hyp_path: PathLike) -> list[Pair]:
    """The (reference, hypothesis) pairs in reference file order; the id sets must be equal."""
    refs = read_text(ref_path, allow_empty=False, what="reference")
    hyps = read_text(hyp_path, allow_empty=True, what="hypothesis")
    missing_in_hyp = [u for u in refs if u not in hyps]
    missing_in_ref = [u for u in hyps if u not in refs]
    if missing_in_hyp or missing_in_ref:
        counts = (
            f"{len(missing_in_hyp)} of {len(refs)} ids of {ref_path} are not in {hyp_path}, "
            f"{len(missing_in_ref)} of {len(hyps)} ids of {hyp_path} are not in {ref_path}"
        )
        if missing_in_hyp:
            first, path, table, other = missing_in_hyp[0], ref_path, refs, hyp_path
        else:
            first, path, table, other = missing_in_ref[0], hyp_path, hyps, ref_path
        raise InputError(
            f"id not in {other} ({counts})", path=path, line=table[first][0], key=first
        )
    if not refs:
        raise InputError("no utterances to score", path=ref_path)
    return [Pair(u, text, hyps[u][1]) for u, (_, text) in refs.items()]


def write_result(out_dir: PathLike, result: dict, report: str) -> Path:
    """``out_dir/result.txt`` then ``out_dir/result.json`` (the file tables read), each written whole."""
    out_dir = Path(out_dir)
    with atomic_write(out_dir / "result.txt") as f:
        f.write(report)
    with atomic_write(out_dir / "result.json") as f:
        json.dump(result, f, indent=2, ensure_ascii=False)
        f.write("\n")
    return out_dir / "result.txt"


def write_scores(
    out_dir: PathLike,
    result: dict,
    report: str,
    metric: str,
    ref_path: PathLike,
    hyp_path: PathLike,
) -> Path:
    """``write_result`` of ``result`` with the keys results tables read: its ``metric`` and the scored
    files; returns the path of ``result.txt``."""
    result.update(metric=metric, ref=str(ref_path), hyp=str(hyp_path))
    return write_result(out_dir, result, report)


def ref_hyp_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """A scorer's command line: ``--ref`` and ``--hyp`` Kaldi text files with the same ids, ``--out_dir``."""
    parser = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ref", type=Path, required=True, help="reference Kaldi text file")
    parser.add_argument(
        "--hyp", type=Path, required=True, help="hypothesis Kaldi text file, same ids"
    )
    parser.add_argument("--out_dir", type=Path, required=True)
    return parser
