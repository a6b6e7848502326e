"""LibriSpeech (OpenSLR SLR12) as released: download, and Kaldi data dirs as ESPnet's recipe prepares them.

Release layout (each ``<part>.tar.gz`` unpacks to ``LibriSpeech/``)::

    LibriSpeech/SPEAKERS.TXT                       ';' comments, then  ID | SEX | SUBSET | MINUTES | NAME
    LibriSpeech/<part>/<spk>/<chapter>/<spk>-<chapter>.trans.txt   lines '<spk>-<chapter>-<utt> UPPER CASE TEXT'
    LibriSpeech/<part>/<spk>/<chapter>/<spk>-<chapter>-<utt>.flac  16 kHz mono FLAC

``prepare`` writes ``<out>/<part with _>/{wav.scp,text,utt2spk,spk2utt,spk2gender}``; the "speaker"
is ``<spk>-<chapter>`` as in Kaldi's and ESPnet's librispeech recipes (per-chapter CMVN/adaptation
units). The LM text (SLR11, ``librispeech-lm-norm.txt.gz``) is fetched by ``download_lm_corpus`` and
read by ``read_lm_text``.

    python -m espnet_ext.data.librispeech download --dest DIR --parts dev-clean test-clean python -m
    espnet_ext.data.librispeech prepare --root DIR --parts dev-clean test-clean --out data python -m
    espnet_ext.data.librispeech download_lm --dest DIR python -m espnet_ext.data.librispeech lm_text
    --src DIR/librispeech-lm-norm.txt.gz --out data/lm_text
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from espnet_ext.data.datadir import audio_problem, command_parser, write_data_dir
from espnet_ext.data.download import DownloadError, extract
from espnet_ext.data.download import download as fetch
from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.fileio import atomic_write, read_utf8_lines

logger = logging.getLogger(__name__)

PathLike = str | Path

PARTS = (
    "dev-clean",
    "dev-other",
    "test-clean",
    "test-other",
    "train-clean-100",
    "train-clean-360",
    "train-other-500",
)
OPENSLR_12 = "https://www.openslr.org/resources/12"
OPENSLR_11 = "https://www.openslr.org/resources/11"
LM_CORPUS = "librispeech-lm-norm.txt.gz"
# in LibriSpeech/<part>/ once extracted whole (the marker Kaldi's download script uses)
COMPLETE = ".complete"

# Published checksums: SHA-256 of the SLR12 archives (as torchaudio's LibriSpeech dataset lists
# them); OpenSLR lists none for SLR11, the MD5 is the one public recipes check the LM text against.
CHECKSUMS: dict[str, tuple[str, str]] = {
    "dev-clean.tar.gz": (
        "sha256",
        "76f87d090650617fca0cac8f88b9416e0ebf80350acb97b343a85fa903728ab3",
    ),
    "dev-other.tar.gz": (
        "sha256",
        "12661c48e8c3fe1de2c1caa4c3e135193bfb1811584f11f569dd12645aa84365",
    ),
    "test-clean.tar.gz": (
        "sha256",
        "39fde525e59672dc6d1551919b1478f724438a95aa55f874b576be21967e6c23",
    ),
    "test-other.tar.gz": (
        "sha256",
        "d09c181bba5cf717b3dee7d4d592af11a3ee3a09e08ae025c5506f6ebe961c29",
    ),
    "train-clean-100.tar.gz": (
        "sha256",
        "d4ddd1d5a6ab303066f14971d768ee43278a5f2a0aa43dc716b0e64ecbbbf6e2",
    ),
    "train-clean-360.tar.gz": (
        "sha256",
        "146a56496217e96c14334a160df97fffedd6e0a04e66b9c5af0d40be3c792ecf",
    ),
    "train-other-500.tar.gz": (
        "sha256",
        "ddb22f27f96ec163645d53215559df6aa36515f26e01dd70798188350adcb6d2",
    ),
    LM_CORPUS: ("md5", "c83c64c726a1aedfe65f80aa311de402"),
}


class Utterance(NamedTuple):
    utt_id: str
    flac: Path
    text: str
    speaker: str  # <spk>-<chapter>
    reader: str  # <spk>, the LibriVox reader of SPEAKERS.TXT


# --------------------------------------------------------------------------------------------------
# reading


def corpus_dir(root: PathLike) -> Path:
    """The ``LibriSpeech/`` dir, given it or the dir holding it."""
    root = Path(root)
    expected = (
        "the directory holding LibriSpeech/ (OpenSLR SLR12) or that LibriSpeech/ directory itself"
    )
    if not root.is_dir():
        raise InputError(f"corpus root does not exist; expected {expected}", path=root)
    if (root / "LibriSpeech").is_dir():
        return root / "LibriSpeech"
    if (
        root.name == "LibriSpeech"
        or (root / "SPEAKERS.TXT").is_file()
        or any((root / p).is_dir() for p in PARTS)
    ):
        return root
    raise InputError(
        f"not a LibriSpeech release: no LibriSpeech/<part>/ under it; expected {expected}; found {_listing(root)}",
        path=root,
    )


def _listing(directory: Path, limit: int = 8) -> str:
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in directory.iterdir())
    if not names:
        return "an empty directory"
    return ", ".join(names[:limit]) + (
        f", ... ({len(names)} entries)" if len(names) > limit else ""
    )


def read_speaker_genders(path: Path) -> dict[str, str]:
    """``{reader id: "m" | "f"}`` from SPEAKERS.TXT."""
    if not path.is_file():
        raise InputError(
            "SPEAKERS.TXT is missing (every LibriSpeech archive ships it in LibriSpeech/)",
            path=path,
        )
    genders: dict[str, str] = {}
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            # Only the ASCII ID and SEX columns are used, so a name in another encoding does no
            # harm.
            line = raw.decode("utf-8", errors="replace").strip()
            if not line or line.startswith(";"):
                continue
            fields = [
                field.strip() for field in line.split("|", 4)
            ]  # a NAME may contain '|': "|CBW|Simon"
            if len(fields) != 5 or not fields[0].isdigit():
                raise InputError(
                    "expected 'ID | SEX | SUBSET | MINUTES | NAME'", path=path, line=number
                )
            if fields[1] not in ("M", "F"):
                raise InputError(
                    f"SEX is '{fields[1]}', expected M or F", path=path, line=number, key=fields[0]
                )
            genders[fields[0]] = fields[1].lower()
    return genders


def read_part(part_dir: Path, check_audio: bool = False) -> list[Utterance]:
    """Every utterance of one part, in C order of ids, each with its transcript and existing FLAC."""
    readers = _numbered_subdirs(part_dir)
    if not readers:
        found = _listing(part_dir)
        raise InputError(
            f"no speaker directories (expected <speaker>/<chapter>/*.flac); found {found}",
            path=part_dir,
        )
    utterances: list[Utterance] = []
    for reader_dir in readers:
        for chapter_dir in _numbered_subdirs(reader_dir):
            utterances.extend(
                _read_chapter(chapter_dir, reader_dir.name, chapter_dir.name, check_audio)
            )
    return sorted(utterances)


def _numbered_subdirs(directory: Path) -> list[Path]:
    dirs = sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith("."))
    for d in dirs:
        if not d.name.isdigit():
            raise InputError(
                "unexpected directory: speaker and chapter directories are numeric ids", path=d
            )
    return dirs


def _read_chapter(
    chapter_dir: Path, reader: str, chapter: str, check_audio: bool
) -> Iterator[Utterance]:
    trans = chapter_dir / f"{reader}-{chapter}.trans.txt"
    flacs = {p.stem: p for p in chapter_dir.glob("*.flac")}
    if not trans.is_file():
        raise InputError(
            f"transcript file is missing for the {len(flacs)} .flac files of this chapter",
            path=trans,
        )
    id_pattern = re.compile(rf"{reader}-{chapter}-\d+")
    seen: dict[str, int] = {}
    for number, line in read_utf8_lines(trans):
        utt_id, _, text = line.strip().partition(" ")
        text = text.strip()
        if not utt_id:
            raise InputError("blank line", path=trans, line=number)
        if not id_pattern.fullmatch(utt_id):
            expected = f"{reader}-{chapter}-NNNN"
            raise InputError(
                f"utterance id is not of this chapter ({expected})",
                path=trans,
                line=number,
                key=utt_id,
            )
        if not text:
            raise InputError("empty transcript", path=trans, line=number, key=utt_id)
        if utt_id in seen:
            raise InputError(
                f"duplicate utterance (first at line {seen[utt_id]})",
                path=trans,
                line=number,
                key=utt_id,
            )
        seen[utt_id] = number
        flac = flacs.pop(utt_id, None)
        if flac is None:
            raise InputError(
                f"audio file {chapter_dir / utt_id}.flac is missing",
                path=trans,
                line=number,
                key=utt_id,
            )
        problem = audio_problem(flac) if check_audio else None
        if problem:
            raise InputError(problem, path=trans, line=number, key=utt_id)
        yield Utterance(utt_id, Path(os.path.abspath(flac)), text, f"{reader}-{chapter}", reader)
    if flacs:
        stray = flacs[min(flacs)]
        raise InputError(
            f"has no transcript line in {trans} ({len(flacs)} such file(s) in the chapter)",
            path=stray,
        )


def prepare(
    root: PathLike, parts: Sequence[str], out_dir: PathLike, check_audio: bool = False
) -> list[Path]:
    """Write one validated Kaldi data dir per part (``train-clean-100`` -> ``<out>/train_clean_100``).

    Every part is checked to exist before anything is written; each data dir appears whole or not at
    all. ``check_audio`` also opens every FLAC header (slower on the full corpus).
    """
    corpus = corpus_dir(root)
    for part in parts:
        if not (corpus / part).is_dir():
            raise InputError(
                f"part '{part}' is missing: no LibriSpeech/{part} under {corpus.parent}; found {_listing(corpus)}",
                path=corpus / part,
            )
    genders = read_speaker_genders(corpus / "SPEAKERS.TXT")
    written = []
    for part in parts:
        utterances = read_part(corpus / part, check_audio)
        for u in utterances:
            if u.reader not in genders:
                message = f"reader {u.reader} of {part} has no line in SPEAKERS.TXT"
                raise InputError(message, path=corpus / "SPEAKERS.TXT", key=u.reader)
        utt2spk = {u.utt_id: u.speaker for u in utterances}
        dst = Path(out_dir) / part.replace("-", "_")
        tables = {
            "wav.scp": {u.utt_id: str(u.flac) for u in utterances},
            "text": {u.utt_id: u.text for u in utterances},
            "utt2spk": utt2spk,
            "spk2gender": {u.speaker: genders[u.reader] for u in utterances},
        }
        write_data_dir(dst, tables)
        logger.info(
            f"{dst}: {len(utterances)} utterances, {len(set(utt2spk.values()))} speakers (chapters)"
        )
        written.append(dst)
    return written


def read_lm_text(path: PathLike) -> Iterator[str]:
    """Lines of the LM corpus (``.gz`` or plain), normalised like the transcripts: upper case, single spaces.

    Blank lines are skipped; a line that is not UTF-8 is an error naming the file and line.
    """
    for _, line in read_utf8_lines(path):
        words = line.split()
        if words:
            yield " ".join(words).upper()


def write_lm_text(
    src: PathLike, out: PathLike, max_lines: int | None = None, prefix: str = "librispeech_lm_"
) -> int:
    """Write the LM corpus as a Kaldi text file (``<prefix><9-digit line no> <text>``); returns the line count."""
    count = 0
    with atomic_write(out) as f:
        for count, text in enumerate(itertools.islice(read_lm_text(src), max_lines), start=1):
            f.write(f"{prefix}{count:09d} {text}\n")
    return count


# --------------------------------------------------------------------------------------------------
# download


def download(
    dest: PathLike,
    parts: Sequence[str],
    base_url: str = OPENSLR_12,
    checksums: Mapping[str, tuple[str, str]] | None = None,
    remove_archive: bool = False,
) -> Path:
    """Fetch, verify and extract ``<part>.tar.gz`` into ``<dest>/LibriSpeech/<part>``; returns ``dest``.

    A part with its ``.complete`` marker is skipped; an interrupted download resumes from
    ``<part>.tar.gz.part``; a checksum mismatch deletes that file and raises.
    """
    dest = Path(dest)
    checksums = CHECKSUMS if checksums is None else checksums
    for part in parts:
        if f"{part}.tar.gz" not in checksums:
            raise InputError(
                f"unknown LibriSpeech part '{part}'; known: {', '.join(PARTS)}", key=part
            )
    dest.mkdir(parents=True, exist_ok=True)
    for part in parts:
        part_dir = dest / "LibriSpeech" / part
        if (part_dir / COMPLETE).is_file():
            logger.info(f"{part_dir}: already complete")
            continue
        name = f"{part}.tar.gz"
        archive = fetch(f"{base_url}/{name}", dest / name, checksums[name])
        extract(archive, dest, "delete it and rerun to download again")
        if not part_dir.is_dir():
            found = _listing(dest)
            raise InputError(
                f"archive holds no LibriSpeech/{part}/; after extraction found {found}",
                path=archive,
            )
        (part_dir / COMPLETE).write_text(f"{name} {' '.join(checksums[name])}\n")
        if remove_archive:
            archive.unlink()
    return dest


def download_lm_corpus(
    dest: PathLike,
    base_url: str = OPENSLR_11,
    checksums: Mapping[str, tuple[str, str]] | None = None,
) -> Path:
    """Fetch and verify ``librispeech-lm-norm.txt.gz`` (SLR11) into ``dest``; returns its path."""
    checksums = CHECKSUMS if checksums is None else checksums
    Path(dest).mkdir(parents=True, exist_ok=True)
    return fetch(f"{base_url}/{LM_CORPUS}", Path(dest) / LM_CORPUS, checksums[LM_CORPUS])


# --------------------------------------------------------------------------------------------------
# command line


def _parts(values: Sequence[str]) -> list[str]:
    return [p for value in values for p in value.replace(",", " ").split()]


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> int | None:
    parser, commands = command_parser("espnet_ext.data.librispeech", __doc__)
    dl = commands.add_parser(
        "download", help="fetch, verify and extract parts into DEST/LibriSpeech/"
    )
    dl.add_argument("--dest", required=True)
    dl.add_argument(
        "--parts",
        nargs="+",
        required=True,
        help="e.g. train-clean-100 dev-clean (spaces or commas)",
    )
    dl.add_argument("--base_url", default=OPENSLR_12)
    dl.add_argument(
        "--remove_archive", action="store_true", help="delete each .tar.gz once extracted"
    )
    prep = commands.add_parser("prepare", help="write Kaldi data dirs OUT/<part with _>")
    prep.add_argument(
        "--root", required=True, help="the dir holding LibriSpeech/, or LibriSpeech/ itself"
    )
    prep.add_argument("--parts", nargs="+", required=True)
    prep.add_argument("--out", required=True)
    prep.add_argument("--check_audio", action="store_true", help="also open every FLAC header")
    lm = commands.add_parser("download_lm", help=f"fetch and verify {LM_CORPUS} (SLR11) into DEST")
    lm.add_argument("--dest", required=True)
    lm.add_argument("--base_url", default=OPENSLR_11)
    lm_text = commands.add_parser("lm_text", help="write the LM corpus as a Kaldi text file")
    lm_text.add_argument("--src", required=True)
    lm_text.add_argument("--out", required=True)
    lm_text.add_argument("--max_lines", type=int)
    args = parser.parse_args(argv)
    try:
        if args.command == "download":
            download(
                args.dest, _parts(args.parts), args.base_url, remove_archive=args.remove_archive
            )
        elif args.command == "prepare":
            prepare(args.root, _parts(args.parts), args.out, check_audio=args.check_audio)
        elif args.command == "download_lm":
            print(download_lm_corpus(args.dest, args.base_url))
        else:
            print(
                f"{args.out}: {write_lm_text(args.src, args.out, args.max_lines)} lines",
                file=sys.stderr,
            )
    except DownloadError as e:  # a failed fetch, not bad input (InputError): rerunning resumes
        print(f"error: {e}", file=sys.stderr)
        return 1
    return None


if __name__ == "__main__":
    sys.exit(main())
