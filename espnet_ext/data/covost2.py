"""CoVoST 2 (Common Voice clips + the CoVoST translation table) -> Kaldi data dirs for ASR and ST.

Inputs::

    <cv_root>/clips/<name>.mp3                    a Common Voice clip (48 kHz MP3)
    <cv_root>/validated.tsv                       Common Voice's table (client_id, path, sentence, ...)
    <covost_tsv> = covost_v2.<src>_<tgt>.tsv      tab-separated, header line, no quoting:
                                                  path, sentence, translation, client_id, split

As distributed, ``covost_v2.<src>_<tgt>.tsv`` holds only ``path``, ``translation`` and ``split``; then
``sentence`` and ``client_id`` are taken from ``validated.tsv`` by ``path`` (what CoVoST's
``get_covost_splits.py`` does). The split column is ``train``, ``train_covost``, ``dev`` or ``test``; the
v2 training split is ``train`` and ``train_covost`` together (``get_v2_split`` of get_covost_splits.py,
facebookresearch/covost), dev and test are those values alone. Rows of other split values (``dev_covost``
...) are not read and counted on stderr.

``prepare`` writes ``<out>/<split>`` per asked split::

    wav.scp   <utt> python -m espnet_ext.data.compressed_audio <abs mp3> |   (16 kHz mono WAV)
    utt2spk   <utt> <client_id>        text      ASR: the transcript; ST: the translation (as released)
    text.<src>, text.<tgt> (ST)        lang      <utt> <src> (a task tag, as espnet_ext.data.mtedx)

Ids are ``<client_id>-<clip name without .mp3>`` (speaker first, as Kaldi wants). A malformed row names
the tsv file and line, a missing clip is named with the row that wants it; nothing is written before
every asked split has been read.

    python -m espnet_ext.data.covost2 prepare --cv_root CV/fr --covost_tsv covost_v2.fr_en.tsv \
        --src fr --tgt en --task st --out data
"""

from __future__ import annotations

import logging
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from espnet_ext.data.compressed_audio import pipe_command
from espnet_ext.data.datadir import command_parser, write_data_dir
from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.fileio import read_utf8_lines

logger = logging.getLogger(__name__)

PathLike = str | Path
SPLITS = ("train", "dev", "test")
# split column value -> our split: CoVoST 2's training split also takes the train_covost rows (get_v2_split
# in facebookresearch/covost get_covost_splits.py); dev_covost / test_covost are not v2's dev and test.
SPLIT_OF_VALUE = {"train": "train", "train_covost": "train", "dev": "dev", "test": "test"}
TASKS = ("asr", "st")
COVOST_COLUMNS = ("path", "translation", "split")
CV_COLUMNS = ("path", "sentence", "client_id")


class Clip(NamedTuple):
    utt_id: str
    mp3: Path
    speaker: str
    sentence: str
    translation: str


def read_tsv(path: Path, required: Sequence[str]) -> list[tuple[int, dict[str, str]]]:
    """Rows of a headed tab-separated file as ``(line, {column: value})``; ``required`` columns checked."""
    lines = iter(read_utf8_lines(path))
    header_line = next(lines, None)
    if header_line is None:
        raise InputError("empty file: expected a header line", path=path)
    header = header_line[1].rstrip("\r").split("\t")
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(
            f"header lacks column(s) {', '.join(missing)}; has {', '.join(header)}",
            path=path,
            line=1,
        )
    rows = []
    for number, line in lines:
        fields = line.rstrip("\r").split("\t")
        if len(fields) != len(header):
            raise InputError(
                f"has {len(fields)} tab-separated fields, the header {len(header)}",
                path=path,
                line=number,
            )
        rows.append((number, dict(zip(header, fields))))
    return rows


def read_validated(cv_root: Path) -> dict[str, dict[str, str]]:
    """``{clip path: row}`` of Common Voice's validated.tsv."""
    path = cv_root / "validated.tsv"
    if not path.is_file():
        raise InputError(
            "Common Voice's validated.tsv is missing (needed for sentence and client_id)", path=path
        )
    return {row["path"]: row for _, row in read_tsv(path, CV_COLUMNS)}


def read_splits(cv_root: PathLike, covost_tsv: PathLike, splits: Sequence[str]) -> dict:
    """``{split: [Clip in C order of ids]}`` for the asked splits."""
    cv_root, covost_tsv = Path(cv_root), Path(covost_tsv)
    if not (cv_root / "clips").is_dir():
        raise InputError(
            "not a Common Voice language dir: no clips/ (expected clips/*.mp3 and validated.tsv)",
            path=cv_root,
        )
    if not covost_tsv.is_file():
        raise InputError("CoVoST 2 table does not exist", path=covost_tsv)
    rows = read_tsv(covost_tsv, COVOST_COLUMNS)
    joined = rows and not all(c in rows[0][1] for c in ("sentence", "client_id"))
    validated = read_validated(cv_root) if joined else {}
    clips: dict[str, dict[str, Clip]] = {split: {} for split in splits}
    other: Counter = Counter()
    for number, row in rows:
        split = SPLIT_OF_VALUE.get(row["split"])
        if split is None:
            other[row["split"]] += 1
            continue
        if split not in clips:
            continue
        if joined:
            if row["path"] not in validated:
                raise InputError(
                    f"clip {row['path']} is not in {cv_root / 'validated.tsv'}",
                    path=covost_tsv,
                    line=number,
                )
            row = {**validated[row["path"]], **row}
        clip = _clip(row, cv_root, covost_tsv, number)
        if clip.utt_id in clips[split]:
            raise InputError(f"clip {row['path']} is listed twice", path=covost_tsv, line=number)
        clips[split][clip.utt_id] = clip
    for split, count in sorted(other.items()):
        logger.warning(f"{covost_tsv}: {count} rows of split {split!r} not read")
    return {split: [by_id[u] for u in sorted(by_id)] for split, by_id in clips.items()}


def _clip(row: dict[str, str], cv_root: Path, tsv: Path, number: int) -> Clip:
    for column in ("path", "sentence", "translation", "client_id"):
        if not row[column].strip():
            raise InputError(f"empty {column}", path=tsv, line=number)
    mp3 = cv_root / "clips" / row["path"]
    if not mp3.is_file():
        raise InputError(f"clip {mp3} is missing", path=tsv, line=number)
    if any(c.isspace() for c in row["client_id"] + row["path"]):
        raise InputError("client_id and path must not contain spaces", path=tsv, line=number)
    utt = f"{row['client_id']}-{Path(row['path']).stem}"
    return Clip(
        utt, mp3.absolute(), row["client_id"], row["sentence"].strip(), row["translation"].strip()
    )


def prepare(
    cv_root: PathLike,
    covost_tsv: PathLike,
    src: str,
    tgt: str,
    splits: Sequence[str],
    task: str,
    out_dir: PathLike,
) -> list[Path]:
    if task not in TASKS:
        raise InputError(f"task must be one of {TASKS}, not {task!r}", key="--task")
    read = read_splits(cv_root, covost_tsv, splits)
    written = []
    for split, clips in read.items():
        if not clips:
            raise InputError(f"no row of split {split}", path=covost_tsv)
        utt2spk = {c.utt_id: c.speaker for c in clips}
        sentence = {c.utt_id: c.sentence for c in clips}
        translation = {c.utt_id: c.translation for c in clips}
        texts = (
            {"text": sentence}
            if task == "asr"
            else {"text": translation, f"text.{src}": sentence, f"text.{tgt}": translation}
        )
        dst = Path(out_dir) / split
        tables = {
            "wav.scp": {c.utt_id: pipe_command(c.mp3) for c in clips},
            "utt2spk": utt2spk,
            "lang": {c.utt_id: src for c in clips},
            **texts,
        }
        write_data_dir(dst, tables)
        logger.info(f"{dst}: {len(clips)} clips, {len(set(utt2spk.values()))} speakers")
        written.append(dst)
    return written


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser, commands = command_parser("espnet_ext.data.covost2", __doc__)
    prep = commands.add_parser("prepare", help="write Kaldi data dirs of one CoVoST 2 direction")
    prep.add_argument(
        "--cv_root", required=True, help="Common Voice language dir (clips/, validated.tsv)"
    )
    prep.add_argument("--covost_tsv", required=True, help="covost_v2.<src>_<tgt>.tsv")
    prep.add_argument("--src", required=True)
    prep.add_argument("--tgt", required=True)
    prep.add_argument("--splits", nargs="+", default=list(SPLITS), choices=SPLITS)
    prep.add_argument("--task", default="st", choices=TASKS)
    prep.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    prepare(args.cv_root, args.covost_tsv, args.src, args.tgt, args.splits, args.task, args.out)


if __name__ == "__main__":
    sys.exit(main())
