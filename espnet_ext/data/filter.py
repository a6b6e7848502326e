"""The pipeline's filter stage: a copy of a data dir keeping only utterances of acceptable length.

Nothing is dropped silently: ``<dst>/removed.txt`` lists every removed id with the reason, the
command prints ``kept N of M``, and a filter that would remove everything is refused. Every table
keyed by utterance is filtered alike (wav.scp, text, text.*, utt2spk, feats.scp, utt2num_frames,
segments, utt2*, and any other table whose ids are exactly the utterance ids); tables keyed by
speaker or recording keep the ids still used; spk2utt is rebuilt; other files are copied.
Subdirectories (split<N>/, .backup/) describe the unfiltered set and are not copied. The output is
built in ``<dst>.tmp`` and renamed.

    python -m espnet_ext.data.filter <src> <dst> [--min_frames N] [--max_frames N]
        [--max_text_chars N] [--max_text_words N] [--text_names text.de,text.en] [--max_length_ratio R]

Text limits apply to each of ``--text_names`` (default ``text``; for MT the source and target
sides). ``--max_length_ratio R`` needs two text names and drops pairs whose longer side has more
than R times the words of the shorter (the ``-ratio`` of Moses' clean-corpus-n.perl, as fairseq's
IWSLT14 preparation uses).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from espnet_ext.data.datadir import (
    atomic_dir,
    fix_spk2utt,
    key_kind,
    read_kaldi_entries,
    read_kaldi_map,
    table_files,
    validate_data_dir,
    write_kaldi_map,
)
from espnet_ext.errors import InputError, reports_input_errors

REMOVED = "removed.txt"


@dataclass
class FilterReport:
    total: int
    removed: dict[str, str]  # utterance id -> why
    reason_counts: Counter
    dst: Path

    @property
    def kept(self) -> int:
        return self.total - len(self.removed)

    def summary(self) -> str:
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(self.reason_counts.items()))
        return f"filter: kept {self.kept} of {self.total} utterances" + (
            f" (removed {len(self.removed)}: {why}; ids in {self.dst / REMOVED})"
            if self.removed
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
    characters (spaces included) or whitespace-separated words.
    """
    src, dst = Path(src), Path(dst)
    utts = validate_data_dir(src, require=())
    reasons: dict[str, list[str]] = {}
    counts: Counter = Counter()

    def remove(utt: str, label: str, detail: str) -> None:
        reasons.setdefault(utt, []).append(detail)
        counts[label] += 1

    if min_frames is not None or max_frames is not None:
        for utt, value in _required_table(
            src, "utt2num_frames", "--min_frames/--max_frames"
        ).items():
            frames = int(value)
            if min_frames is not None and frames < min_frames:
                remove(utt, "too short", f"num_frames={frames}<min_frames={min_frames}")
            if max_frames is not None and frames > max_frames:
                remove(utt, "too long", f"num_frames={frames}>max_frames={max_frames}")
    if max_text_chars is not None or max_text_words is not None:
        for name in text_names:
            prefix = "text" if name == "text" else name.replace(".", "_")
            for utt, text in _required_table(
                src, name, "--max_text_chars/--max_text_words"
            ).items():
                if max_text_chars is not None and len(text) > max_text_chars:
                    remove(
                        utt,
                        f"{name} too long",
                        f"{prefix}_chars={len(text)}>max_text_chars={max_text_chars}",
                    )
                if max_text_words is not None and len(text.split()) > max_text_words:
                    words = len(text.split())
                    remove(
                        utt,
                        f"{name} too long",
                        f"{prefix}_words={words}>max_text_words={max_text_words}",
                    )
    if max_length_ratio is not None:
        if len(text_names) != 2:
            raise InputError(
                f"--max_length_ratio compares two texts (--text_names a,b), got {list(text_names)}",
                path=src,
            )
        first = _required_table(src, text_names[0], "--max_length_ratio")
        second = _required_table(src, text_names[1], "--max_length_ratio")
        for utt, text in first.items():
            lengths = sorted((len(text.split()), len(second.get(utt, "").split())))
            if lengths[1] > max_length_ratio * max(lengths[0], 1):
                remove(
                    utt,
                    "length ratio",
                    f"length_ratio={lengths[1]}/{lengths[0]}>max_length_ratio={max_length_ratio}",
                )

    keep = [u for u in utts if u not in reasons]
    if not keep:
        first = utts[0]
        raise InputError(
            f"filtering would remove all {len(utts)} utterances (e.g. '{first}': {'; '.join(reasons[first])}); "
            "loosen the bounds or check the data",
            path=src,
        )
    with atomic_dir(dst) as tmp:
        _copy_subset(src, tmp, set(keep), set(utts))
        write_kaldi_map(tmp / REMOVED, {utt: ";".join(why) for utt, why in reasons.items()})
        validate_data_dir(tmp, require=())
    return FilterReport(len(utts), {u: ";".join(w) for u, w in reasons.items()}, counts, dst)


def _required_table(src: Path, name: str, options: str) -> dict[str, str]:
    if not (src / name).is_file():
        raise InputError(
            f"{options} need {name}, which this data dir does not have", path=src / name
        )
    return read_kaldi_map(src / name)


def _copy_subset(src: Path, dst: Path, keep: set[str], all_utts: set[str]) -> None:
    has_segments = (src / "segments").is_file()
    utt2spk = read_kaldi_map(src / "utt2spk") if (src / "utt2spk").is_file() else {}
    kept_ids = {
        "utterance": keep,
        "speaker": {utt2spk[u] for u in keep if u in utt2spk},
        "recording": {
            v.split()[0] for u, v in read_kaldi_map(src / "segments").items() if u in keep
        }
        if has_segments
        else set(),
    }
    for path in table_files(src):
        if path.name in ("spk2utt", REMOVED):
            continue  # rebuilt / rewritten
        kind = key_kind(path.name, has_segments) or _probe_utterance_table(path, all_utts)
        if kind is None:
            shutil.copy2(path, dst / path.name)
            continue
        entries = read_kaldi_entries(path, allow_empty=True)
        write_kaldi_map(
            dst / path.name, {e.key: e.value for e in entries if e.key in kept_ids[kind]}
        )
    if utt2spk:
        fix_spk2utt(dst)


def _probe_utterance_table(path: Path, all_utts: set[str]) -> str | None:
    """ "utterance" when an unknown file is a table whose ids are exactly the utterance ids (e.g. ``phn``)."""
    try:
        keys = {e.key for e in read_kaldi_entries(path, allow_empty=True)}
    except InputError:
        return None  # not a table (binary, free text): copied as it is
    return "utterance" if keys == all_utts else None


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
