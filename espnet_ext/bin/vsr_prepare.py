"""The video pipeline's check stage: decode every video of a data dir, copy the dir with ``utt2num_frames``.

    python -m espnet_ext.bin.vsr_prepare --data_dir data/test --out_dir dump/video/test

Every ``video.scp`` entry is checked the way training reads it (``espnet_ext.data.types``), so a corrupt
or empty video fails here, naming the scp line, not hours into training: a ``.npy`` of frames by its
header and length (memory-mapped, not read: ``video.frame_count``), any other video decoded. The copy gets
``utt2num_frames`` (frames per video), which the length filter and batching use. The output directory
appears only when every video decoded.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from espnet_ext.data.datadir import atomic_dir, table_files, write_kaldi_map
from espnet_ext.data.types import VideoScpReader
from espnet_ext.errors import reports_input_errors


def prepare(data_dir: Path, out_dir: Path) -> int:
    """Copy ``data_dir`` to ``out_dir`` with ``utt2num_frames``; returns the number of videos."""
    reader = VideoScpReader(data_dir / "video.scp")
    frames = {key: str(reader.frames(key)) for key in reader}
    with atomic_dir(out_dir) as tmp:
        for table in table_files(data_dir):
            shutil.copy(table, tmp / table.name)
        write_kaldi_map(tmp / "utt2num_frames", frames)
    return len(frames)


@reports_input_errors
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data_dir", type=Path, required=True)
    parser.add_argument("--out_dir", type=Path, required=True)
    args = parser.parse_args(argv)
    count = prepare(args.data_dir, args.out_dir)
    print(f"{args.out_dir}: {count} videos decode")


if __name__ == "__main__":
    sys.exit(main())
