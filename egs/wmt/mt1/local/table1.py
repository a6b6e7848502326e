"""Table 1 of the head-selection paper from this recipe's scores: BLEU (or chrF2, --metric chrf) averaged
over all languages (AVG-A), the high-resource ones (High) and the low-resource ones (Low), for O2M and M2O, one
row per model.

    python local/table1.py --high "cs de es fr ru zh" --decode decode_decode_mt \
        --row Transformer train_mt_shared --row Adapter train_mt_adapter \
        --row "Group strategy" train_mt_group --row "Subset strategy" train_mt_subset > table1.md

A row's tag T names the experiments exp/multilingual_<dir>/mt_T_<dir>[_mini] (what run.sh trains from
conf/T_<dir>[_mini].yaml); the languages are those of its test sets <dir>_test_<lang>. A language whose
score is missing is an error naming the file, never left out of an average.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from espnet_ext.analysis.tables import average_columns
from espnet_ext.errors import InputError, reports_input_errors

DIRECTIONS = ("o2m", "m2o")


def language_scores(
    exp: Path, decode: str, direction: str, metric: str = "bleu"
) -> dict[str, float]:
    """{language: score} of the experiment's per-language test sets (``metric``: a key of the BLEU
    scorer's result.json, ``bleu`` or ``chrf``)."""
    scores = {}
    for test in sorted((exp / decode).glob(f"{direction}_test_*")):
        result = test / "score_bleu" / "result.json"
        if not result.is_file():
            raise InputError("no BLEU for this test set (stage 10 not run?)", path=result)
        values = json.loads(result.read_text())
        if metric not in values:
            raise InputError(f"no {metric!r} in this score file", path=result, key=metric)
        scores[test.name.rsplit("_", 1)[1]] = values[metric]
    if not scores:
        raise InputError(f"no {direction}_test_<lang> decodings", path=exp / decode)
    return scores


def averages(scores: dict[str, float], high: set[str]) -> tuple[float, float, float]:
    """(AVG-A, High, Low); High/Low are NaN when no language of the scores is in that group."""
    groups = {
        "AVG-A": list(scores),
        "High": [lang for lang in scores if lang in high],
        "Low": [lang for lang in scores if lang not in high],
    }
    return tuple(math.nan if v is None else v for v in average_columns(scores, groups).values())


def experiment(root: Path, tag: str, direction: str) -> Path:
    mode = root / f"multilingual_{direction}"
    for name in (f"mt_{tag}_{direction}", f"mt_{tag}_{direction}_mini"):
        if (mode / name).is_dir():
            return mode / name
    raise InputError(f"no experiment mt_{tag}_{direction}[_mini]", path=mode)


def table(
    root: Path, rows: list[tuple[str, str]], decode: str, high: set[str], metric: str = "bleu"
) -> str:
    lines = ["| | O2M AVG-A | O2M High | O2M Low | M2O AVG-A | M2O High | M2O Low |"]
    lines.append("|---|---|---|---|---|---|---|")
    for label, tag in rows:
        cells = []
        for direction in DIRECTIONS:
            try:
                exp = experiment(root, tag, direction)
            except InputError:
                cells += ["—"] * 3  # this direction not trained for this model
                continue
            scores = language_scores(exp, decode, direction, metric)
            cells += [f"{v:.1f}" for v in averages(scores, high)]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


@reports_input_errors
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exp", type=Path, default=Path("exp"))
    parser.add_argument("--decode", default="decode_decode_mt_mini")
    parser.add_argument("--high", required=True, help="the high-resource languages")
    parser.add_argument("--row", nargs=2, action="append", required=True, metavar=("LABEL", "TAG"))
    parser.add_argument(
        "--metric",
        default="bleu",
        choices=("bleu", "chrf"),
        help="chrf: sacrebleu's chrF2 (one-word targets, e.g. German number words, have no BLEU)",
    )
    args = parser.parse_args(argv)
    rows = [tuple(r) for r in args.row]
    print(table(args.exp, rows, args.decode, set(args.high.split()), args.metric), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
