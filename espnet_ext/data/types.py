"""ESPnet2 data types for images and videos: ``--*_data_path_and_name_and_type <scp>,<name>,image|video``.

ESPnet2 reads every data file through ``espnet2.train.dataset.DATA_TYPES`` (type name -> loader of a
``key value`` file). It has no image or video type; ``MediaDataset``, the dataset of our tasks
(``espnet_ext.tasks.abs_ext_task``), reads ours and hands every other type to ESPnet. An scp line is
``<key> <path>``; a value is decoded when the key is read, and anything that cannot be decoded raises
``InputError`` naming the scp file, its line, the key and the media path.

- ``image``: PNG/JPEG/... via Pillow -> float32 ``(H, W)`` for grey, ``(H, W, C)`` otherwise,
  in [0, 1].
- ``video``: ``.npy`` of uint8 frames ``(T, H, W)`` / ``(T, H, W, 1|3)``, or any 25 fps file FFmpeg
  decodes through PyAV (``.mp4``, ``.avi``) -> float32 grey ``(T, H, W)`` in [0, 1]
  (``espnet_ext.data.video``).
"""

from __future__ import annotations

import argparse
import collections.abc
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.fileio import read_utf8_lines


def decode_image(path: str) -> np.ndarray:
    """Decode one image file to float32 in [0, 1]; raises ``ValueError``/``OSError`` when it cannot."""
    from PIL import Image

    with Image.open(path) as img:
        img.load()
        if img.mode == "P":  # palette: expand to the colours it stands for
            img = img.convert("RGBA" if "transparency" in img.info else "RGB")
        elif img.mode == "1":
            img = img.convert("L")
        elif img.mode not in ("L", "LA", "RGB", "RGBA") and not img.mode.startswith("I"):
            img = img.convert("RGB")  # CMYK, YCbCr, ... as RGB
        array = np.asarray(img)
    if array.dtype == np.uint8:
        scale = 255.0
    elif img.mode.startswith("I"):  # 16-bit PNG (mode I;16 or I)
        scale = 65535.0
    else:
        raise ValueError(f"unsupported pixel format {img.mode} ({array.dtype})")
    return array.astype(np.float32) / scale


def decode_video(path: str) -> np.ndarray:
    """Decode one video (``.npy`` of uint8 frames, or a file PyAV decodes) to float32 grey (T, H, W) in
    [0, 1] at 25 fps; another frame rate is refused (``espnet_ext.data.video``: data prepared by our
    readers is 25 fps)."""
    from espnet_ext.data.video import read_video

    return read_video(path).astype(np.float32) / 255.0


class MediaScpReader(collections.abc.Mapping):
    """``key -> decoded array`` for an scp of ``<key> <path>`` lines; decodes lazily, on access."""

    kind = "media"

    def __init__(self, scp: str | Path, decode: Callable[[str], np.ndarray]):
        self.scp = str(scp)
        self.decode = decode
        self.entries: dict[str, tuple[int, str]] = {}  # key -> (line number, media path)
        for lineno, line in read_utf8_lines(self.scp):
            if not line.strip():
                continue
            fields = line.split(maxsplit=1)
            if len(fields) != 2:
                raise InputError(
                    f"expected '<key> <path>', got {line!r}", path=self.scp, line=lineno
                )
            key, media = fields[0], fields[1].strip()
            if key in self.entries:
                first = self.entries[key][0]
                raise InputError(
                    f"duplicate key (first on line {first})", path=self.scp, line=lineno, key=key
                )
            self.entries[key] = (lineno, media)
        if not self.entries:
            raise InputError(f"no entries in this {self.kind} scp", path=self.scp)

    def __getitem__(self, key: str) -> np.ndarray:
        return self.checked(key, self.decode)

    def checked(self, key: str, read: Callable[[str], object]):
        """``read`` of ``key``'s file, its failure an ``InputError`` naming the scp, line, key and file."""
        lineno, media = self.entries[key]
        try:
            return read(media)
        except (
            OSError,
            ValueError,
            SyntaxError,
            EOFError,
        ) as e:  # what Pillow, numpy, PyAV raise on bad files
            raise InputError(
                f"cannot decode {self.kind} '{media}': {e}", path=self.scp, line=lineno, key=key
            ) from e

    def path(self, key: str) -> str:
        return self.entries[key][1]

    def __contains__(self, key) -> bool:  # Mapping's default would decode the file to answer
        return key in self.entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


class ImageScpReader(MediaScpReader):
    kind = "image"

    def __init__(self, scp: str | Path):
        super().__init__(scp, decode_image)


class VideoScpReader(MediaScpReader):
    kind = "video"

    def __init__(self, scp: str | Path):
        super().__init__(scp, decode_video)

    def frames(self, key: str) -> int:
        """How many frames ``self[key]`` has, checked as decoding checks it (``video.frame_count``)."""
        from espnet_ext.data.video import frame_count

        return self.checked(key, frame_count)


DATA_TYPES = {
    "image": dict(
        func=ImageScpReader,
        kwargs=[],
        help="Image files (PNG, JPEG, ...): float32 (H, W) grey or (H, W, C), values in [0, 1]."
        "\n\n   utterance_id_a a.png\n   utterance_id_b b.jpg\n   ...",
    ),
    "video": dict(
        func=VideoScpReader,
        kwargs=[],
        help="Videos (25 fps .mp4/.avi read with PyAV, or .npy of uint8 frames): float32 grey "
        "(T, H, W) in [0, 1]."
        "\n\n   utterance_id_a a.mp4\n   utterance_id_b b.npy\n   ...",
    ),
}


def check_scp(scp, kind: str) -> int:
    """Decode every entry of an image/video scp (what a pipeline's data stage runs); returns the count.
    The first file that cannot be decoded raises ``InputError`` naming the scp, line, key and file."""
    reader = DATA_TYPES[kind]["func"](scp)
    for key in reader:
        reader[key]
    return len(reader)


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="decode every entry of an image or video scp")
    parser.add_argument("kind", choices=sorted(DATA_TYPES))
    parser.add_argument("scp")
    args = parser.parse_args(argv)
    print(f"{args.scp}: {check_scp(args.scp, args.kind)} {args.kind}s decode")


if __name__ == "__main__":
    sys.exit(main())
