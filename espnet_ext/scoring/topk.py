"""Image-classification scores: top-1 accuracy of the predicted class (Kaldi ``text``: ``<id> <class>``)
and top-k accuracy of a ranked list (``<id> <class 1> ... <class k>``, best first), against the reference
classes.

    utils/score_topk.py --ref data/test/text --hyp exp/cls/decode/test/text --topk .../topk --out_dir D
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.scoring.ref_hyp import read_ref_hyp, ref_hyp_parser, write_scores


def score_classification(ref_path, hyp_path, topk_path=None) -> dict:
    pairs = read_ref_hyp(ref_path, hyp_path)
    result = {
        "top1": 100.0 * sum(p.ref == p.hyp for p in pairs) / len(pairs),
        "num_images": len(pairs),
    }
    if topk_path is not None:
        ranked = {p.utt_id: p.hyp.split() for p in read_ref_hyp(ref_path, topk_path)}
        ks = {len(classes) for classes in ranked.values()}
        if len(ks) != 1:
            raise InputError(
                f"lines rank different numbers of classes: {sorted(ks)}", path=topk_path
            )
        for p in pairs:
            if ranked[p.utt_id][0] != p.hyp:
                raise InputError(
                    f"best class '{ranked[p.utt_id][0]}' differs from {hyp_path}'s '{p.hyp}'",
                    path=topk_path,
                    key=p.utt_id,
                )
        k = ks.pop()
        result["k"] = k
        result["topk"] = 100.0 * sum(p.ref in ranked[p.utt_id] for p in pairs) / len(pairs)
    return result


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = ref_hyp_parser("score_topk.py", __doc__.splitlines()[0])
    parser.add_argument("--topk", type=Path, default=None, help="ranked classes, best first")
    args = parser.parse_args(argv)
    result = score_classification(args.ref, args.hyp, args.topk)
    report = f"%Top1 {result['top1']:.2f}"
    if "topk" in result:
        report += f" %Top{result['k']} {result['topk']:.2f}"
    report += f" ({result['num_images']} images)"
    path = write_scores(args.out_dir, result, report + "\n", "top1", args.ref, args.hyp)
    print(f"{report} -> {path}")


if __name__ == "__main__":
    sys.exit(main())
