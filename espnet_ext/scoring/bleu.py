"""Corpus BLEU of a hypothesis Kaldi text file against its reference, with sacrebleu.

    utils/score_bleu.py --ref data/test/text.en --hyp exp/decode/text --out_dir D [--tokenize 13a] [--lowercase]

Prints and stores sacrebleu's signature (so a number can be reproduced), also the exact-match rate (share
of hypotheses equal to their reference after whitespace collapsing, and lowercasing with ``--lowercase``).
Writes ``result.json`` and ``result.txt``. ``--tokenize none`` scores pre-tokenized text as is
("tokenized BLEU" as some papers report it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from sacrebleu.metrics import BLEU
from sacrebleu.metrics.bleu import _TOKENIZERS

from espnet_ext.errors import ConfigError, InputError
from espnet_ext.scoring.ref_hyp import Pair, read_ref_hyp, write_result


def score_bleu(pairs: Sequence[Pair], tokenize: str = "13a", lowercase: bool = False) -> dict:
    """Corpus BLEU, its signature and statistics, and the exact-match rate (percent)."""
    if tokenize not in _TOKENIZERS:
        raise ConfigError(f"--tokenize must be one of {', '.join(_TOKENIZERS)}, got {tokenize!r}")
    try:
        bleu = BLEU(tokenize=tokenize, lowercase=lowercase)
    except Exception as e:  # e.g. ja-mecab without its optional dependency
        raise ConfigError(f"sacrebleu cannot use --tokenize {tokenize}: {e}") from e
    score = bleu.corpus_score([p.hyp for p in pairs], [[p.ref for p in pairs]])
    fold = str.lower if lowercase else str
    exact = sum(fold(p.hyp) == fold(p.ref) for p in pairs)
    return {
        "num_utts": len(pairs),
        "bleu": score.score,
        "signature": str(bleu.get_signature()),
        "precisions": list(score.precisions),
        "bp": score.bp,
        "ratio": score.sys_len / score.ref_len if score.ref_len else 0.0,
        "sys_len": score.sys_len,
        "ref_len": score.ref_len,
        "exact_match": 100.0 * exact / len(pairs),
        "exact_matches": exact,
        "tokenize": tokenize,
        "lowercase": lowercase,
        "score_line": str(score),
    }


def format_report(result: dict) -> str:
    return (
        f"REF: {result['ref']}\nHYP: {result['hyp']}\n"
        f"{result['score_line']}\n"
        f"signature: {result['signature']}\n"
        f"exact match: {result['exact_match']:.2f} % [ {result['exact_matches']} / {result['num_utts']} ]\n"
    )


def score_files(
    ref_path, hyp_path, out_dir, tokenize: str = "13a", lowercase: bool = False
) -> dict:
    """Score, write ``out_dir/result.{txt,json}``; returns the json content."""
    result = score_bleu(read_ref_hyp(ref_path, hyp_path), tokenize, lowercase)
    result.update(metric="bleu", ref=str(ref_path), hyp=str(hyp_path))
    write_result(out_dir, result, format_report(result))
    return result


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="score_bleu.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--ref", type=Path, required=True, help="reference Kaldi text file")
    parser.add_argument(
        "--hyp", type=Path, required=True, help="hypothesis Kaldi text file, same ids"
    )
    parser.add_argument("--out_dir", type=Path, required=True)
    parser.add_argument(
        "--tokenize", default="13a", choices=list(_TOKENIZERS), help="sacrebleu tokenizer"
    )
    parser.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = get_parser().parse_args(argv)
    try:
        result = score_files(args.ref, args.hyp, args.out_dir, args.tokenize, args.lowercase)
    except InputError as e:
        sys.exit(f"score_bleu: error: {e}")
    print(
        f"BLEU {result['bleu']:.2f} {result['signature']} exact match {result['exact_match']:.2f}% "
        f"({result['num_utts']} utts) -> {args.out_dir / 'result.txt'}"
    )


if __name__ == "__main__":
    main()
