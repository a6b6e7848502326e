"""LRS3 (Afouras et al., 2018) as Kaldi data dirs of 88x88 grey mouth-ROI videos at 25 fps.

Command line::

    python -m espnet_ext.data.lrs3 --lrs3 <root> --out <data> --parts pretrain,trainval,test \\
        (--landmarks <dir> --mean_face <npy> | --roi <dir>) [--video_dir <dir>] [--nj N] \\
        [--valid_ids lrs3-valid.id] [--check_only | --shard K/N]

Expected inputs (the release layout): ``<root>/<part>/<video-id>/<nnnnn>.mp4`` and ``.txt``; a ``.txt``
starts ``Text:  <WORDS>``, then ``Conf:  <n>``, and (after a blank line) the word table ``WORD START
END ASDSCORE``, one word per line, times in seconds from the start of the clip. Mouth ROIs come from
either

- ``--landmarks <dir>``: ``<dir>/<part>/<video-id>/<nnnnn>.pkl`` per clip, in the format of AV-HuBERT's
  ``detect_landmark.py`` (per decoded frame a 68x2 array or None), and ``--mean_face``, the reference
  face of its ``align_mouth.py`` (``20words_mean_face.npy``); cropping as ``mouth_roi`` describes; or
- ``--roi <dir>``: already cropped ROI videos ``<dir>/<part>/<video-id>/<nnnnn>.mp4`` (or ``.npy``),
  e.g. the output of AV-HuBERT's ``align_mouth.py`` (96x96): square crops larger than 88x88 are
  centre-cropped to 88x88, as AV-HuBERT's loader does at test time.

``--roi_size 96`` keeps AV-HuBERT's whole 96x96 crops instead, for its training augmentation (a random
88x88 crop and a horizontal flip, which the lip-reading front-end does with ``crop_size: 88`` and
``augment: true``; centre 88x88 at test time).

Writes ``<out>/<part>/{video.scp,text,utt2spk,spk2utt,utt2num_frames}`` (utterance ``<video-id>-
<nnnnn>``, speaker = the video id) and the ROI frames as uint8 ``(T, 88, 88)`` ``.npy`` files under
``<video_dir>/<part>/<digest>/`` (default ``<out>/video``; the digest of the options the crops depend on,
written beside them as ``options.json``); ``video.scp`` lists their absolute paths. A part's data dir
appears only once all of its clips are done (``datadir.atomic_dir``). Frame rates other than 25 fps are
refused unless ``--fps_policy resample`` (``espnet_ext.data.video``).

Resuming: each crop file is written whole (temp file + rename), and a rerun with the same options and
inputs (paths) reuses every clip whose files are all there, so a job killed after hours loses only the
clips in progress; other options crop into another ``<digest>`` dir (``crop_dir``). The crops of a big
corpus are made by N jobs of the job backend, ``--shard K/N`` (K = 1..N) each, which crop and write no data
dir, then one run without ``--shard`` finds the clips done and writes the data dirs; ``--check_only``
checks every input first (what every run does before decoding a video) and writes nothing.

``--valid_ids FILE``: AV-HuBERT's held-out dev list (``avhubert/preparation/data/lrs3-valid.id``, which its
``lrs3_manifest.py --valid-ids`` reads: 1,200 ``trainval/<video-id>/<nnnnn>`` lines) checked against the
trainval clips before any video is decoded, and written as utterance ids to ``<out>/trainval_valid_ids``
(the recipe's ``local/data.sh --valid_ids`` makes them data/dev, the rest of trainval the training part).

Text: the upper-case words of the ``Text:`` line, as released; ``--lowercase`` writes them as AV-HuBERT's
labels (``lrs3_manifest.py`` lower-cases them, nothing else).

Pretrain clips are long (up to minutes). They are cut as AV-HuBERT's ``lrs3_prepare.py`` does: a clip
whose last word ends before ``--pretrain_max_seconds`` (15) is kept whole; a longer one is split at
every pause of more than ``--pretrain_min_pause`` (0.4 s) between words, each cut half-way through the
pause (the first piece starts at 0, the last runs to the end of the clip), into utterances
``<video-id>-<nnnnn>_<k>``; frames ``int(start x 25)`` to ``int(end x 25)``. Pieces can still exceed 15 s
when a speaker does not pause, as in AV-HuBERT.

The pretrain part's landmark files or ROI videos may be per whole clip (``<dir>/pretrain/<video-id>/
<nnnnn>.pkl``) or per piece, where AV-HuBERT's own tools put them: ``lrs3_prepare.py`` trims the pieces
into ``short-pretrain/<video-id>/<nnnnn>[_<k>].mp4``, and ``detect_landmark.py`` / ``align_mouth.py``
write ``<dir>/short-pretrain/<video-id>/<nnnnn>[_<k>].{pkl,mp4}`` for them (``_<k>`` only on a cut clip).
A piece's landmarks are those of its frames ``int(start x 25)`` to ``int(end x 25)`` of the clip, the
frames AV-HuBERT's trimmed video holds. Every clip's files are checked before any video is decoded.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from espnet_ext.argv import parse_shard
from espnet_ext.data import mouth_roi
from espnet_ext.data.datadir import atomic_dir, spk2utt_from_utt2spk, write_kaldi_map
from espnet_ext.data.video import (
    FPS,
    FPS_POLICIES,
    conform_fps,
    decode,
    needs_resampling,
    read_video,
)
from espnet_ext.errors import ConfigError, InputError, reports_input_errors
from espnet_ext.fileio import atomic_write, read_utf8_lines

PARTS = ("pretrain", "trainval", "test")
PIECES_DIR = (
    "short-pretrain"  # AV-HuBERT's trimmed pretrain pieces (avhubert/preparation/lrs3_prepare.py)
)
ROI_SIZE = mouth_roi.ROI_SIZE


@dataclass(frozen=True)
class Word:
    word: str
    start: float
    end: float


@dataclass(frozen=True)
class Transcript:
    text: str
    words: tuple[Word, ...]


def read_transcript(path: Path) -> Transcript:
    """The ``Text:`` line and the word table of an LRS3 ``.txt``; InputError naming the line."""
    lines = list(read_utf8_lines(path))
    if not lines or not lines[0][1].startswith("Text:"):
        raise InputError("expected the first line to start with 'Text:'", path=path, line=1)
    text = " ".join(lines[0][1][len("Text:") :].split())
    if not text:
        raise InputError("empty 'Text:' line", path=path, line=1)
    words: list[Word] = []
    header = next((k for k, (_, line) in enumerate(lines) if line.split()[:1] == ["WORD"]), None)
    for lineno, line in lines[header + 1 :] if header is not None else ():
        fields = line.split()
        if not fields:
            continue
        try:
            word, start, end = fields[0], float(fields[1]), float(fields[2])
        except (IndexError, ValueError):
            message = f"expected 'WORD START END ASDSCORE', got {line!r}"
            raise InputError(message, path=path, line=lineno) from None
        if end < start or (words and start < words[-1].start):
            raise InputError(f"word times out of order: {line!r}", path=path, line=lineno)
        words.append(Word(word, start, end))
    return Transcript(text, tuple(words))


@dataclass(frozen=True)
class Piece:
    suffix: str  # "" for a whole clip, "_<k>" for a piece of a cut pretrain clip
    text: str
    start: float  # seconds
    end: float | None  # None: to the end of the clip


def pretrain_pieces(
    transcript: Transcript, max_seconds: float = 15.0, min_pause: float = 0.4
) -> list[Piece]:
    """AV-HuBERT's cut of a pretrain clip (see the module doc)."""
    words = transcript.words
    if not words or words[-1].end < max_seconds:
        return [Piece("", transcript.text, 0.0, None)]
    groups: list[list[Word]] = [[words[0]]]
    for word in words[1:]:
        if word.start - groups[-1][-1].end > min_pause:
            groups.append([word])
        else:
            groups[-1].append(word)
    pieces = []
    for k, group in enumerate(groups):
        start = 0.0 if k == 0 else (groups[k - 1][-1].end + group[0].start) / 2
        end = None if k == len(groups) - 1 else (group[-1].end + groups[k + 1][0].start) / 2
        pieces.append(Piece(f"_{k}", " ".join(w.word for w in group), start, end))
    return pieces


def centre_crop(frames: np.ndarray, size: int = ROI_SIZE) -> np.ndarray:
    """The centre ``size`` x ``size`` of (T, H, W) frames (AV-HuBERT's test-time crop)."""
    height, width = frames.shape[1:]
    if height < size or width < size:
        raise ValueError(f"ROI frames of {height}x{width} are smaller than {size}x{size}")
    top, left = (height - size) // 2, (width - size) // 2
    return frames[:, top : top + size, left : left + size]


@dataclass(frozen=True)
class Clip:
    """One released clip and where its ROI frames come from: one landmark file or ROI video for the
    whole clip, or (``pieces``) one per pretrain piece, in the order of ``pretrain_pieces``."""

    part: str
    video_id: str
    name: str  # "00001"
    txt: Path
    mp4: Path
    landmarks: Path | None
    roi: Path | None
    pieces: tuple[Path, ...] = ()  # per-piece landmark files, or ROI videos (pieces_are_roi)
    pieces_are_roi: bool = False

    @property
    def utt_id(self) -> str:
        return f"{self.video_id}-{self.name}"


@dataclass(frozen=True)
class Options:
    video_dir: Path
    mean_face: np.ndarray | None
    fps_policy: str
    lowercase: bool
    pretrain_max_seconds: float
    pretrain_min_pause: float
    roi_size: int = ROI_SIZE


def _roi_video(path: Path, options: Options) -> np.ndarray:
    try:
        return centre_crop(read_video(path, options.fps_policy), options.roi_size)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot use the ROI video: {e}", path=path) from None


def _cropped(mp4: Path, frames, times, rate, landmark_file: Path, options: Options) -> np.ndarray:
    try:
        landmarks = mouth_roi.load_landmarks(landmark_file)
        rois = mouth_roi.mouth_rois(frames, landmarks, options.mean_face, options.roi_size)
    except (OSError, ValueError) as e:
        raise InputError(f"no mouth ROIs for '{mp4}': {e}", path=landmark_file) from None
    try:
        return conform_fps(rois, times, rate, options.fps_policy)
    except ValueError as e:
        raise InputError(str(e), path=mp4) from None


def _decoded(clip: Clip, options: Options):
    try:
        frames, times, rate = decode(clip.mp4)
        needs_resampling(rate, options.fps_policy)  # refused before any cropping work
    except (OSError, ValueError) as e:
        raise InputError(f"cannot use the video: {e}", path=clip.mp4) from None
    return frames, times, rate


def clip_rois(clip: Clip, options: Options) -> np.ndarray:
    """uint8 (T, S, S) (S = --roi_size) at 25 fps of one clip; InputError naming the file."""
    if clip.roi is not None:
        return _roi_video(clip.roi, options)
    return _cropped(clip.mp4, *_decoded(clip, options), clip.landmarks, options)


def piece_rois(clip: Clip, pieces: list[Piece], options: Options) -> list[np.ndarray]:
    """uint8 (T, S, S) at 25 fps of each piece of a clip whose files are per piece."""
    if clip.pieces_are_roi:
        return [_roi_video(path, options) for path in clip.pieces]
    frames, times, rate = _decoded(clip, options)
    out = []
    for piece, landmark_file in zip(pieces, clip.pieces, strict=True):
        span = piece_span(clip, piece, len(frames))
        out.append(_cropped(clip.mp4, frames[span], times[span], rate, landmark_file, options))
    return out


def piece_span(clip: Clip, piece: Piece, num_frames: int) -> slice:
    """The frames of one piece of a clip (AV-HuBERT's lrs3_prepare.py, trim_video_frame)."""
    first = int(piece.start * FPS)
    last = num_frames if piece.end is None else min(int(piece.end * FPS), num_frames)
    if last <= first:
        raise InputError(
            f"{piece.text!r} from {piece.start:.2f} s has no frames in the {num_frames}-frame video",
            path=clip.txt,
        )
    return slice(first, last)


def clip_pieces(clip: Clip, options: Options) -> list[Piece]:
    transcript = read_transcript(clip.txt)
    if clip.part != "pretrain":
        return [Piece("", transcript.text, 0.0, None)]
    return pretrain_pieces(transcript, options.pretrain_max_seconds, options.pretrain_min_pause)


def _num_frames(path: Path) -> int | None:
    """Frames of a finished crop file, from its header (memory-mapped: no frame is read); None when it is
    missing or unreadable (e.g. cut short by a crash), i.e. to be made again."""
    try:
        return len(np.load(path, mmap_mode="r", allow_pickle=False))
    except (OSError, ValueError, EOFError):  # EOFError: an empty file
        return None


def _save(path: Path, frames: np.ndarray) -> int:
    # Temp file + rename: a crop file that exists is finished, which is what resuming relies on.
    with atomic_write(path, "wb") as f:
        np.save(f, np.ascontiguousarray(frames), allow_pickle=False)
    return len(frames)


def prepare_clip(clip: Clip, options: Options, directory: Path) -> tuple[list[tuple], bool]:
    """The clip's (pieces') ROI ``.npy`` files in ``directory``, made unless all of them are there from
    an earlier run; returns ((utterance, npy path, text, frames) of each, whether they were made)."""
    pieces = clip_pieces(clip, options)
    paths = [directory / f"{clip.utt_id}{piece.suffix}.npy" for piece in pieces]
    frames = [_num_frames(path) for path in paths]
    made = None in frames
    if made:
        if clip.pieces:
            piece_frames = piece_rois(clip, pieces, options)
        else:
            rois = clip_rois(clip, options)
            piece_frames = [rois[piece_span(clip, piece, len(rois))] for piece in pieces]
        frames = [_save(path, rois) for path, rois in zip(paths, piece_frames, strict=True)]
    entries = [
        (clip.utt_id + piece.suffix, str(path),
         piece.text.lower() if options.lowercase else piece.text, count)
        for piece, path, count in zip(pieces, paths, frames, strict=True)
    ]  # fmt: skip
    return entries, made


def _source_file(source: Path, relative: Path, suffixes: Sequence[str]) -> Path | None:
    return next(
        (p for p in (source / relative.with_suffix(s) for s in suffixes) if p.is_file()), None
    )


def _piece_files(clip: Clip, source: Path, suffixes, options: Options) -> tuple[Path, ...]:
    """The per-piece files of a pretrain clip in AV-HuBERT's layout (module doc); InputError naming the
    first missing one."""
    files = []
    for piece in clip_pieces(clip, options):
        relative = Path(PIECES_DIR) / clip.video_id / f"{clip.name}{piece.suffix}"
        found = _source_file(source, relative, suffixes)
        if found is None:
            missing = source / relative.with_suffix(suffixes[0])
            raise InputError(f"no file for piece {piece.suffix or '(whole)'} of clip '{clip.txt}'",
                             path=missing)  # fmt: skip
        files.append(found)
    return tuple(files)


def find_clips(
    root: Path, part: str, landmarks: Path | None, roi: Path | None, options: Options | None = None
) -> list[Clip]:
    """Every clip of ``<root>/<part>``, sorted; a ``.mp4`` without ``.txt`` (or the reverse) is an error,
    and so is a clip without its landmark file or ROI video (pretrain: per clip, or with ``options``,
    per piece as AV-HuBERT's tools write them)."""
    part_dir = root / part
    if not part_dir.is_dir():
        raise InputError(f"no '{part}' directory in the LRS3 root", path=part_dir)
    clips = []
    stems = {p.with_suffix("") for p in part_dir.glob("*/*") if p.suffix in (".mp4", ".txt")}
    for stem in sorted(stems):
        for suffix in (".mp4", ".txt"):
            if not stem.with_suffix(suffix).is_file():
                raise InputError(
                    f"missing '{stem.name}{suffix}' next to its pair", path=stem.parent
                )
        video_id, name = stem.parent.name, stem.name
        relative = Path(part) / video_id / name
        source, suffixes = (roi, (".mp4", ".npy")) if roi is not None else (landmarks, (".pkl",))
        found = _source_file(source, relative, suffixes)
        clip = Clip(part, video_id, name, stem.with_suffix(".txt"), stem.with_suffix(".mp4"),
                    None if roi is not None else found, found if roi is not None else None)  # fmt: skip
        per_piece = options is not None and (source / PIECES_DIR / video_id).is_dir()
        if found is None and part == "pretrain" and per_piece:
            pieces = _piece_files(clip, source, suffixes, options)
            clip = replace(clip, pieces=pieces, pieces_are_roi=roi is not None)
        if found is None and not clip.pieces:
            what = "ROI video" if roi is not None else "landmark file"
            also = f" (nor per piece under {source / PIECES_DIR})" if part == "pretrain" else ""
            missing = source / relative.with_suffix(suffixes[0])
            raise InputError(f"no {what} for clip '{relative}'{also}", path=missing)
        clips.append(clip)
    if not clips:
        raise InputError("no clips (<video-id>/<nnnnn>.mp4 + .txt)", path=part_dir)
    return clips


def read_valid_ids(path: Path, clips: Sequence[Clip]) -> list[str]:
    """AV-HuBERT's dev list (module doc) as utterance ids, in its order; an ``InputError`` names the file and
    line of a malformed or repeated id and of one that is no clip of ``clips`` (the trainval part)."""
    known = {f"{c.part}/{c.video_id}/{c.name}": c.utt_id for c in clips}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the dev id list: {e}", path=path) from None
    ids: list[str] = []
    for number, line in enumerate(lines, start=1):
        fid = line.strip()
        if not fid:
            continue
        parts = fid.split("/")
        if len(parts) != 3 or not all(parts):
            raise InputError(f"'{fid}' is not <part>/<video-id>/<nnnnn>", path=path, line=number)
        if parts[0] != "trainval":
            raise InputError(f"'{fid}': dev ids are trainval clips", path=path, line=number)
        if fid not in known:
            raise InputError(
                f"'{fid}' is no clip of the LRS3 trainval part", path=path, line=number
            )
        if known[fid] in ids:
            raise InputError(f"'{fid}' is listed twice", path=path, line=number)
        ids.append(known[fid])
    if not ids:
        raise InputError("no ids in the dev id list", path=path)
    if len(ids) == len(clips):
        raise InputError("the dev id list takes every trainval clip, none is left for training",
                         path=path)  # fmt: skip
    return ids


CROPS_VERSION = 1  # part of every crop stamp: bump when the cropping itself changes
STAMP = "options.json"


def crop_stamp(part: str, options: Options, root: Path, landmarks, roi) -> dict:
    """What a part's crop files depend on besides the contents of their input files: the sources (paths,
    resolved), the mean face (its digest), --roi_size, --fps_policy and, for pretrain, the cut. Not
    --lowercase: text goes to the data dir's tables, never into a crop file."""
    stamp = {
        "version": CROPS_VERSION,
        "lrs3": str(Path(root).resolve()),
        "source": "roi" if roi is not None else "landmarks",
        "source_dir": str(Path(roi if roi is not None else landmarks).resolve()),
        "roi_size": options.roi_size,
        "fps_policy": options.fps_policy,
    }
    if options.mean_face is not None:
        face = np.ascontiguousarray(options.mean_face, dtype=np.float64)
        stamp["mean_face_sha256"] = hashlib.sha256(face.tobytes()).hexdigest()
    if part == "pretrain":
        stamp["pretrain_max_seconds"] = options.pretrain_max_seconds
        stamp["pretrain_min_pause"] = options.pretrain_min_pause
    return stamp


def crop_dir(part: str, options: Options, root: Path, landmarks, roi) -> Path:
    """``<video_dir>/<part>/<digest of crop_stamp>``, created with the stamp in its ``options.json``.

    Crops are reused only by a run whose stamp is the same. A run with other options gets a directory
    of its own rather than replacing or refusing the earlier crops: nothing is lost (data dirs and dumps
    made from those keep working, and going back to the earlier options finds them again), and nobody
    has to delete 300 GB by hand before a rerun; an earlier directory is named on stderr, to delete once
    it is no longer needed."""
    text = json.dumps(crop_stamp(part, options, root, landmarks, roi), indent=1, sort_keys=True)
    directory = options.video_dir / part / hashlib.sha256(text.encode()).hexdigest()[:12]
    stamp = directory / STAMP
    if not stamp.is_file():
        for other in sorted(options.video_dir.glob(f"{part}/*/{STAMP}")):
            print(f"note: {other.parent} holds {part} crops made with other options (its {STAMP}); "
                  "not used", file=sys.stderr)  # fmt: skip
        with atomic_write(stamp) as f:  # shard jobs may race here: all write the same text
            f.write(text + "\n")
    elif stamp.read_text(encoding="utf-8") != text + "\n":
        raise ConfigError(f"{stamp} is not what its directory is named after (edited?): move "
                          f"{directory} away")  # fmt: skip
    return directory


def _prepare_clip_job(job: tuple[Clip, Options, Path]):
    return prepare_clip(*job)


def crop_clips(
    clips: Sequence[Clip], options: Options, directory: Path, nj: int = 1
) -> list[tuple]:
    """``prepare_clip`` of every clip (in ``nj`` processes); the (utterance, path, text, frames) of all
    pieces. Says on stdout how many clips were made and how many reused."""
    jobs = [(clip, options, directory) for clip in clips]
    if nj > 1:
        with ProcessPoolExecutor(nj) as pool:
            results = list(pool.map(_prepare_clip_job, jobs, chunksize=8))
    else:
        results = [_prepare_clip_job(job) for job in jobs]
    cropped = sum(made for _, made in results)
    print(f"{directory}: {cropped} clips cropped, {len(results) - cropped} reused")
    return [entry for entries, _ in results for entry in entries]


def prepare_part(
    root: Path, part: str, out: Path, options: Options, landmarks, roi, nj=1, clips=None
) -> int:
    """Write the data dir ``<out>/<part>`` (of ``clips``, default: all found), cropping the clips not
    finished by an earlier run with the same options (``crop_dir``); returns its number of utterances."""
    clips = find_clips(root, part, landmarks, roi, options) if clips is None else clips
    directory = crop_dir(part, options, root, landmarks, roi)
    entries = crop_clips(clips, options, directory, nj)
    # Temp files (atomic_write's) of jobs killed mid-write: every clip is done now.
    for leftover in directory.glob(".*.tmp"):
        leftover.unlink(missing_ok=True)
    utt2spk = {utt: utt.rsplit("-", 1)[0] for utt, _, _, _ in entries}
    with atomic_dir(out / part) as building:
        write_kaldi_map(building / "video.scp", {utt: path for utt, path, _, _ in entries})
        write_kaldi_map(building / "text", {utt: text for utt, _, text, _ in entries})
        write_kaldi_map(building / "utt2spk", utt2spk)
        write_kaldi_map(building / "spk2utt", spk2utt_from_utt2spk(utt2spk))
        frames = {utt: str(count) for utt, _, _, count in entries}
        write_kaldi_map(building / "utt2num_frames", frames)
    return len(entries)


def shard_clips(found: dict[str, list[Clip]], shard: tuple[int, int]) -> dict[str, list[Clip]]:
    """Shard K of N: clips i (0-based, parts in ``PARTS`` order, each sorted) with i % N == K - 1. Every
    clip in exactly one shard; round robin, so each gets its share of the long pretrain clips."""
    k, n = shard
    ordered = [(part, clip) for part in PARTS if part in found for clip in found[part]]
    picked: dict[str, list[Clip]] = {part: [] for part in found}
    for i, (part, clip) in enumerate(ordered):
        if i % n == k - 1:
            picked[part].append(clip)
    return picked


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m espnet_ext.data.lrs3",
        description=__doc__.split("\n\n")[0],
        epilog="See the module documentation (espnet_ext/data/lrs3.py) for the expected inputs.",
    )
    parser.add_argument(
        "--lrs3", type=Path, required=True, help="LRS3 root (pretrain/ trainval/ test/)"
    )
    parser.add_argument("--out", type=Path, required=True, help="data root: one data dir per part")
    parser.add_argument(
        "--parts",
        default="trainval,test",
        help=f"comma-separated, of {','.join(PARTS)} (default: %(default)s)",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--landmarks", type=Path, help="<dir>/<part>/<video-id>/<nnnnn>.pkl landmark files"
    )
    source.add_argument(
        "--roi", type=Path, help="<dir>/<part>/<video-id>/<nnnnn>.mp4|.npy cropped ROIs"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--check_only",
        action="store_true",
        help="check every input (files, --valid_ids) and stop, writing nothing: before the crop jobs",
    )
    mode.add_argument(
        "--shard",
        metavar="K/N",
        help="crop only shard K of N of the clips (one job of N) and write no data dir: a run without "
        "--shard afterwards finds them done and writes the data dirs",
    )
    parser.add_argument(
        "--mean_face", type=Path, help="reference face (68x2 .npy); needed with --landmarks"
    )
    parser.add_argument(
        "--video_dir", type=Path, help="where ROI .npy files go (default: <out>/video)"
    )
    parser.add_argument(
        "--fps_policy",
        choices=FPS_POLICIES,
        default="refuse",
        help="videos not at 25 fps (default: %(default)s)",
    )
    parser.add_argument(
        "--lowercase", action="store_true", help="lower-case text, as AV-HuBERT's labels"
    )
    parser.add_argument(
        "--pretrain_max_seconds", type=float, default=15.0, help="(default: %(default)s)"
    )
    parser.add_argument(
        "--pretrain_min_pause", type=float, default=0.4, help="(default: %(default)s)"
    )
    parser.add_argument(
        "--nj",
        type=int,
        default=1,
        help="clips processed in parallel by this process' pool (default: %(default)s)",
    )
    parser.add_argument(
        "--roi_size",
        type=int,
        choices=(ROI_SIZE, mouth_roi.CROP_SIZE),
        default=ROI_SIZE,
        help="side of the stored mouth crops: the centre 88 or AV-HuBERT's whole 96, for training-time "
        "random crops (default: %(default)s)",
    )
    parser.add_argument(
        "--valid_ids",
        type=Path,
        help="AV-HuBERT's lrs3-valid.id: trainval clips held out as dev, written to "
        "<out>/trainval_valid_ids as utterance ids",
    )
    return parser


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    args = get_parser().parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        raise ConfigError(
            f"--parts: unknown {', '.join(unknown) or '(none)'}; choose from {', '.join(PARTS)}"
        )
    if args.nj < 1:
        raise ConfigError(f"--nj must be >= 1, got {args.nj}")
    mean_face = None
    if args.landmarks is not None:
        if args.mean_face is None:
            raise ConfigError("--landmarks needs --mean_face (the reference face, a 68x2 .npy)")
        try:
            mean_face = mouth_roi.load_mean_face(args.mean_face)
        except (OSError, ValueError) as e:
            raise InputError(str(e), path=args.mean_face) from None
    options = Options(
        video_dir=(args.video_dir or args.out / "video").absolute(),
        mean_face=mean_face,
        fps_policy=args.fps_policy,
        lowercase=args.lowercase,
        pretrain_max_seconds=args.pretrain_max_seconds,
        pretrain_min_pause=args.pretrain_min_pause,
        roi_size=args.roi_size,
    )
    shard = parse_shard(args.shard) if args.shard is not None else None
    # every part's files are checked before the first video is decoded
    found = {part: find_clips(args.lrs3, part, args.landmarks, args.roi, options) for part in parts}
    valid = None
    if args.valid_ids is not None:
        if "trainval" not in parts:
            raise ConfigError("--valid_ids lists trainval clips: add trainval to --parts")
        valid = read_valid_ids(args.valid_ids, found["trainval"])
    if args.check_only:
        print(
            ", ".join(f"{part}: {len(clips)} clips" for part, clips in found.items())
            + ": inputs ok"
        )
        return
    if shard is not None:
        for part, clips in shard_clips(found, shard).items():
            directory = crop_dir(part, options, args.lrs3, args.landmarks, args.roi)
            crop_clips(clips, options, directory, args.nj)
        return
    if valid is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "trainval_valid_ids").write_text("\n".join(valid) + "\n", encoding="utf-8")
    for part in parts:
        count = prepare_part(args.lrs3, part, args.out, options, args.landmarks, args.roi, args.nj,
                             clips=found[part])  # fmt: skip
        print(f"{args.out / part}: {count} utterances")


if __name__ == "__main__":
    sys.exit(main())
