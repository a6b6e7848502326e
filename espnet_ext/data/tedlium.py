"""TED-LIUM release 3 as released -> Kaldi data dirs for English ASR, text prepared as Kaldi's recipe does.

Release layout (``TEDLIUM_release-3.tgz`` unpacks to ``TEDLIUM_release-3/``)::

    legacy/{train,dev,test}/sph/<talk>.sph    NIST SPHERE, 16 kHz mono PCM (the release 2 split)
    legacy/{train,dev,test}/stm/<talk>.stm    one segment a line (';;' lines are comments):
        <talk> <channel> <speaker> <start> <end> <label> <transcript ...>
    data/{sph,stm}/                           all training talks of release 3 (``--train_from data``)

Text, as Kaldi's ``tedlium/s5_r3`` prepares it, then the LegoNN paper's normalisation (§V-C2):

- segments whose transcript is ``ignore_time_segment_in_scoring`` are skipped (Kaldi drops them too);
  they are listed, with their stm file and line, in ``<out>/<split>/removed.txt`` and counted on stderr;
- ``<unk>`` (a word the transcriber could not make out) is dropped: the ASR targets are BPE units and
  cannot spell it; a segment left with no word is skipped and listed the same way;
- tokens that start with an apostrophe join the word before them (``it 's`` -> ``it's``, ``we 're``
  -> ``we're``; Kaldi's ``local/join_suffix.py``);
- ``espnet_ext.data.europarl_st.normalise_english`` (lowercase, punctuation stripped), as Europarl's.

The SPHERE files are read by soundfile (libsndfile's NIST reader), so no ``sph2pipe`` is needed:
``wav.scp`` names each ``.sph`` directly and ``segments`` cuts the talk (shorten-compressed SPHERE, which
TED-LIUM does not use, is refused by the data-dir check naming the file). Ids are Kaldi's:
``<speaker>-<start cs:07d>-<end cs:07d>``; ``utt2spk`` maps to the stm speaker.

    python -m espnet_ext.data.tedlium prepare --root TEDLIUM_release-3 --out data
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from espnet_ext.data.datadir import command_parser, segment_times, write_data_dir
from espnet_ext.data.europarl_st import normalise_english
from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.fileio import read_utf8_lines

logger = logging.getLogger(__name__)

PathLike = str | Path
SPLITS = ("train", "dev", "test")
IGNORE = "ignore_time_segment_in_scoring"
UNK = "<unk>"
REMOVED = "removed.txt"


class Segment(NamedTuple):
    utt_id: str
    talk: str
    sph: Path
    speaker: str
    start: float
    end: float
    text: str


def prepare_transcript(words: Sequence[str]) -> str:
    """``<unk>`` dropped, apostrophe suffixes joined, then lowercased without punctuation."""
    joined: list[str] = []
    for word in words:
        if word == UNK:
            continue
        if word.startswith("'") and joined:
            joined[-1] += word
        else:
            joined.append(word)
    return normalise_english(" ".join(joined))


def split_dirs(root: PathLike, split: str, train_from: str) -> Path:
    """The dir holding ``sph/`` and ``stm/`` of a split."""
    root = Path(root)
    directory = (
        root / "data" if split == "train" and train_from == "data" else root / "legacy" / split
    )
    if not (directory / "stm").is_dir() or not (directory / "sph").is_dir():
        raise InputError(
            f"no sph/ and stm/ for split {split} (expected {directory}/{{sph,stm}}; TED-LIUM 3 has "
            "legacy/{train,dev,test}/ and data/ for all training talks)",
            path=directory,
        )
    return directory


def read_stm(stm: Path, sph_dir: Path) -> tuple[list[Segment], list[str]]:
    """The kept segments of one stm file, and ``removed.txt`` lines for those skipped."""
    kept, removed = [], []
    for number, line in read_utf8_lines(stm):
        if not line.strip() or line.startswith(";;"):
            continue
        fields = line.split()
        if len(fields) < 6:
            raise InputError(
                "expected '<file> <channel> <speaker> <start> <end> <label> <transcript>'",
                path=stm,
                line=number,
            )
        talk, _, speaker, start_field, end_field = fields[:5]
        start, end = segment_times(start_field, end_field, stm, number)
        sph = sph_dir / f"{talk}.sph"
        if not sph.is_file():
            raise InputError(f"audio file {sph} is missing", path=stm, line=number)
        utt = f"{speaker}-{round(start * 100):07d}-{round(end * 100):07d}"
        words = fields[6:] if fields[5].startswith("<") else fields[5:]
        if words == [IGNORE]:
            removed.append(f"{utt} {IGNORE} ({stm}:{number})")
            continue
        text = prepare_transcript(words)
        if not text:
            removed.append(f"{utt} no word once <unk> is dropped ({stm}:{number})")
            continue
        kept.append(Segment(utt, talk, sph.absolute(), speaker, start, end, text))
    return kept, removed


def read_split(
    root: PathLike, split: str, train_from: str = "legacy"
) -> tuple[list[Segment], list[str]]:
    directory = split_dirs(root, split, train_from)
    stms = sorted((directory / "stm").glob("*.stm"))
    if not stms:
        raise InputError("no .stm file", path=directory / "stm")
    segments: dict[str, Segment] = {}
    removed: list[str] = []
    for stm in stms:
        kept, skipped = read_stm(stm, directory / "sph")
        removed += skipped
        for s in kept:
            if s.utt_id in segments:
                raise InputError(f"segment {s.utt_id} appears twice", path=stm)
            segments[s.utt_id] = s
    return [segments[u] for u in sorted(segments)], removed


def prepare(
    root: PathLike, splits: Sequence[str], out_dir: PathLike, train_from: str = "legacy"
) -> list[Path]:
    """One data dir per split (+ ``removed.txt``); all splits are read before anything is written."""
    read = {split: read_split(root, split, train_from) for split in splits}
    written = []
    for split, (segments, removed) in read.items():
        dst = Path(out_dir) / split
        tables = {
            "wav.scp": {s.talk: str(s.sph) for s in segments},
            "segments": {s.utt_id: [s.talk, f"{s.start:.2f}", f"{s.end:.2f}"] for s in segments},
            "utt2spk": {s.utt_id: s.speaker for s in segments},
            "text": {s.utt_id: s.text for s in segments},
        }
        write_data_dir(dst, tables, files={REMOVED: "".join(f"{r}\n" for r in removed)})
        logger.info(
            f"{dst}: {len(segments)} segments; {len(removed)} skipped (listed in {dst / REMOVED})"
        )
        written.append(dst)
    return written


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser, commands = command_parser("espnet_ext.data.tedlium", __doc__)
    prep = commands.add_parser("prepare", help="write Kaldi data dirs")
    prep.add_argument("--root", required=True, help="TEDLIUM_release-3/")
    prep.add_argument("--splits", nargs="+", default=list(SPLITS), choices=SPLITS)
    prep.add_argument("--train_from", default="legacy", choices=("legacy", "data"))
    prep.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    prepare(args.root, args.splits, args.out, args.train_from)


if __name__ == "__main__":
    sys.exit(main())
