"""Corpus BLEU of a hypothesis Kaldi text file against its reference, with sacrebleu.

    utils/score_bleu.py --ref data/test/text.en --hyp exp/decode/text --out_dir D [--tokenize 13a] [--lowercase]

Prints and stores sacrebleu's signature (so a number can be reproduced), also sacrebleu's chrF (character
6-grams, beta 2; with its own signature) and the exact-match rate (share of hypotheses equal to their
reference after whitespace collapsing, and lowercasing with ``--lowercase``). chrF still measures where BLEU
cannot: a target of one word (a number, "dodici") has no 2-grams, so its BLEU is 0.
Writes ``result.json`` and ``result.txt``. ``--tokenize none`` scores pre-tokenized text as is
("tokenized BLEU" as some papers report it).

``--tokenized_bleu`` adds, next to the sacreBLEU score, BLEU as fairseq's IWSLT/WMT papers compute it
(fairseq's ``compound_split_bleu.sh`` + ``fairseq-score``, used by Shen et al.'s Cutoff recipe and so by
the relaxed-attention paper): both sides Moses-tokenized (``--moses_lang``; fairseq's data is tokenized
in preparation, ours is raw, so the hypotheses and references are tokenized here with sacremoses as
Moses' tokenizer.perl with its default escaping), compounds split (``Haus-Tür`` -> ``Haus ##AT##-##AT##
Tür``), then corpus BLEU on whitespace tokens without smoothing (multi-bleu.perl's definition).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence

from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.metrics.bleu import _TOKENIZERS

from espnet_ext.errors import ConfigError, reports_input_errors
from espnet_ext.scoring.ref_hyp import Pair, read_ref_hyp, ref_hyp_parser, write_result

# fairseq's scripts/compound_split_bleu.sh: perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g'
_COMPOUND = re.compile(r"(\S)-(\S)")


def compound_split(line: str) -> str:
    """fairseq's compound splitting; non-overlapping as perl's s///g ("a-b-c" -> "a ##AT##-##AT## b-c")."""
    return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", line)


def moses_tokenize(lines: Sequence[str], lang: str) -> list[str]:
    """Moses' tokenizer.perl -l LANG (escaping on, as fairseq's prepare-iwslt14.sh runs it)."""
    try:
        from sacremoses import MosesTokenizer
    except ImportError as e:
        raise ConfigError("--moses_lang needs sacremoses (tools/requirements.txt)") from e
    tokenizer = MosesTokenizer(lang=lang)
    return [tokenizer.tokenize(line, return_str=True, escape=True) for line in lines]


def tokenized_bleu(
    pairs: Sequence[Pair], moses_lang: str | None = None, lowercase: bool = False
) -> dict:
    """Compound-split BLEU on (Moses-)tokenized text, no smoothing: fairseq's compound_split_bleu."""
    hyps, refs = [p.hyp for p in pairs], [p.ref for p in pairs]
    if moses_lang:
        hyps, refs = moses_tokenize(hyps, moses_lang), moses_tokenize(refs, moses_lang)
    bleu = BLEU(tokenize="none", smooth_method="none", lowercase=lowercase, force=True)
    score = bleu.corpus_score(
        [compound_split(h) for h in hyps], [[compound_split(r) for r in refs]]
    )
    how = f"Moses {moses_lang} + " if moses_lang else "pre-tokenized, "
    return {
        "tokenized_bleu": score.score,
        "tokenized_bleu_line": str(score),
        "tokenized_bleu_method": how + "compound split, no smoothing (fairseq compound_split_bleu)",
    }


def score_bleu(pairs: Sequence[Pair], tokenize: str = "13a", lowercase: bool = False) -> dict:
    """Corpus BLEU, its signature and statistics, and the exact-match rate (percent)."""
    if tokenize not in _TOKENIZERS:
        raise ConfigError(f"--tokenize must be one of {', '.join(_TOKENIZERS)}, got {tokenize!r}")
    try:
        bleu = BLEU(tokenize=tokenize, lowercase=lowercase)
    except Exception as e:  # e.g. ja-mecab without its optional dependency
        raise ConfigError(f"sacrebleu cannot use --tokenize {tokenize}: {e}") from e
    hyps, refs = [p.hyp for p in pairs], [[p.ref for p in pairs]]
    score = bleu.corpus_score(hyps, refs)
    chrf = CHRF(lowercase=lowercase)
    chrf_score = chrf.corpus_score(hyps, refs)
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
        "chrf": chrf_score.score,
        "chrf_signature": str(chrf.get_signature()),
    }


def format_report(result: dict) -> str:
    report = (
        f"REF: {result['ref']}\nHYP: {result['hyp']}\n"
        f"{result['score_line']}\n"
        f"signature: {result['signature']}\n"
        f"chrF2 = {result['chrf']:.2f} (signature: {result['chrf_signature']})\n"
        f"exact match: {result['exact_match']:.2f} % [ {result['exact_matches']} / {result['num_utts']} ]\n"
    )
    if "tokenized_bleu" in result:
        report += f"tokenized {result['tokenized_bleu_line']} ({result['tokenized_bleu_method']})\n"
    return report


def score_files(
    ref_path,
    hyp_path,
    out_dir,
    tokenize: str = "13a",
    lowercase: bool = False,
    with_tokenized: bool = False,
    moses_lang: str | None = None,
) -> dict:
    """Score, write ``out_dir/result.{txt,json}``; returns the json content."""
    pairs = read_ref_hyp(ref_path, hyp_path)
    result = score_bleu(pairs, tokenize, lowercase)
    if with_tokenized:
        result.update(tokenized_bleu(pairs, moses_lang, lowercase))
    result.update(metric="bleu", ref=str(ref_path), hyp=str(hyp_path))  # the report shows them
    write_result(out_dir, result, format_report(result))
    return result


def get_parser() -> argparse.ArgumentParser:
    parser = ref_hyp_parser("score_bleu.py", __doc__)
    parser.add_argument(
        "--tokenize", default="13a", choices=list(_TOKENIZERS), help="sacrebleu tokenizer"
    )
    parser.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU")
    parser.add_argument(
        "--tokenized_bleu",
        action="store_true",
        help="also BLEU as fairseq's compound_split_bleu.sh (tokenized, compound-split)",
    )
    parser.add_argument(
        "--moses_lang", default="", help="Moses-tokenize both sides first (e.g. en; empty: as is)"
    )
    return parser


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    args = get_parser().parse_args(argv)
    result = score_files(
        args.ref,
        args.hyp,
        args.out_dir,
        args.tokenize,
        args.lowercase,
        args.tokenized_bleu,
        args.moses_lang or None,
    )
    tokenized = (
        f" tokenized BLEU {result['tokenized_bleu']:.2f}" if "tokenized_bleu" in result else ""
    )
    print(
        f"BLEU {result['bleu']:.2f} {result['signature']}{tokenized} exact match "
        f"{result['exact_match']:.2f}% ({result['num_utts']} utts) -> {args.out_dir / 'result.txt'}"
    )


if __name__ == "__main__":
    sys.exit(main())
