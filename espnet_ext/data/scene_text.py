"""Scene-text recognition sets in the LMDB layout of deep-text-recognition-benchmark (Baek et al., 2019), the
one the sharp-attention paper's §4.2 data comes in: MJSynth / SynthText training sets and the IIIT5K, SVT, IC03,
IC13, IC15 and SVTP test sets. An LMDB holds ``num-samples`` and, for i = 1..n, ``image-%09d`` (encoded JPEG /
PNG bytes) and ``label-%09d`` (UTF-8).

Labels follow the paper's evaluation (as Shi et al., 2017): lower-cased, punctuation removed, 36-class alphabet
0-9a-z. A sample whose label still has other characters, is empty, or is longer than ``max_length`` (16) is
unusable; the counts per reason are printed. Training and validation sets skip it; test sets keep it as an
error (``--unusable error``): its reference is a label the recogniser cannot produce (the label itself, or
``UNREADABLE`` for an empty one), so the denominator stays the paper's (3,000 + 647 + 867 + 857 + 1,811 + 645
= 7,827 images). An image that cannot be decoded is an error naming the database and key.

    python -m espnet_ext.data.scene_text --lmdb /data/evaluation/IIIT5k_3000 --out data/test_iiit5k \
        --unusable error
"""

from __future__ import annotations

import argparse
import io
import string
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from espnet_ext.errors import InputError, reports_input_errors

ALPHABET = set(string.digits + string.ascii_lowercase)
MAX_LENGTH = 16
LMDB_CHUNK = 10_000  # samples read per opening of a database (see read_lmdb)
UNREADABLE = "\u2205"  # reference of an unusable test image with an empty label: never recognised
_DROP_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalise_label(label: str) -> str:
    return label.lower().translate(_DROP_PUNCTUATION).replace(" ", "")


def _open_lmdb(path: Path):
    import lmdb

    return lmdb.open(str(path), readonly=True, lock=False, readahead=False, meminit=False)


def read_lmdb(
    path,
    max_length: int = MAX_LENGTH,
    skipped: Counter | None = None,
    keep_unusable: bool = False,
    images: bool = True,
) -> Iterator[tuple[str, np.ndarray | None, str]]:
    """(key, grey uint8 image (H, W), normalised label) of every usable sample, in index order; unusable
    ones are counted in ``skipped`` per reason and, with ``keep_unusable``, yielded with a reference the
    recogniser cannot produce. ``images=False`` reads the labels only (the image is None): a cheap pass
    that counts the samples, which does not check the images. Memory does not grow with the samples."""
    from PIL import Image

    path = Path(path)
    if not (path / "data.mdb").exists():
        raise InputError("not an LMDB directory (no data.mdb)", path=path)
    skipped = skipped if skipped is not None else Counter()
    with _open_lmdb(path) as env, env.begin() as txn:
        count = txn.get(b"num-samples")
    if count is None:
        raise InputError("no 'num-samples' key", path=path)
    count = int(count)
    # The database is opened afresh for every LMDB_CHUNK samples: the pages of its memory map that were
    # read stay in the process' resident memory (what a job scheduler's memory limit counts) while it is open.
    for first in range(1, count + 1, LMDB_CHUNK):
        with _open_lmdb(path) as env, env.begin() as txn:
            for index in range(first, min(first + LMDB_CHUNK, count + 1)):
                label_key, image_key = f"label-{index:09d}", f"image-{index:09d}"
                raw_label = txn.get(label_key.encode())
                # a label pass leaves the images' pages (nearly all of the database) unread
                raw_image = txn.get(image_key.encode()) if images else b""
                if raw_label is None or raw_image is None:
                    raise InputError(
                        "missing image or label",
                        path=path,
                        key=label_key if raw_label is None else image_key,
                    )
                label = normalise_label(raw_label.decode("utf-8", errors="replace"))
                reason = (
                    "empty label"
                    if not label
                    else "longer than max_length"
                    if len(label) > max_length
                    else "characters outside 0-9a-z"
                    if not set(label) <= ALPHABET
                    else None
                )
                if reason:
                    skipped[reason] += 1
                    if not keep_unusable:
                        continue
                    label = label or UNREADABLE
                if not images:
                    yield f"{index:09d}", None, label
                    continue
                try:
                    with Image.open(io.BytesIO(raw_image)) as image:
                        grey = np.asarray(image.convert("L"))
                except (OSError, ValueError, SyntaxError) as e:
                    raise InputError(
                        f"cannot decode the image: {e}", path=path, key=image_key
                    ) from e
                yield f"{index:09d}", grey, label


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> int:
    from espnet_ext.data.mnist import write_image_dir

    parser = argparse.ArgumentParser(
        description="an LMDB scene-text set -> data dir (image.scp, text, images/)"
    )
    parser.add_argument("--lmdb", required=True, help="directory with data.mdb")
    parser.add_argument("--out", required=True)
    parser.add_argument("--max_length", type=int, default=MAX_LENGTH)
    parser.add_argument(
        "--unusable",
        choices=("skip", "error"),
        default="skip",
        help="unusable samples: left out (training) or kept as errors (test sets)",
    )
    parser.add_argument(
        "--prefix", default=None, help="utterance id prefix (default: the LMDB dir name)"
    )
    args = parser.parse_args(argv)
    keep = args.unusable == "error"
    # A pass over the labels first: the id width needs the number of samples, and then every image is
    # written as it is decoded (MJSynth's 7.2M decoded images would take ~31 GB held in memory).
    skipped: Counter = Counter()
    count = sum(1 for _ in read_lmdb(args.lmdb, args.max_length, skipped, keep, images=False))
    if not count:
        print(f"error: {args.lmdb}: no usable sample ({dict(skipped)})", file=sys.stderr)
        return 1
    skipped.clear()  # counted again as the images are read
    samples = (
        (image, label) for _, image, label in read_lmdb(args.lmdb, args.max_length, skipped, keep)
    )
    write_image_dir(args.out, samples, args.prefix or Path(args.lmdb).name, count)
    what = "kept as errors" if keep else "skipped"
    print(
        f"{args.out}: {count} images; {sum(skipped.values())} unusable {what}: "
        f"{dict(skipped) or 'none'}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
