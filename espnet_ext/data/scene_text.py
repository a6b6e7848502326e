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

``--shard K/N`` converts the K-th of N contiguous ranges of the usable samples into ``--out`` with the ids the
whole conversion gives them, so that the N shard dirs combined (``python -m espnet_ext.data.datadir
combine``) equal it: N backend jobs decode a large set in parallel (local/data.sh of egs/mnist_seq/ocr1).
"""

from __future__ import annotations

import argparse
import io
import itertools
import string
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from espnet_ext.argv import parse_shard
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
    start: int = 1,
    stop: int | None = None,
) -> Iterator[tuple[str, np.ndarray | None, str]]:
    """(key, grey uint8 image (H, W), normalised label) of every usable sample, in index order; unusable
    ones are counted in ``skipped`` per reason and, with ``keep_unusable``, yielded with a reference the
    recogniser cannot produce. ``images=False`` reads the labels only (the image is None): a cheap pass
    that counts the samples, which does not check the images. ``start``, ``stop``: only the samples of
    database indices start..stop-1 (1-based; default all). Memory does not grow with the samples."""
    from PIL import Image

    path = Path(path)
    if not (path / "data.mdb").exists():
        raise InputError("not an LMDB directory (no data.mdb)", path=path)
    skipped = skipped if skipped is not None else Counter()
    with _open_lmdb(path) as env, env.begin() as txn:
        count = txn.get(b"num-samples")
    if count is None:
        raise InputError("no 'num-samples' key", path=path)
    stop = int(count) + 1 if stop is None else stop
    # The database is opened afresh for every LMDB_CHUNK samples: the pages of its memory map that were
    # read stay in the process' resident memory (what a job scheduler's memory limit counts) while it is open.
    for first in range(start, stop, LMDB_CHUNK):
        with _open_lmdb(path) as env, env.begin() as txn:
            for index in range(first, min(first + LMDB_CHUNK, stop)):
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


def shard_samples(count: int, shard: tuple[int, int]) -> range:
    """The usable samples (0-based) of shard K of N: the K-th of N contiguous ranges, sizes differing by
    at most one, so that each shard's tables are sorted and the shards in order are the whole set."""
    k, n = shard
    return range((k - 1) * count // n, k * count // n)


def _database_index(path, max_length: int, keep: bool, per_chunk: Counter, sample: int) -> int:
    """The database index of usable sample ``sample`` (0-based), from the usable samples counted per
    LMDB_CHUNK indices (``per_chunk``): only its chunk's labels are read again."""
    for chunk in sorted(per_chunk):
        if sample < per_chunk[chunk]:
            start = chunk * LMDB_CHUNK + 1
            labels = read_lmdb(path, max_length, None, keep, images=False, start=start)
            return int(next(itertools.islice(labels, sample, None))[0])
        sample -= per_chunk[chunk]
    raise IndexError("past the last usable sample")


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
    parser.add_argument(
        "--shard",
        default=None,
        help="K/N: only the K-th of N ranges of the usable samples, with the whole set's ids",
    )
    args = parser.parse_args(argv)
    shard = parse_shard(args.shard) if args.shard is not None else None
    keep = args.unusable == "error"
    # A pass over the labels first: the id width needs the number of samples (a shard, where its samples
    # are), and then every image is written as it is decoded (MJSynth's 7.2M decoded images would take
    # ~31 GB held in memory).
    skipped: Counter = Counter()
    labels = read_lmdb(args.lmdb, args.max_length, skipped, keep, images=False)
    per_chunk = Counter((int(key) - 1) // LMDB_CHUNK for key, _, _ in labels)
    count = per_chunk.total()
    if not count:
        print(f"error: {args.lmdb}: no usable sample ({dict(skipped)})", file=sys.stderr)
        return 1
    wanted = range(count) if shard is None else shard_samples(count, shard)
    if not wanted:  # more shards than usable samples (a small set): the other shards hold them all
        print(
            f"{args.lmdb}: shard {args.shard} holds none of the {count} usable samples: no data dir",
            file=sys.stderr,
        )
        return 0

    # A shard reads from its first usable sample to the next shard's (the first from the database's
    # start, the last to its end): the shards' unusable samples add up to the whole set's.
    def index(sample: int) -> int:
        return _database_index(args.lmdb, args.max_length, keep, per_chunk, sample)

    start = index(wanted.start) if wanted.start else 1
    stop = index(wanted.stop) if wanted.stop < count else None
    skipped.clear()  # counted again as the images are read
    samples = (
        (image, label)
        for _, image, label in read_lmdb(
            args.lmdb, args.max_length, skipped, keep, start=start, stop=stop
        )
    )
    prefix = args.prefix or Path(args.lmdb).name
    write_image_dir(args.out, samples, prefix, len(wanted), first=wanted.start, total=count)
    what = "kept as errors" if keep else "skipped"
    part = f" (shard {args.shard} of {count})" if shard else ""
    print(
        f"{args.out}: {len(wanted)} images{part}; {sum(skipped.values())} unusable {what}: "
        f"{dict(skipped) or 'none'}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
