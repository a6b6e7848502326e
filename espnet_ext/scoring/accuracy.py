"""Text-recognition scores: sequence accuracy as the sharp-attention paper reports it (a prediction is
correct if it equals the transcription after lower-casing and removing punctuation, as Shi et al. 2017),
character accuracy (1 - edit distance / reference length), and the mean attention entropy when the decoder
wrote one (``--entropy <id> <H>`` lines, Table 3).

    utils/score_acc.py --ref data/test/text --hyp exp/ocr/decode/test/text [--entropy .../entropy]
    --out_dir D
"""

from __future__ import annotations

import string
import sys
from collections.abc import Sequence
from pathlib import Path

import editdistance

from espnet_ext.data.datadir import read_kaldi_map
from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.scoring.ref_hyp import read_ref_hyp, ref_hyp_parser, write_scores

_DROP = str.maketrans("", "", string.punctuation + " ")


def normalise(text: str) -> str:
    return text.lower().translate(_DROP)


def score_accuracy(ref_path, hyp_path, entropy_path=None) -> dict[str, float]:
    pairs = read_ref_hyp(ref_path, hyp_path)
    correct = sum(normalise(p.ref) == normalise(p.hyp) for p in pairs)
    chars = sum(len(normalise(p.ref)) for p in pairs)
    errors = sum(editdistance.eval(normalise(p.ref), normalise(p.hyp)) for p in pairs)
    result = {
        "seq_acc": 100.0 * correct / len(pairs),
        "char_acc": 100.0 * (1 - errors / max(chars, 1)),
        "num_images": len(pairs),
    }
    if entropy_path:
        entropy = read_kaldi_map(entropy_path)
        missing = [p.utt_id for p in pairs if p.utt_id not in entropy]
        if missing:
            raise InputError(
                f"no entropy for {len(missing)} images, e.g. '{missing[0]}'", path=entropy_path
            )
        try:
            result["entropy"] = sum(float(entropy[p.utt_id]) for p in pairs) / len(pairs)
        except ValueError as e:
            raise InputError(f"not a number: {e}", path=entropy_path) from None
    return result


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = ref_hyp_parser("score_acc.py", __doc__.splitlines()[0])
    parser.add_argument("--entropy", type=Path, default=None, help="<id> <attention entropy> lines")
    args = parser.parse_args(argv)
    result = score_accuracy(args.ref, args.hyp, args.entropy)
    report = (
        f"%SeqAcc {result['seq_acc']:.2f} %CharAcc {result['char_acc']:.2f} ({result['num_images']} images)"
        + (f" entropy {result['entropy']:.3f}" if "entropy" in result else "")
    )
    path = write_scores(args.out_dir, result, report + "\n", "seq_acc", args.ref, args.hyp)
    print(f"{report} -> {path}")


if __name__ == "__main__":
    sys.exit(main())
