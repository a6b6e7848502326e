"""Word and character error rates of a hypothesis Kaldi text file against its reference, with jiwer.

    utils/score_wer.py --ref data/test/text --hyp exp/decode/text --out_dir exp/decode/score_wer

Writes ``result.json`` (rates in percent, error counts) and ``result.txt`` (summary in Kaldi's
``%WER`` style, then the aligned REF/HYP of every utterance with an error), and prints one summary
line. By default texts are compared as given (whitespace collapsed). CER counts spaces as characters,
like ESPnet's char-level scoring.

``--tokenizer 13a --lowercase --remove_punct`` scores as fairseq's ``--scoring wer --wer-tokenizer 13a
--wer-lowercase --wer-remove-punct`` (the head-selection authors' mTEDx evaluation, fairseq
examples/attention_head_selection/README.md; ``EvaluationTokenizer`` of fairseq/scoring/tokenizer.py):
sacrebleu's tokenizer on both sides, then tokens made only of Unicode punctuation (category P*) removed,
then lowercasing. The rates of the texts as given are kept beside them (``raw`` in result.json, ``%RAW``
in result.txt).
"""

from __future__ import annotations

import argparse
import sys
import unicodedata
from collections.abc import Sequence

import jiwer
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
from sacrebleu.tokenizers.tokenizer_intl import TokenizerV14International
from sacrebleu.tokenizers.tokenizer_none import NoneTokenizer

from espnet_ext.errors import reports_input_errors
from espnet_ext.scoring.ref_hyp import Pair, read_ref_hyp, ref_hyp_parser, write_scores

GAP = "***"
# sacrebleu tokenizers fairseq's --wer-tokenizer offers (sacrebleu's own names)
EVAL_TOKENIZERS = {"none": NoneTokenizer, "13a": Tokenizer13a, "intl": TokenizerV14International}


def evaluation_tokenize(
    text: str, tokenizer: str = "none", lowercase: bool = False, remove_punct: bool = False
) -> str:
    """fairseq's ``EvaluationTokenizer.tokenize``: sacrebleu ``tokenizer``, punctuation-only tokens
    removed, lowercased, in that order."""
    text = EVAL_TOKENIZERS[tokenizer]()(text)
    if remove_punct:
        text = " ".join(
            t for t in text.split(" ") if not all(unicodedata.category(c)[0] == "P" for c in t)
        )
    return text.lower() if lowercase else text


def _counts(output) -> dict:
    ref = output.hits + output.substitutions + output.deletions
    errors = output.substitutions + output.deletions + output.insertions
    return {
        "ref": ref,
        "hits": output.hits,
        "sub": output.substitutions,
        "del": output.deletions,
        "ins": output.insertions,
        "errors": errors,
    }


def score_wer(pairs: Sequence[Pair]) -> dict:
    """WER/CER/SER (percent) and their counts; ``alignments`` holds jiwer's word alignment per pair."""
    refs = [p.ref for p in pairs]
    hyps = [p.hyp for p in pairs]
    words = jiwer.process_words(refs, hyps)
    chars = jiwer.process_characters(refs, hyps)
    word_counts, char_counts = _counts(words), _counts(chars)
    sentence_errors = sum(p.ref.split() != p.hyp.split() for p in pairs)
    return {
        "num_utts": len(pairs),
        "wer": 100.0 * word_counts["errors"] / word_counts["ref"],
        "cer": 100.0 * char_counts["errors"] / char_counts["ref"],
        "ser": 100.0 * sentence_errors / len(pairs),
        "sentence_errors": sentence_errors,
        "words": word_counts,
        "chars": char_counts,
        "alignments": words,
    }


def align_columns(ref: list[str], hyp: list[str], chunks) -> list[tuple]:
    """(ref word, hyp word, op) per aligned position; op is "", "S", "D" or "I"."""
    columns = []
    for chunk in chunks:
        ref_part = ref[chunk.ref_start_idx : chunk.ref_end_idx]
        hyp_part = hyp[chunk.hyp_start_idx : chunk.hyp_end_idx]
        if chunk.type == "equal":
            columns += [(r, h, "") for r, h in zip(ref_part, hyp_part)]
        elif chunk.type == "substitute":
            columns += [(r, h, "S") for r, h in zip(ref_part, hyp_part)]
        elif chunk.type == "delete":
            columns += [(r, GAP, "D") for r in ref_part]
        else:
            columns += [(GAP, h, "I") for h in hyp_part]
    return columns


def format_alignment(utt_id: str, columns: list[tuple]) -> str:
    widths = [max(len(r), len(h), len(op)) for r, h, op in columns]
    ops = [op for _, _, op in columns]
    rows = [
        f"{utt_id} (S={ops.count('S')} D={ops.count('D')} I={ops.count('I')})",
        "REF: " + " ".join(r.ljust(w) for (r, _, _), w in zip(columns, widths)),
        "HYP: " + " ".join(h.ljust(w) for (_, h, _), w in zip(columns, widths)),
        "OP:  " + " ".join(op.ljust(w) for op, w in zip(ops, widths)),
    ]
    return "\n".join(row.rstrip() for row in rows) + "\n"


def summary_line(name: str, rate: float, counts: dict) -> str:
    """Kaldi compute-wer style: ``%WER 12.50 [ 5 / 40, 1 ins, 2 del, 2 sub ]``."""
    return (
        f"%{name} {rate:.2f} [ {counts['errors']} / {counts['ref']}, "
        f"{counts['ins']} ins, {counts['del']} del, {counts['sub']} sub ]"
    )


def format_report(scores: dict, pairs: Sequence[Pair], ref_path, hyp_path) -> str:
    lines = [
        f"REF: {ref_path}",
        f"HYP: {hyp_path}",
        summary_line("WER", scores["wer"], scores["words"]),
        summary_line("CER", scores["cer"], scores["chars"]),
        f"%SER {scores['ser']:.2f} [ {scores['sentence_errors']} / {scores['num_utts']} ]",
        "",
        f"Utterances with errors ({scores['sentence_errors']}):",
    ]
    output = scores["alignments"]
    blocks = [
        format_alignment(pair.utt_id, align_columns(ref, hyp, chunks))
        for pair, ref, hyp, chunks in zip(
            pairs, output.references, output.hypotheses, output.alignments
        )
        if any(chunk.type != "equal" for chunk in chunks)
    ]
    return "\n".join(lines) + "\n\n" + "\n".join(blocks)


def score_files(
    ref_path,
    hyp_path,
    out_dir,
    tokenizer: str = "none",
    lowercase: bool = False,
    remove_punct: bool = False,
) -> dict:
    """Score (after ``evaluation_tokenize`` when any option is set, the texts as given beside it under
    ``raw``), write ``out_dir/result.{txt,json}``; returns the json content."""
    pairs = read_ref_hyp(ref_path, hyp_path)
    normalising = tokenizer != "none" or lowercase or remove_punct
    raw = score_wer(pairs) if normalising else None
    if normalising:
        options = (tokenizer, lowercase, remove_punct)
        pairs = [
            Pair(
                p.utt_id, evaluation_tokenize(p.ref, *options), evaluation_tokenize(p.hyp, *options)
            )
            for p in pairs
        ]
    scores = score_wer(pairs)
    report = format_report(scores, pairs, ref_path, hyp_path)
    result = {key: value for key, value in scores.items() if key != "alignments"}
    if raw is not None:
        result["scoring"] = {
            "tokenizer": tokenizer,
            "lowercase": lowercase,
            "remove_punct": remove_punct,
        }
        result["raw"] = {key: raw[key] for key in ("wer", "cer", "ser", "words", "chars")}
        head, rest = report.split("\n\n", 1)
        note = f"(after sacrebleu {tokenizer}, lowercase {lowercase}, punctuation removed {remove_punct})"
        raw_line = f"{summary_line('RAW', raw['wer'], raw['words'])} (WER of the texts as given)"
        report = f"{head}\n{raw_line}\n{note}\n\n{rest}"
    write_scores(out_dir, result, report, "wer", ref_path, hyp_path)
    return result


def get_parser() -> argparse.ArgumentParser:
    parser = ref_hyp_parser("score_wer.py", __doc__)
    parser.add_argument(
        "--tokenizer",
        choices=sorted(EVAL_TOKENIZERS),
        default="none",
        help="sacrebleu tokenizer first",
    )
    parser.add_argument("--lowercase", action="store_true", help="lowercase both sides")
    parser.add_argument(
        "--remove_punct", action="store_true", help="drop tokens made only of punctuation"
    )
    return parser


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    args = get_parser().parse_args(argv)
    result = score_files(
        args.ref, args.hyp, args.out_dir, args.tokenizer, args.lowercase, args.remove_punct
    )
    raw = f" (raw WER {result['raw']['wer']:.2f})" if "raw" in result else ""
    print(
        f"{summary_line('WER', result['wer'], result['words'])}{raw} %CER {result['cer']:.2f} "
        f"%SER {result['ser']:.2f} ({result['num_utts']} utts) -> {args.out_dir / 'result.txt'}"
    )


if __name__ == "__main__":
    sys.exit(main())
