"""MNIST's idx release format, written for tests: a big-endian magic (2051 images, 2049 labels), the
dimensions, then the uint8 values; gzipped as the release ships it, or plain."""

import gzip
import struct
from pathlib import Path

import numpy as np

MAGIC = {3: 2051, 1: 2049}  # by the array's number of dimensions


def write_idx(path: Path, array, magic: int | None = None, compress: bool = False) -> None:
    array = np.asarray(array)
    magic = MAGIC[array.ndim] if magic is None else magic
    header = struct.pack(">I", magic) + struct.pack(f">{array.ndim}I", *array.shape)
    data = header + array.astype(np.uint8).tobytes()
    if compress:
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        Path(path).write_bytes(data)
