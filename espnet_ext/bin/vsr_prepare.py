"""The video pipeline's check stage: decode every video of a data dir, copy the dir with ``utt2num_frames``.

    python -m espnet_ext.bin.vsr_prepare --data_dir data/test --out_dir dump/video/test
    # the same over jobs (asr.sh stage 2): each job counts its share, then the parts are merged
    python -m espnet_ext.bin.vsr_prepare --data_dir data/x --key_file keys.JOB.scp --part_out frames.JOB
    python -m espnet_ext.bin.vsr_prepare --data_dir data/x --out_dir dump/video/x --parts frames.1 frames.2 ...

Every ``video.scp`` entry is checked the way training reads it (``espnet_ext.data.types``), so a corrupt
or empty video fails here, naming the scp line, not hours into training: a ``.npy`` of frames by its
header and length (memory-mapped, not read: ``video.frame_count``), any other video decoded. The copy gets
``utt2num_frames`` (frames per video), which the length filter and batching use. A job of a split run
reads the whole ``video.scp`` too, so its errors name the line of ``video.scp``, not of its key file; its
part (``<key> <frames>`` lines) is written whole or not at all. The output directory appears only when
every video decoded: a merge needs every key of ``video.scp`` counted by exactly one part.

A part is reusable: its first line is a signature of what it counted (the job's keys, each with its video's
path, size and modification time in ns), and a job whose ``--part_out`` holds the signature of its keys
exits without decoding a video. A rerun after a failure (VoxCeleb2-en's ~1M clips take hours over many
jobs; one killed at its time limit) counts only the parts that are missing or whose videos changed; a part
of another split (``--nj``) has other keys, so it is counted again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

from espnet_ext.data.datadir import atomic_dir, table_files, table_line, write_kaldi_map
from espnet_ext.data.types import VideoScpReader
from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.fileio import atomic_write, read_utf8_lines

# A part's first line: this prefix and the signature. It has more than two fields, so no '<key> <frames>'
# line reads as one. The version changes with what a count means (a part of older code is counted again).
PART_HEADER = "# vsr_prepare part v1"


def job_keys(reader: VideoScpReader, key_file: Path | None) -> list[str]:
    """The keys of ``key_file`` (its first column: a split of ``video.scp``), else every key of ``reader``."""
    if key_file is None:
        return list(reader)
    keys = []
    for number, line in read_utf8_lines(key_file):
        if not line.strip():
            continue
        key = line.split(maxsplit=1)[0]
        if key not in reader:
            raise InputError(f"not in {reader.scp}", path=key_file, line=number, key=key)
        keys.append(key)
    return keys


def count_frames(data_dir: Path, key_file: Path | None = None) -> dict[str, str]:
    """``key -> frames`` (as text) of the videos of ``data_dir/video.scp``, or of those ``key_file`` lists
    (its first column: a split of ``video.scp``); an undecodable video raises naming its ``video.scp`` line."""
    reader = VideoScpReader(data_dir / "video.scp")
    return {key: str(reader.frames(key)) for key in job_keys(reader, key_file)}


def part_signature(reader: VideoScpReader, keys: list[str]) -> str:
    """What a part of ``keys`` counts: the keys in order, each with its video's path, size and modification
    time (ns), so a video replaced at the same path is another signature. Stat-ed before counting: a video
    changed while it is counted leaves a signature that no longer matches."""
    digest = hashlib.sha256()
    for key in keys:
        path = reader.path(key)
        try:
            stat = os.stat(path)
            size, mtime = stat.st_size, stat.st_mtime_ns
        except OSError:  # counting it fails, naming its video.scp line
            size = mtime = None
        digest.update(json.dumps([key, path, size, mtime]).encode() + b"\n")
    return digest.hexdigest()


def part_header_signature(part: Path) -> str | None:
    """The signature in ``part``'s first line; None without a part or a header (a part of older code)."""
    try:
        with open(part, "rb") as f:
            first = f.readline(len(PART_HEADER) + 100).decode("utf-8").rstrip("\n")
    except (OSError, UnicodeDecodeError):
        return None
    prefix, _, signature = first.rpartition(" ")
    return signature if prefix == PART_HEADER else None


def count_part(data_dir: Path, key_file: Path, part_out: Path) -> str:
    """One job of a split count: the frames of ``key_file``'s videos into ``part_out`` (header, then
    ``<key> <frames>`` lines), unless ``part_out`` already holds their signature; returns a log line."""
    reader = VideoScpReader(data_dir / "video.scp")
    keys = job_keys(reader, key_file)
    signature = part_signature(reader, keys)
    if part_header_signature(part_out) == signature:
        return f"{part_out}: {len(keys)} videos counted before (same keys, paths, sizes and times): kept"
    frames = {key: str(reader.frames(key)) for key in keys}
    with atomic_write(part_out) as f:
        f.write(f"{PART_HEADER} {signature}\n")
        for key in sorted(frames):
            f.write(table_line(part_out, key, frames[key]))
    return f"{part_out}: {len(frames)} videos decode"


def merged_parts(data_dir: Path, parts: list[Path]) -> dict[str, str]:
    """The frame counts of ``parts`` (``<key> <frames>`` files of ``count_frames``) as one table, refused
    unless every key of ``data_dir/video.scp`` is in exactly one part and no part holds another key."""
    scp = data_dir / "video.scp"
    scp_lines = {}  # key -> its line (the count jobs checked the scp's format)
    for number, line in read_utf8_lines(scp):
        if line.strip():
            scp_lines.setdefault(line.split(maxsplit=1)[0], number)
    frames: dict[str, str] = {}
    seen: dict[str, tuple[Path, int]] = {}
    for part in parts:
        for number, line in read_utf8_lines(part):
            if number == 1 and line.startswith(PART_HEADER + " "):
                continue
            fields = line.split()
            if len(fields) != 2 or not fields[1].isdigit():
                raise InputError(f"expected '<key> <frames>', got {line!r}", path=part, line=number)
            key = fields[0]
            if key not in scp_lines:
                raise InputError(f"not in {scp}", path=part, line=number, key=key)
            if key in seen:
                first = "{}:{}".format(*seen[key])
                raise InputError(
                    f"counted twice (first in {first})", path=part, line=number, key=key
                )
            seen[key] = (part, number)
            frames[key] = fields[1]
    missing = [key for key in scp_lines if key not in frames]
    if missing:
        raise InputError(
            f"counted by no part ({len(missing)} keys of {len(scp_lines)} missing)",
            path=scp,
            line=scp_lines[missing[0]],
            key=missing[0],
        )
    return frames


def prepare(data_dir: Path, out_dir: Path, parts: list[Path] | None = None) -> int:
    """Copy ``data_dir`` to ``out_dir`` with ``utt2num_frames``, counted here or merged from ``parts``;
    returns the number of videos."""
    frames = count_frames(data_dir) if parts is None else merged_parts(data_dir, parts)
    with atomic_dir(out_dir) as tmp:
        for table in table_files(data_dir):
            shutil.copy(table, tmp / table.name)
        write_kaldi_map(tmp / "utt2num_frames", frames)
    return len(frames)


@reports_input_errors
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data_dir", type=Path, required=True)
    parser.add_argument("--out_dir", type=Path, help="the checked copy (not with --part_out)")
    parser.add_argument(
        "--key_file", type=Path, help="count only these keys (a job's split of video.scp)"
    )
    parser.add_argument(
        "--part_out", type=Path, help="with --key_file: their frame counts, to --parts"
    )
    parser.add_argument("--parts", type=Path, nargs="+", help="merge these counts into --out_dir")
    args = parser.parse_args(argv)
    if (args.key_file is None) != (args.part_out is None) or (args.part_out is None) == (
        args.out_dir is None
    ):
        parser.error("give --out_dir [--parts ...], or --key_file with --part_out")
    if args.part_out is not None:
        print(count_part(args.data_dir, args.key_file, args.part_out))
        return
    count = prepare(args.data_dir, args.out_dir, args.parts)
    print(f"{args.out_dir}: {count} videos decode")


if __name__ == "__main__":
    sys.exit(main())
