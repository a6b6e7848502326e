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
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

from espnet_ext.data.datadir import atomic_dir, table_files, write_kaldi_map
from espnet_ext.data.types import VideoScpReader
from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.fileio import read_utf8_lines


def count_frames(data_dir: Path, key_file: Path | None = None) -> dict[str, str]:
    """``key -> frames`` (as text) of the videos of ``data_dir/video.scp``, or of those ``key_file`` lists
    (its first column: a split of ``video.scp``); an undecodable video raises naming its ``video.scp`` line."""
    reader = VideoScpReader(data_dir / "video.scp")
    keys: Iterable[str] = reader
    if key_file is not None:
        keys = []
        for number, line in read_utf8_lines(key_file):
            if not line.strip():
                continue
            key = line.split(maxsplit=1)[0]
            if key not in reader:
                raise InputError(f"not in {reader.scp}", path=key_file, line=number, key=key)
            keys.append(key)
    return {key: str(reader.frames(key)) for key in keys}


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
        frames = count_frames(args.data_dir, args.key_file)
        write_kaldi_map(args.part_out, frames)
        print(f"{args.part_out}: {len(frames)} videos decode")
        return
    count = prepare(args.data_dir, args.out_dir, args.parts)
    print(f"{args.out_dir}: {count} videos decode")


if __name__ == "__main__":
    sys.exit(main())
