"""The "additional data" LM text of the numbers-world recipes (the relaxed-attention paper's extended LM).

Number words of the corpus' own range and of a wider one, minus every sentence of the held-out sets, so the
LM never saw a dev/test target; with a digit domain (``corpus.DIGIT_DOMAINS``, e.g. ``repeated_tens``) only
that domain's numbers, so the LM knows a regularity of an in-domain test set::

    python -m espnet_ext.data.numbers.lm_text --out data/lm_extended/text --seed 1 \\
        --narrow 0:9999=10000 --wide 10000:99999=10000 --exclude data/dev/text data/test/text

Lines are ``narrow_<id> <words>`` then ``wide_<id> <words>`` (ids as the corpus generator writes them).
A part asks for at most its size: a range (or domain) holding fewer numbers gives all of them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from espnet_ext.data.datadir import read_kaldi_entries
from espnet_ext.data.numbers.corpus import CorpusSpec, inclusive_range, plan_corpus, resolve_domain
from espnet_ext.data.numbers.words import LANGUAGES, number_to_words
from espnet_ext.errors import reports_input_errors
from espnet_ext.fileio import atomic_write


def part_lines(
    name: str, num_range: tuple[int, int], size: int, seed: int, lang: str, domain_digits: str
) -> list[str]:
    """``<name>_<id> <words>`` of at most ``size`` numbers of ``num_range`` (in the domain, if given)."""
    lo, hi = num_range
    domain = dict(domain_digits=domain_digits, domain_splits=("lm",) if domain_digits else ())
    probe = CorpusSpec(splits=(("lm", 1),), num_range=num_range, **domain)
    available = hi - lo + 1
    if domain_digits:
        available = int(probe.in_domain(np.arange(lo, hi + 1)).sum())
    spec = CorpusSpec(
        splits=(("lm", min(size, available)),), num_range=num_range, seed=seed, **domain
    )
    return [f"{name}_{u.utt_id} {number_to_words(u.number, lang)}" for u in plan_corpus(spec)["lm"]]


def _part(text: str) -> tuple[tuple[int, int], int]:
    try:
        span, size = text.split("=")
        return inclusive_range(span), int(size)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected lo:hi=size, got '{text}'") from None


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m espnet_ext.data.numbers.lm_text", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", type=Path, required=True, help="the Kaldi text file to write")
    parser.add_argument("--lang", default="en", choices=LANGUAGES)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--narrow", type=_part, required=True, help="lo:hi=size, the corpus' range")
    parser.add_argument("--wide", type=_part, required=True, help="lo:hi=size, a wider range")
    parser.add_argument(
        "--domain_digits",
        default="",
        help="only numbers of this digit domain (see the corpus generator)",
    )
    parser.add_argument(
        "--exclude",
        type=Path,
        nargs="*",
        default=[],
        help="Kaldi text files whose sentences are left out",
    )
    return parser


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    args = get_parser().parse_args(argv)
    domain = resolve_domain(args.domain_digits)
    held_out = {e.value for path in args.exclude for e in read_kaldi_entries(path, what="sentence")}
    lines = []
    for name, (num_range, size) in (("narrow", args.narrow), ("wide", args.wide)):
        lines += part_lines(name, num_range, size, args.seed, args.lang, domain)
    kept = [line for line in lines if line.split(" ", 1)[1] not in held_out]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(args.out) as f:
        f.writelines(line + "\n" for line in kept)
    print(f"{args.out}: {len(kept)} sentences ({len(lines) - len(kept)} held-out ones left out)")


if __name__ == "__main__":
    sys.exit(main())
