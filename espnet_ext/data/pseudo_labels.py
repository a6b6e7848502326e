"""Self-training data: pseudo-labels of an unlabeled video set from a fine-tuned model's decoding.

The paper's largest setup fine-tunes on LRS3's 433 h of labelled video plus 1,326 h of VoxCeleb2-en
labelled by a fine-tuned model (AV-HuBERT's self-training). Given the decoding of the unlabeled set
(``text``: 1-best per video; ``score``: ``<id> <score> <tokens>`` as ``vsr_inference --score_file``
writes), this writes a Kaldi data dir whose ``text`` is the 1-best, keeping only confident videos:

    confidence(u) = score(u) / tokens(u)     (the length-normalised log-probability of the 1-best)
    keep u  iff  confidence(u) >= min_confidence  and  the 1-best is not empty

Dropped videos are listed with their reason in ``dropped.txt`` (never silently), the kept ones carry
their confidence in ``utt2confidence``. The output appears only complete (built beside, then renamed),
and a filter that keeps nothing is refused.

    python -m espnet_ext.data.pseudo_labels --data_dir dump/video/unlabeled \
        --decode_dir exp/vsr_x/decode/unlabeled --out_dir data/unlabeled_pseudo [--min_confidence -1.0]
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from espnet_ext.data.datadir import (
    atomic_dir,
    fix_spk2utt,
    read_kaldi_entries,
    read_kaldi_map,
    write_kaldi_map,
)
from espnet_ext.errors import InputError, reports_input_errors

# Tables copied (restricted to the kept videos) from the unlabeled data dir; a reference text there,
# if any, is not a label and is left out.
COPIED = ("video.scp", "utt2spk", "utt2num_frames")


@dataclass(frozen=True)
class Hypothesis:
    text: str
    score: float
    tokens: int

    @property
    def confidence(self) -> float:
        return self.score / max(self.tokens, 1)


def read_hypotheses(decode_dir: Path) -> dict[str, Hypothesis]:
    """``text`` and ``score`` of a decoding directory, checked to cover the same ids."""
    text_path, score_path = decode_dir / "text", decode_dir / "score"
    texts = read_kaldi_map(text_path, allow_empty=True)  # an empty 1-best is a (dropped) result
    hypotheses = {}
    for entry in read_kaldi_entries(score_path, what="score"):
        fields = entry.value.split()
        try:
            if len(fields) != 2:
                raise ValueError(f"expected '<id> <score> <tokens>', got {len(fields) + 1} fields")
            score, tokens = float(fields[0]), int(fields[1])
        except ValueError as e:
            raise InputError(str(e), path=score_path, line=entry.line, key=entry.key) from e
        if entry.key not in texts:
            raise InputError(f"id not in {text_path}", path=score_path, line=entry.line,
                             key=entry.key)  # fmt: skip
        hypotheses[entry.key] = Hypothesis(texts[entry.key], score, tokens)
    missing = sorted(set(texts) - set(hypotheses))
    if missing:
        raise InputError(f"no score for {len(missing)} id(s), e.g. {missing[0]}", path=score_path)
    return hypotheses


def write_pseudo_labels(
    data_dir: Path, decode_dir: Path, out_dir: Path, min_confidence: float = -math.inf
) -> tuple[int, int]:
    """The pseudo-labelled data dir; returns (kept, dropped)."""
    hypotheses = read_hypotheses(decode_dir)
    videos = read_kaldi_map(data_dir / "video.scp")
    undecoded = sorted(set(videos) - set(hypotheses))
    if undecoded:
        raise InputError(f"{len(undecoded)} video(s) were not decoded, e.g. {undecoded[0]}",
                         path=decode_dir / "text")  # fmt: skip
    kept, dropped = {}, {}
    for key in videos:
        hypothesis = hypotheses[key]
        if not hypothesis.text:
            dropped[key] = "empty 1-best"
        elif hypothesis.confidence < min_confidence:
            dropped[key] = f"confidence {hypothesis.confidence:.4f} < {min_confidence}"
        else:
            kept[key] = hypothesis
    if not kept:
        raise InputError(f"the confidence filter (min {min_confidence}) keeps none of "
                         f"{len(videos)} videos", path=decode_dir)  # fmt: skip
    with atomic_dir(out_dir) as tmp:
        for name in COPIED:
            if (data_dir / name).is_file():
                table = read_kaldi_map(data_dir / name)
                write_kaldi_map(tmp / name, {k: table[k] for k in kept})
        if not (tmp / "utt2spk").is_file():
            write_kaldi_map(tmp / "utt2spk", {k: k for k in kept})  # one speaker per video
        write_kaldi_map(tmp / "text", {k: h.text for k, h in kept.items()})
        write_kaldi_map(tmp / "utt2confidence", {k: f"{h.confidence:.6f}" for k, h in kept.items()})
        write_kaldi_map(tmp / "dropped.txt", dropped)
        fix_spk2utt(tmp)
    return len(kept), len(dropped)


@reports_input_errors
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data_dir", type=Path, required=True, help="the unlabeled set (video.scp)"
    )
    parser.add_argument("--decode_dir", type=Path, required=True, help="its decoding: text, score")
    parser.add_argument("--out_dir", type=Path, required=True)
    parser.add_argument("--min_confidence", type=float, default=-math.inf,
                        help="least length-normalised 1-best score kept")  # fmt: skip
    args = parser.parse_args(argv)
    try:
        kept, dropped = write_pseudo_labels(args.data_dir, args.decode_dir, args.out_dir,
                                            args.min_confidence)  # fmt: skip
    except InputError:  # also clear what a killed earlier run left half-built
        shutil.rmtree(args.out_dir.with_name(args.out_dir.name + ".tmp"), ignore_errors=True)
        raise
    print(f"{args.out_dir}: kept {kept} of {kept + dropped} videos (dropped: dropped.txt)")


if __name__ == "__main__":
    sys.exit(main())
