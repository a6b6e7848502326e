"""LMDB datasets in the deep-text-recognition-benchmark layout (image-<n>/label-<n>/num-samples), built in tests."""

import io
from collections.abc import Iterable
from pathlib import Path

import lmdb
import numpy as np
from PIL import Image, ImageDraw


def png(width: int = 20, value: int = 128) -> bytes:
    """A flat colour PNG."""
    buffer = io.BytesIO()
    Image.fromarray(np.full((8, width, 3), value, np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def word_image(word: str) -> bytes:
    """A colour JPEG crop of ``word`` in Pillow's built-in font, the shape of a scene-text word crop."""
    image = Image.new("RGB", (8 + 7 * len(word), 24), (200, 190, 170))
    ImageDraw.Draw(image).text((4, 6), word, fill=(30, 30, 60))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG")
    return buffer.getvalue()


def build_lmdb(path: Path, samples: Iterable[tuple[bytes, str]]) -> Path:
    """Write (image bytes, label) samples as an LMDB at ``path`` (keys numbered from 1, as the benchmark's)."""
    path.mkdir(parents=True, exist_ok=True)
    env = lmdb.open(str(path), map_size=1 << 24)
    count = 0
    with env.begin(write=True) as txn:
        for count, (image, label) in enumerate(samples, start=1):
            txn.put(f"image-{count:09d}".encode(), image)
            txn.put(f"label-{count:09d}".encode(), label.encode())
        txn.put(b"num-samples", str(count).encode())
    env.close()
    return path
