"""Europarl-ST v1.1 as released -> Kaldi data dirs for English (or any source language) ASR and ST.

Release layout (``v1.1.tar.gz``; ``<root>`` is the dir holding the source-language dirs)::

    <root>/<src>/audios/<speech-id>.m4a               one whole speech (AAC in MP4)
    <root>/<src>/<tgt>/<split>/speeches.lst           the speech ids of the split, one a line
    <root>/<src>/<tgt>/<split>/segments.lst           '<speech-id> <start s> <end s>', one segment a line
    <root>/<src>/<tgt>/<split>/segments.<src>         its transcript, same line
    <root>/<src>/<tgt>/<split>/segments.<tgt>         its translation, same line

``prepare`` writes ``<out>/<name>`` (``<split>`` with ``-`` as ``_``, e.g. ``train_noisy``)::

    wav.scp   <speech-id> python -m espnet_ext.data.compressed_audio <abs .m4a> |   (16 kHz mono WAV)
    segments  <utt> <speech-id> <start> <end>     utt2spk/spk2utt: the speech id (the release names no
                                                  speakers; a speech has one speaker)
    text      ASR: the transcript through ``normalise_english`` (English) or as released; ST: the
              translation as released      text.<src>, text.<tgt>: both as released (ST)
    lang      <utt> <src>: the task tag, as ``espnet_ext.data.mtedx`` writes it

Utterance ids are ``<speech-id>_<start ms:08d>_<end ms:08d>``. The English ASR text follows the LegoNN
paper's preparation (§V-C2, after Iranzo-Sánchez et al.): lowercased, punctuation stripped (see
``normalise_english``). Everything is read and checked (line counts of the three parallel files, segment
fields, speeches listed and their audio present, no empty text) before anything is written.

    python -m espnet_ext.data.europarl_st prepare --root DIR --src en --tgt de --task asr --out data
"""

from __future__ import annotations

import logging
import re
import sys
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from espnet_ext.data.compressed_audio import pipe_command
from espnet_ext.data.datadir import command_parser, segment_times, write_data_dir
from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.fileio import read_utf8_lines

logger = logging.getLogger(__name__)

PathLike = str | Path
SPLITS = ("train", "dev", "test", "train-noisy")
TASKS = ("asr", "st")
RELEASE_URL = "https://www.mllp.upv.es/europarl-st/"

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "`": "'", "\u00b4": "'"})
_INNER_APOSTROPHE = re.compile(r"(?<=\w)'(?=\w)")


class Segment(NamedTuple):
    utt_id: str
    speech: str
    audio: Path
    start: float
    end: float
    source: str  # transcript as released
    target: str  # translation as released


def normalise_english(text: str) -> str:
    """ASR text as the LegoNN paper prepares Europarl and TED-LIUM: lowercased, punctuation stripped.

    NFKC, lowercase; an apostrophe is kept only inside a word ("parliament's", "don't"), every other
    character that is not a letter, digit or combining mark (punctuation, symbols, hyphens, quotes)
    becomes a word boundary; spaces collapsed. "Mr Barroso's 'co-operation' - 2,5%!" ->
    "mr barroso's co operation 2 5".
    """
    text = unicodedata.normalize("NFKC", text).translate(_APOSTROPHES).lower()
    text = _INNER_APOSTROPHE.sub("\0", text)
    kept = [c if c == "\0" or unicodedata.category(c)[0] in "LNM" else " " for c in text]
    return " ".join("".join(kept).replace("\0", "'").split())


def utterance_id(speech: str, start: float, end: float) -> str:
    return f"{speech}_{round(start * 1000):08d}_{round(end * 1000):08d}"


def split_dir(root: PathLike, src: str, tgt: str, split: str) -> Path:
    directory = Path(root) / src / tgt / split
    if not (Path(root) / src / "audios").is_dir():
        raise InputError(
            f"no Europarl-ST release here (expected {Path(root) / src}/audios/*.m4a and "
            f"{Path(root) / src}/<tgt>/<split>/segments.lst); download v1.1 from {RELEASE_URL}",
            path=root,
        )
    if not directory.is_dir():
        raise InputError(
            f"split {split} of {src}->{tgt} is missing (Europarl-ST splits: {', '.join(SPLITS)})",
            path=directory,
        )
    return directory


def _lines(path: Path) -> list[tuple[int, str]]:
    if not path.is_file():
        raise InputError("file of the release is missing", path=path)
    return list(read_utf8_lines(path))


def read_speeches(path: Path, audio_dir: Path) -> dict[str, Path]:
    """``{speech id: its .m4a}`` of ``speeches.lst``, each audio file checked to exist."""
    speeches: dict[str, Path] = {}
    for number, line in _lines(path):
        fields = line.split()
        if len(fields) != 1:
            raise InputError("expected one speech id per line", path=path, line=number)
        audio = audio_dir / f"{fields[0]}.m4a"
        if not audio.is_file():
            raise InputError(f"audio file {audio} is missing", path=path, line=number)
        speeches[fields[0]] = audio
    return speeches


def _parse_segment(line: str, path: Path, number: int) -> tuple[str, float, float]:
    fields = line.split()
    if len(fields) != 3:
        raise InputError(
            f"expected '<speech-id> <start> <end>', got {len(fields)} fields",
            path=path,
            line=number,
        )
    return fields[0], *segment_times(fields[1], fields[2], path, number)


def read_split(root: PathLike, src: str, tgt: str, split: str) -> list[Segment]:
    """Every segment of one split, in C order of ids, checked against its speech list and audio."""
    directory = split_dir(root, src, tgt, split)
    speeches = read_speeches(directory / "speeches.lst", Path(root) / src / "audios")
    times = _lines(directory / "segments.lst")
    sources = _lines(directory / f"segments.{src}")
    targets = _lines(directory / f"segments.{tgt}")
    for name, lines in ((f"segments.{src}", sources), (f"segments.{tgt}", targets)):
        if len(lines) != len(times):
            raise InputError(
                f"has {len(lines)} lines but segments.lst has {len(times)}: the files are "
                "line-parallel, one segment a line",
                path=directory / name,
            )
    segments: dict[str, Segment] = {}
    for (number, line), (_, source), (_, target) in zip(times, sources, targets):
        speech, start, end = _parse_segment(line, directory / "segments.lst", number)
        if speech not in speeches:
            raise InputError(
                f"speech {speech} is not in speeches.lst",
                path=directory / "segments.lst",
                line=number,
            )
        for name, text in ((f"segments.{src}", source), (f"segments.{tgt}", target)):
            if not text.strip():
                raise InputError("empty text", path=directory / name, line=number)
        utt = utterance_id(speech, start, end)
        if utt in segments:
            raise InputError(
                f"segment {speech} {start}-{end} is listed twice",
                path=directory / "segments.lst",
                line=number,
            )
        segments[utt] = Segment(
            utt, speech, speeches[speech].absolute(), start, end, source.strip(), target.strip()
        )
    return [segments[u] for u in sorted(segments)]


def asr_text(segments: list[Segment], src: str, split_path: Path) -> dict[str, str]:
    """The ASR transcripts; English ones normalised (a segment left empty by it is an error)."""
    if src != "en":
        return {s.utt_id: s.source for s in segments}
    text = {}
    for s in segments:
        text[s.utt_id] = normalise_english(s.source)
        if not text[s.utt_id]:
            raise InputError(
                f"transcript {s.source!r} is empty once punctuation is stripped",
                path=split_path / f"segments.{src}",
                key=s.utt_id,
            )
    return text


def kaldi_tables(segments: list[Segment]) -> dict[str, dict]:
    """wav.scp (a speech decoded by a pipe), segments and utt2spk (the speech: one speaker each)."""
    return {
        "wav.scp": {s.speech: pipe_command(s.audio) for s in segments},
        "segments": {s.utt_id: [s.speech, f"{s.start:.3f}", f"{s.end:.3f}"] for s in segments},
        "utt2spk": {s.utt_id: s.speech for s in segments},
    }


def prepare(
    root: PathLike, src: str, tgt: str, splits: Sequence[str], task: str, out_dir: PathLike
) -> list[Path]:
    """One data dir per split; every split is read and checked before anything is written."""
    if task not in TASKS:
        raise InputError(f"task must be one of {TASKS}, not {task!r}", key="--task")
    read = {split: read_split(root, src, tgt, split) for split in splits}
    texts = {}
    for split, segments in read.items():
        if task == "asr":
            texts[split] = {"text": asr_text(segments, src, Path(root) / src / tgt / split)}
        else:
            source = {s.utt_id: s.source for s in segments}
            target = {s.utt_id: s.target for s in segments}
            texts[split] = {"text": target, f"text.{src}": source, f"text.{tgt}": target}
    written = []
    for split, segments in read.items():
        dst = Path(out_dir) / split.replace("-", "_")
        lang = {s.utt_id: src for s in segments}  # a task tag (espnet_ext.data.task_tags)
        write_data_dir(dst, {**kaldi_tables(segments), **texts[split], "lang": lang})
        logger.info(
            f"{dst}: {len(segments)} segments of {len({s.speech for s in segments})} speeches"
        )
        written.append(dst)
    return written


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser, commands = command_parser("espnet_ext.data.europarl_st", __doc__)
    prep = commands.add_parser("prepare", help="write Kaldi data dirs of a language pair")
    prep.add_argument("--root", required=True, help="the release dir holding <src>/audios")
    prep.add_argument("--src", default="en")
    prep.add_argument("--tgt", default="de", help="ASR too reads the <src>/<tgt> segment lists")
    prep.add_argument("--splits", nargs="+", default=["train", "dev", "test"], choices=SPLITS)
    prep.add_argument("--task", default="asr", choices=TASKS)
    prep.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    prepare(args.root, args.src, args.tgt, args.splits, args.task, args.out)


if __name__ == "__main__":
    sys.exit(main())
