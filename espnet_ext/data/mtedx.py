"""Multilingual TEDx (mTEDx, OpenSLR 100) as released -> Kaldi data dirs with a language tag per utterance.

Release layout (``mtedx_<src>-<tgt>.tgz`` unpacks to ``<src>-<tgt>/``; ASR uses the ``<lang>-<lang>``
pairs, whose transcripts are in the source language)::

    <src>-<tgt>/data/{train,valid,test}/wav/<talk>.flac    one whole talk (not at 16 kHz: ESPnet's
                                                           egs2/mtedx/st1_ml/local/data_prep_mtedx.sh
                                                           decodes each with ffmpeg -ar 16000)
    <src>-<tgt>/data/<split>/txt/<split>.yaml             one segment per line:
        - {duration: 3.02, offset: 13.47, speaker_id: <spk>, wav: <talk>.wav}   (the list says .wav)
    <src>-<tgt>/data/<split>/txt/<split>.<src>            the transcript, same line
    <src>-<tgt>/data/<split>/txt/<split>.<tgt>            the translation (ST pairs)

``prepare`` reads the ASR pairs of the given languages and writes, per split, one multilingual data dir
``<out>/<split>`` and, for the ``--per_language`` splits, one per language ``<out>/<split>_<lang>`` (for WER
per language)::

    wav.scp   <lang>_<talk> <abs path of the talk flac>      segments  <utt> <lang>_<talk> <start> <end>
              (a talk at another rate than 16 kHz, or not mono, is read through a pipe resampling it:
              python -m espnet_ext.data.compressed_audio <abs flac> |; its rate is read from the file)
    utt2spk   <utt> <lang>_<talk>  spk2utt                   text      the transcript, as released
    lang      <utt> <lang>: the task tag (espnet_ext.data.task_tags)

Ids: ``<lang>_<talk>_<start ms:08d>_<end ms:08d>`` (the language first, so C order groups languages and
talk ids of two languages never collide). Every split of every language is read and checked (segments
inside their recordings, line-aligned text, no empty transcript) before anything is written.

``prepare_st`` reads the ST pairs ``<src>-<tgt>`` (``<src>`` != ``<tgt>``). The release has 13 test
directions; 10 of them have training data (``TRAIN_DIRECTIONS``), the other 3 (``ZERO_SHOT_DIRECTIONS``)
only valid and test lists. Train and valid are read from the trained directions, test from every direction
asked for; per direction a test dir ``<out>/test_<src>-<tgt>`` (BLEU per direction). The tables are those
above with ``text`` the transcript, plus

    text.src  the transcript   text.tgt  the translation (ESPnet st.sh with --src_lang src --tgt_lang tgt)
    src_lang  <utt> <src>      tgt_lang  <utt> <tgt>      direction  <utt> <src>-<tgt>     (task tags)

and ids ``<src>-<tgt>_<talk>_<start ms>_<end ms>`` (the same talk is released in several directions).

    python -m espnet_ext.data.mtedx prepare --root DIR --langs "es fr" --out data
    python -m espnet_ext.data.mtedx prepare_st --root DIR --train_directions "es-en fr-en" \
        --test_directions "es-en fr-en it-en" --out data
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from espnet_ext.data.datadir import command_parser, write_data_dir
from espnet_ext.data.mustc import Segment, kaldi_tables, read_segments
from espnet_ext.errors import InputError, reports_input_errors

logger = logging.getLogger(__name__)

PathLike = str | Path
LANGUAGES = ("ar", "de", "el", "es", "fr", "it", "pt", "ru")  # mTEDx's 8 source languages
SPLITS = ("train", "valid", "test")
# the paper's Table 9: the directions with training data, and the three only tested (zero-shot)
TRAIN_DIRECTIONS = (
    "el-en", "es-en", "es-fr", "es-it", "es-pt", "fr-en", "fr-es", "fr-pt", "pt-en", "ru-en",
)  # fmt: skip
ZERO_SHOT_DIRECTIONS = ("it-en", "it-es", "pt-es")
TARGET_LANGUAGES = ("en", "es", "fr", "it", "pt")
RELEASE_URL = "https://www.openslr.org/100/"


def release_dir(root: PathLike, src: str, tgt: str) -> Path:
    """``<root>/<src>-<tgt>/``; InputError saying what was expected and where to get it otherwise."""
    pair = Path(root) / f"{src}-{tgt}"
    if not (pair / "data").is_dir():
        raise InputError(
            f"no mTEDx {src}-{tgt} release here (expected {pair}/data/<split>/{{wav,txt}}); download "
            f"mtedx_{src}-{tgt}.tgz from {RELEASE_URL} and extract it into {root}",
            path=root,
        )
    return pair


def flac_of(wav_field: str) -> str:
    """The file under ``wav/`` of a segment list's ``wav`` field: ``<talk>.wav`` or ``<talk>`` -> ``<talk>.flac``."""
    return f"{Path(wav_field).stem if wav_field.endswith(('.wav', '.flac')) else wav_field}.flac"


def read_split(root: PathLike, src: str, tgt: str, split: str) -> list[Segment]:
    """The segments of ``<src>-<tgt>/data/<split>``, ids prefixed with the language (ASR, src == tgt)
    or the direction (ST)."""
    split_dir = release_dir(root, src, tgt) / "data" / split
    if not split_dir.is_dir():
        raise InputError(
            f"split '{split}' is missing from the release (mTEDx splits: {', '.join(SPLITS)})",
            path=split_dir,
        )
    prefix = src if src == tgt else f"{src}-{tgt}"
    return read_segments(
        split_dir, split, src, tgt, flac_of, lambda wav: f"{prefix}_{Path(flac_of(wav)).stem}"
    )


def read_asr_split(root: PathLike, lang: str, split: str) -> list[Segment]:
    """The segments of ``<lang>-<lang>/data/<split>``, ids prefixed with the language."""
    return read_split(root, lang, lang, split)


def asr_tables(lang: str, segment: Segment) -> dict[str, str]:
    return {"lang": lang}


def st_tables(direction: str, segment: Segment) -> dict[str, str]:
    src, tgt = direction.split("-")
    return {
        "text.src": segment.source,
        "text.tgt": segment.target,
        "src_lang": src,
        "tgt_lang": tgt,
        "direction": direction,
    }


def write_tasks_dir(
    dst: Path, segments: dict[str, list[Segment]], tables: Callable = asr_tables
) -> None:
    """One validated data dir of the segments of several tasks ({language or direction: segments});
    ``tables(task, segment)`` gives the per-utterance tables beside the Kaldi ones."""
    every = [(task, s) for task, segs in segments.items() for s in segs]
    extra: dict[str, dict[str, str]] = {}
    for task, s in every:
        for name, value in tables(task, s).items():
            extra.setdefault(name, {})[s.utt_id] = value
    write_data_dir(dst, {**kaldi_tables([s for _, s in every]), **extra})


def prepare(
    root: PathLike,
    langs: Sequence[str],
    splits: Sequence[str],
    out_dir: PathLike,
    per_language: Sequence[str] = ("test",),
) -> list[Path]:
    """Write the multilingual data dirs (and per-language ones); all is read before anything is written."""
    unknown = [lang for lang in langs if lang not in LANGUAGES]
    if unknown or not langs:
        raise InputError(
            f"languages must be among mTEDx's {' '.join(LANGUAGES)}, got {list(langs)}"
        )
    read = {split: {lang: read_asr_split(root, lang, split) for lang in langs} for split in splits}
    written = []
    for split, by_lang in read.items():
        dst = Path(out_dir) / split
        write_tasks_dir(dst, by_lang)
        written.append(dst)
        if split in per_language:
            for lang, segments in by_lang.items():
                write_tasks_dir(Path(out_dir) / f"{split}_{lang}", {lang: segments})
                written.append(Path(out_dir) / f"{split}_{lang}")
        counts = ", ".join(f"{lang} {len(segs)}" for lang, segs in by_lang.items())
        logger.info(f"{dst}: segments per language: {counts}")
    return written


def parse_direction(direction: str) -> tuple[str, str]:
    """``<src>-<tgt>`` of mTEDx (src one of LANGUAGES, tgt another language) -> (src, tgt)."""
    src, dash, tgt = direction.partition("-")
    if not dash or src not in LANGUAGES or not tgt or tgt == src or "-" in tgt:
        raise InputError(
            f"'{direction}' is not an mTEDx ST direction <src>-<tgt> (src among "
            f"{' '.join(LANGUAGES)}, tgt another language)"
        )
    return src, tgt


def prepare_st(
    root: PathLike,
    train_directions: Sequence[str],
    test_directions: Sequence[str],
    out_dir: PathLike,
    splits: Sequence[str] = SPLITS,
) -> list[Path]:
    """Write the multilingual ST data dirs (see the module doc); all is read before anything is written.

    train and valid come from ``train_directions``; test from ``test_directions`` (trained and zero-shot),
    which also get a dir each.
    """
    for direction in [*train_directions, *test_directions]:
        parse_direction(direction)
    if not train_directions or not test_directions:
        raise InputError("needs at least one training and one test direction")
    read = {
        split: {
            d: read_split(root, *parse_direction(d), split)
            for d in (test_directions if split == "test" else train_directions)
        }
        for split in splits
    }
    written = []
    for split, by_direction in read.items():
        dst = Path(out_dir) / split
        write_tasks_dir(dst, by_direction, st_tables)
        written.append(dst)
        if split == "test":
            for direction, segments in by_direction.items():
                written.append(Path(out_dir) / f"test_{direction}")
                write_tasks_dir(written[-1], {direction: segments}, st_tables)
        counts = ", ".join(f"{d} {len(segs)}" for d, segs in by_direction.items())
        logger.info(f"{dst}: segments per direction: {counts}")
    return written


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser, commands = command_parser("espnet_ext.data.mtedx", __doc__)
    prep = commands.add_parser("prepare", help="write Kaldi data dirs OUT/<split>[_<lang>]")
    prep.add_argument("--root", required=True, help="the dir holding <lang>-<lang>/")
    prep.add_argument("--langs", required=True, help="source languages, e.g. 'es fr it'")
    prep.add_argument("--splits", nargs="+", default=list(SPLITS))
    prep.add_argument(
        "--per_language", nargs="*", default=["test"], help="splits also per language"
    )
    prep.add_argument("--out", required=True)
    st = commands.add_parser(
        "prepare_st", help="write ST data dirs OUT/<split>, OUT/test_<src>-<tgt>"
    )
    st.add_argument("--root", required=True, help="the dir holding <src>-<tgt>/")
    st.add_argument("--train_directions", default=" ".join(TRAIN_DIRECTIONS))
    st.add_argument("--test_directions", default=" ".join(TRAIN_DIRECTIONS + ZERO_SHOT_DIRECTIONS))
    st.add_argument("--splits", nargs="+", default=list(SPLITS))
    st.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.command == "prepare_st":
        prepare_st(
            args.root,
            args.train_directions.split(),
            args.test_directions.split(),
            args.out,
            args.splits,
        )
    else:
        prepare(args.root, args.langs.split(), args.splits, args.out, args.per_language)


if __name__ == "__main__":
    sys.exit(main())
