"""MuST-C (FBK) as released: Kaldi data dirs with ``segments`` cut from the long talk recordings.

Release layout (``MUSTC_v1.0_en-<tgt>.tar.gz`` unpacks to ``en-<tgt>/``)::

    en-<tgt>/data/<split>/wav/ted_<talk>.wav        16 kHz mono, one whole TED talk
    en-<tgt>/data/<split>/txt/<split>.yaml          one segment per line:
        - {duration: 3.500000, offset: 16.080000, rW: 9, uW: 0, speaker_id: spk.767, wav: ted_767.wav}
    en-<tgt>/data/<split>/txt/<split>.en            English transcript of the segment on the same line
    en-<tgt>/data/<split>/txt/<split>.<tgt>         its translation, same line

Splits: train, dev, tst-COMMON, tst-HE. ``prepare`` writes ``<out>/<split with _>/`` (``tst-COMMON`` ->
``tst_COMMON``) holding::

    wav.scp     <talk> <abs path of the talk wav>          (keyed by recording, as Kaldi with segments;
                                                           one not 16 kHz mono: a pipe resampling it)
    segments    <utt> <talk> <start_s> <end_s>             start = offset, end = offset + duration
    utt2spk     <utt> <talk>    spk2utt                    the talk is the speaker (ESPnet's must_c recipe)
    text.en     the transcript, text.<tgt> the translation  (as released: true case, punctuation kept)
    text        = text.en: what asr.sh reads; st.sh reads text.en (source) and text.<tgt> (target)

Ids: talk ``ted_767`` -> ``ted_00767`` (zero-padded, so C order of utterance ids groups talks in the same
order as the speaker ids), utterance ``ted_00767_<start ms:08d>_<end ms:08d>``; every table is C-sorted.
Every copy of a repeated segment (the same id) and a segment with a blank transcript or translation are
dropped, each named (file:line) in a warning on stderr, as ESPnet's MuST-C preparation drops them; what
cannot be read (misaligned text files, a bad yaml line, a missing talk, a segment past its talk's end)
is refused.

The corpus cannot be downloaded by a script: FBK hands it out after accepting its licence
(https://ict.fbk.eu/must-c/). ``check_release`` extracts a tarball put in the root and otherwise explains
what to fetch.

    python -m espnet_ext.data.mustc check --root DIR --tgt_lang de
    python -m espnet_ext.data.mustc prepare --root DIR --tgt_lang de --splits train dev tst-COMMON --out data
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import soundfile
import yaml

from espnet_ext.data.compressed_audio import wav_scp_value
from espnet_ext.data.datadir import command_parser, write_data_dir
from espnet_ext.data.download import extract
from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.features.fbank import MAX_SEGMENT_OVERSHOOT_S
from espnet_ext.fileio import read_utf8_lines

logger = logging.getLogger(__name__)

PathLike = str | Path

SPLITS = ("train", "dev", "tst-COMMON", "tst-HE")
LICENCE_URL = "https://ict.fbk.eu/must-c/"
YAML_KEYS = ("duration", "offset", "wav")  # rW, uW, speaker_id are not needed
_TED_WAV = re.compile(r"ted_(\d+)\.wav")


class Segment(NamedTuple):
    utt_id: str
    talk: str
    wav: Path
    start: float
    end: float
    source: str  # English transcript
    target: str  # translation
    scp: str  # the talk's wav.scp value: its path, or a pipe resampling it to 16 kHz mono


def archive_name(tgt_lang: str) -> str:
    return f"MUSTC_v1.0_en-{tgt_lang}.tar.gz"


def data_dir_name(split: str) -> str:
    return split.replace("-", "_")


def talk_id(wav_name: str) -> str:
    """``ted_767.wav`` -> ``ted_00767``; another name keeps its stem."""
    match = _TED_WAV.fullmatch(wav_name)
    return f"ted_{int(match.group(1)):05d}" if match else Path(wav_name).stem


def release_dir(root: PathLike, tgt_lang: str) -> Path:
    """``en-<tgt>/``, given it or the dir holding it; InputError explaining the manual download otherwise."""
    root = Path(root)
    pair = f"en-{tgt_lang}"
    for candidate in (root / pair, root):
        if (candidate / "data").is_dir() and candidate.name == pair:
            return candidate
    raise InputError(
        f"no MuST-C {pair} release here (expected {root / pair}/data/<split>/{{wav,txt}}); MuST-C is "
        f"distributed after accepting its licence at {LICENCE_URL}: download {archive_name(tgt_lang)} "
        f"and put it into {root} (the download stage extracts it) or extract it there yourself",
        path=root,
    )


def check_release(root: PathLike, tgt_lang: str) -> Path:
    """The release dir, after extracting ``MUSTC_v1.0_en-<tgt>.tar.gz`` when only the tarball is in ``root``."""
    root = Path(root)
    archive = root / archive_name(tgt_lang)
    if not (root / f"en-{tgt_lang}" / "data").is_dir() and archive.is_file():
        extract(archive, root, f"download it again from {LICENCE_URL}")
    return release_dir(root, tgt_lang)


# libyaml's loader where PyYAML has it: ~7x faster on MuST-C's 229k-line train yaml, the same values
_BASE_LOADER = getattr(yaml, "CBaseLoader", yaml.BaseLoader)


def _read_yaml_line(line: str, path: Path, number: int) -> dict[str, str]:
    """One ``- {key: value, ...}`` line as strings (BaseLoader: '3.500000' stays exact text)."""
    try:
        entries = yaml.load(line, Loader=_BASE_LOADER)
    except yaml.YAMLError as e:
        raise InputError(f"not a YAML segment line: {e.problem}", path=path, line=number) from e
    if not (isinstance(entries, list) and len(entries) == 1 and isinstance(entries[0], dict)):
        raise InputError(
            "expected '- {duration: D, offset: O, ..., wav: ted_N.wav}'", path=path, line=number
        )
    entry = entries[0]
    missing = [key for key in YAML_KEYS if key not in entry]
    if missing:
        raise InputError(f"segment without {', '.join(missing)}", path=path, line=number)
    return entry


def _lines(path: Path) -> list[tuple[int, str]]:
    if not path.is_file():
        raise InputError("file of the release is missing", path=path)
    return list(read_utf8_lines(path))


def _talk(wav: Path, yaml_path: Path, number: int) -> tuple[float, str]:
    """(duration in s, wav.scp value) of a talk recording; one at another rate than 16 kHz (mTEDx's
    flac) or not mono is resampled by the wav.scp pipe (compressed_audio.wav_scp_value)."""
    if not wav.is_file():
        raise InputError(f"talk recording {wav} does not exist", path=yaml_path, line=number)
    try:
        info = soundfile.info(str(wav))
    except Exception as e:  # soundfile raises its own error types
        raise InputError(f"cannot read {wav}: {e}", path=yaml_path, line=number) from e
    return info.frames / info.samplerate, wav_scp_value(wav, info.samplerate, info.channels)


def _warn_dropped(path: Path, line: int, why: str) -> None:
    logger.warning(f"warning: {path}:{line}: {why}; dropped")


def read_split(release: Path, split: str, tgt_lang: str) -> list[Segment]:
    """The segments of one split in C order of ids, each checked against its talk recording."""
    return read_segments(release / "data" / split, split, "en", tgt_lang)


def read_segments(
    split_dir: Path,
    split: str,
    src_lang: str,
    tgt_lang: str,
    wav_file: Callable[[str], str] = lambda name: name,
    talk_of: Callable[[str], str] = talk_id,
) -> list[Segment]:
    """Segments of a MuST-C-style split dir (``txt/<split>.{yaml,<src>,<tgt>}`` + ``wav/``), C-sorted.

    ``wav_file`` maps the yaml's ``wav`` field to the file name under ``wav/`` and ``talk_of`` to the
    talk id (mTEDx's lists say ``<talk>.wav`` for ``<talk>.flac``); ids are ``<talk>_<start ms>_<end ms>``.
    """
    txt = split_dir / "txt"
    yaml_path, en_path, tgt_path = (txt / f"{split}.{ext}" for ext in ("yaml", src_lang, tgt_lang))
    yaml_lines, en_lines, tgt_lines = _lines(yaml_path), _lines(en_path), _lines(tgt_path)
    for path, lines in ((en_path, en_lines), (tgt_path, tgt_lines)):
        if len(lines) != len(yaml_lines):
            shorter = min(len(lines), len(yaml_lines)) + 1
            longer = path if len(lines) > len(yaml_lines) else yaml_path
            raise InputError(
                f"{path.name} has {len(lines)} lines but {yaml_path.name} has {len(yaml_lines)}: "
                "the files must be line-aligned",
                path=longer,
                line=shorter,
            )
    talks: dict[str, tuple[float, str]] = {}  # wav field -> (duration, wav.scp value)
    by_id: dict[str, list[tuple[int, Segment]]] = {}
    for (number, line), (_, source), (_, target) in zip(yaml_lines, en_lines, tgt_lines):
        entry = _read_yaml_line(line, yaml_path, number)
        try:
            offset, duration = float(entry["offset"]), float(entry["duration"])
        except ValueError:
            raise InputError(
                f"offset '{entry['offset']}' and duration '{entry['duration']}' must be seconds",
                path=yaml_path,
                line=number,
            ) from None
        if offset < 0 or duration <= 0:
            raise InputError(
                f"offset {offset} must be >= 0 and duration {duration} > 0",
                path=yaml_path,
                line=number,
            )
        wav = split_dir / "wav" / wav_file(entry["wav"])
        if entry["wav"] not in talks:
            talks[entry["wav"]] = _talk(wav, yaml_path, number)
        talk_duration, scp = talks[entry["wav"]]
        end = offset + duration
        if end > talk_duration + MAX_SEGMENT_OVERSHOOT_S:
            raise InputError(
                f"segment ends at {end:.6f} s, after the end of {wav} ({talk_duration:.3f} s)",
                path=yaml_path,
                line=number,
            )
        talk = talk_of(entry["wav"])
        utt_id = f"{talk}_{round(offset * 1000):08d}_{round(end * 1000):08d}"
        segment = Segment(
            utt_id,
            talk,
            wav.absolute(),
            offset,
            end,
            " ".join(source.split()),
            " ".join(target.split()),
            scp,
        )
        by_id.setdefault(utt_id, []).append((number, segment))
    # The release has a few repeated segments (same talk, offset and duration) and blank text lines.
    # ESPnet's MuST-C and mTEDx preparation drops them (espnet egs/must_c/st1/local/data_prep.sh:
    # "remove duplicated utterances", every copy of a repeated id; egs2/mtedx/st1_ml/local/
    # data_prep_mtedx.sh: "remove empty and short utterances"); so do we, each one named on stderr.
    segments: dict[str, Segment] = {}
    dropped = 0
    for utt_id, copies in by_id.items():
        if len(copies) > 1:
            lines = ", ".join(str(number) for number, _ in copies)
            for number, _ in copies:
                _warn_dropped(yaml_path, number, f"segment {utt_id} is repeated (lines {lines})")
            dropped += len(copies)
            continue
        number, segment = copies[0]
        blank = [
            path
            for path, text in ((en_path, segment.source), (tgt_path, segment.target))
            if not text
        ]
        if blank:
            _warn_dropped(blank[0], number, f"empty text for segment {utt_id}")
            dropped += 1
            continue
        segments[utt_id] = segment
    if dropped:
        logger.warning(
            f"warning: {yaml_path}: {dropped} of {len(yaml_lines)} segments dropped (named above)"
        )
    if not segments:
        raise InputError(
            "no segments" + (f" left: all {dropped} dropped (see the warnings)" if dropped else ""),
            path=yaml_path,
        )
    return [segments[key] for key in sorted(segments)]


def kaldi_tables(segments: Sequence[Segment]) -> dict[str, dict]:
    """wav.scp (a talk's wav), segments, utt2spk (the talk: one speaker each) and text (the source)."""
    return {
        "wav.scp": {s.talk: s.scp for s in segments},
        "segments": {s.utt_id: [s.talk, f"{s.start:.6f}", f"{s.end:.6f}"] for s in segments},
        "utt2spk": {s.utt_id: s.talk for s in segments},
        "text": {s.utt_id: s.source for s in segments},
    }


def prepare(root: PathLike, tgt_lang: str, splits: Sequence[str], out_dir: PathLike) -> list[Path]:
    """Write one validated data dir per split; every split is read (and checked) before any is written."""
    release = release_dir(root, tgt_lang)
    for split in splits:
        if not (release / "data" / split).is_dir():
            raise InputError(
                f"split '{split}' is missing from the release (MuST-C splits: {', '.join(SPLITS)})",
                path=release / "data" / split,
            )
    read = {split: read_split(release, split, tgt_lang) for split in splits}
    written = []
    for split, segments in read.items():
        dst = Path(out_dir) / data_dir_name(split)
        tables = kaldi_tables(segments)
        tables["text.en"] = tables["text"]
        tables[f"text.{tgt_lang}"] = {s.utt_id: s.target for s in segments}
        write_data_dir(dst, tables)
        logger.info(
            f"{dst}: {len(segments)} segments of {len(set(tables['utt2spk'].values()))} talks"
        )
        written.append(dst)
    return written


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser, commands = command_parser("espnet_ext.data.mustc", __doc__)
    for name, help_text in (
        ("check", "find the release (extracting its tarball), or explain the manual download"),
        ("prepare", "write Kaldi data dirs OUT/<split with _>"),
    ):
        command = commands.add_parser(name, help=help_text)
        command.add_argument("--root", required=True, help="the dir holding en-<tgt>/ (or it)")
        command.add_argument(
            "--tgt_lang", default="de", help="target language of the pair en-<tgt>"
        )
    prep = commands.choices["prepare"]
    prep.add_argument("--splits", nargs="+", default=list(SPLITS))
    prep.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.command == "check":
        print(check_release(args.root, args.tgt_lang))
    else:
        prepare(args.root, args.tgt_lang, args.splits, args.out)


if __name__ == "__main__":
    sys.exit(main())
