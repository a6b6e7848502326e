"""Character noise on a Kaldi text file: the MT analogue of noisy audio (source-side uncertainty).

Each character of a sentence other than a space is replaced, with probability ``prob``, by a character
drawn uniformly from the file's own alphabet (its non-space characters): "dreihundertdreißig" may become
"dreihuxdertdreißig", so a translation model must guess some source words and an LM on the target side has
something to settle. The draw of an utterance depends only on the seed and its id, so a sentence gets the
same noise whatever else the file holds::

    python -m espnet_ext.data.text_noise --prob 0.15 --seed 0 data/train/text.de data/train/text.de.noisy
"""

from __future__ import annotations

import argparse
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from espnet_ext.data.datadir import read_kaldi_entries
from espnet_ext.errors import ConfigError, reports_input_errors
from espnet_ext.fileio import atomic_write


def corrupt(sentence: str, prob: float, alphabet: Sequence[str], rng: np.random.Generator) -> str:
    """``sentence`` with each non-space character replaced by one of ``alphabet`` with probability ``prob``."""
    chars = list(sentence)
    hits = rng.random(len(chars)) < prob
    draws = rng.integers(len(alphabet), size=len(chars))
    return "".join(alphabet[d] if hit and c != " " else c for c, hit, d in zip(chars, hits, draws))


def utterance_rng(seed: int, utt_id: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(utt_id.encode("utf-8"))])


def add_noise(src: Path, dst: Path, prob: float, seed: int) -> int:
    """Write ``src`` with character noise to ``dst`` (whole or not at all); the number of sentences."""
    if not 0.0 <= prob <= 1.0:
        raise ConfigError(f"--prob must be in [0, 1], got {prob}")
    entries = read_kaldi_entries(src, what="sentence")
    alphabet = sorted({c for e in entries for c in e.value if c != " "})
    with atomic_write(dst) as f:
        for e in entries:
            f.write(f"{e.key} {corrupt(e.value, prob, alphabet, utterance_rng(seed, e.key))}\n")
    return len(entries)


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m espnet_ext.data.text_noise", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--prob", type=float, required=True, help="per-character replacement probability"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("src", type=Path, help="Kaldi text file")
    parser.add_argument("dst", type=Path, help="where the noisy copy goes (may be src)")
    return parser


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    args = get_parser().parse_args(argv)
    count = add_noise(args.src, args.dst, args.prob, args.seed)
    print(f"{args.dst}: {count} sentences, characters replaced with probability {args.prob}")


if __name__ == "__main__":
    sys.exit(main())
