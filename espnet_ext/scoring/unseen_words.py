"""BLEU on the sentences whose reference holds a word the MT training targets never contain.

    python -m espnet_ext.scoring.unseen_words --train_text data/train/text.en --ref data/test/text.en \
        --hyp exp/mt_x/decode/test/text --out_dir exp/mt_x/decode/test/score_bleu_unseen

A translation model cannot learn to write a word absent from its training targets; an external LM that saw
the word can bring it back (shallow fusion). Corpus BLEU hides this when few sentences need such a word, so
this scores only those sentences (sacrebleu, as ``espnet_ext.scoring.bleu``) and adds the unseen-word
recall: of the unseen-word occurrences in those references, the share the hypotheses write too (clipped
counts per sentence, as BLEU's unigram matches). Words are whitespace-separated tokens, compared as is.
Writes ``result.json`` / ``result.txt`` in ``--out_dir``.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.scoring.bleu import format_report, score_bleu
from espnet_ext.scoring.ref_hyp import Pair, read_ref_hyp, read_text, write_result


def training_vocabulary(train_text) -> set[str]:
    """The words of a Kaldi text file (the MT training targets)."""
    return {
        w
        for _, text in read_text(train_text, allow_empty=True, what="training text").values()
        for w in text.split()
    }


def unseen_word_recall(pairs: Sequence[Pair], vocabulary: set[str]) -> tuple[int, int]:
    """(matched, total): unseen-word occurrences of the references, and how many the hypotheses write
    (per sentence, a word counts at most as often as its reference holds it)."""
    matched = total = 0
    for pair in pairs:
        wanted = Counter(w for w in pair.ref.split() if w not in vocabulary)
        written = Counter(pair.hyp.split())
        total += sum(wanted.values())
        matched += sum(min(n, written[w]) for w, n in wanted.items())
    return matched, total


def score_unseen(train_text, ref_path, hyp_path, out_dir) -> dict:
    """Score the sentences with unseen words, write ``out_dir/result.{txt,json}``; returns the json."""
    vocabulary = training_vocabulary(train_text)
    pairs = [p for p in read_ref_hyp(ref_path, hyp_path) if set(p.ref.split()) - vocabulary]
    if not pairs:
        raise InputError(f"no reference holds a word that {train_text} lacks", path=ref_path)
    result = score_bleu(pairs)
    matched, total = unseen_word_recall(pairs, vocabulary)
    unseen = sorted({w for p in pairs for w in p.ref.split()} - vocabulary)
    result.update(
        metric="bleu",
        subset="references with a word absent from the training targets",
        train_text=str(train_text),
        ref=str(ref_path),
        hyp=str(hyp_path),
        unseen_words=unseen,
        unseen_word_recall=100.0 * matched / total,
        unseen_words_matched=matched,
        unseen_words_total=total,
    )
    report = format_report(result) + (
        f"subset: {len(pairs)} sentences with words absent from {train_text}: {' '.join(unseen)}\n"
        f"unseen-word recall: {result['unseen_word_recall']:.2f} % [ {matched} / {total} ]\n"
    )
    write_result(out_dir, result, report)
    return result


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--train_text", type=Path, required=True, help="MT training targets (Kaldi text)"
    )
    parser.add_argument("--ref", type=Path, required=True, help="reference Kaldi text file")
    parser.add_argument(
        "--hyp", type=Path, required=True, help="hypothesis Kaldi text file, same ids"
    )
    parser.add_argument("--out_dir", type=Path, required=True)
    args = parser.parse_args(argv)
    result = score_unseen(args.train_text, args.ref, args.hyp, args.out_dir)
    print(
        f"BLEU {result['bleu']:.2f} on {result['num_utts']} sentences with unseen words, "
        f"unseen-word recall {result['unseen_word_recall']:.2f}% -> {args.out_dir / 'result.txt'}"
    )


if __name__ == "__main__":
    sys.exit(main())
