"""The best of several scored runs (e.g. the LM weights of a grid decoded on the dev set).

    python -m espnet_ext.scoring.select_best --metric bleu --max 0=exp/a/result.json
    0.1=exp/b/result.json -> prints the label of the best run ("0.1")

Each argument is ``label=result.json`` (a scorer's output, see espnet_ext.scoring.bleu/wer).
``--max`` picks the highest value (BLEU), ``--min`` the lowest (WER); a tie goes to the run listed
first, so list the preferred (e.g. smaller) settings first. The table of all values goes to stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.results import lookup


def select_best(
    runs: Sequence[tuple[str, str]], metric: str, maximize: bool
) -> tuple[str, list[tuple[str, float]]]:
    """(label of the best run, [(label, value)] of all) for ``runs`` = [(label, result.json path)]."""
    if not runs:
        raise InputError("no runs to choose from")
    values = []
    for label, path in runs:
        value = lookup(path, metric)
        if value is None:
            raise InputError(
                "result file does not exist (was this run decoded and scored?)",
                path=path,
                key=label,
            )
        values.append((label, float(value)))
    best = values[0]
    for label, value in values[1:]:
        if (value > best[1]) if maximize else (value < best[1]):
            best = (label, value)
    return best[0], values


def parse_run(text: str) -> tuple[str, str]:
    label, sep, path = text.partition("=")
    if not sep or not label or not path:
        raise argparse.ArgumentTypeError(f"expected LABEL=PATH, got {text!r}")
    return label, path


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m espnet_ext.scoring.select_best",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("runs", nargs="+", type=parse_run, help="LABEL=result.json")
    parser.add_argument(
        "--metric", required=True, help="key of result.json (dotted for nested keys)"
    )
    direction = parser.add_mutually_exclusive_group(required=True)
    direction.add_argument("--max", action="store_true", help="higher is better (BLEU, accuracy)")
    direction.add_argument("--min", action="store_true", help="lower is better (WER)")
    args = parser.parse_args(argv)
    best, values = select_best(args.runs, args.metric, args.max)
    for label, value in values:
        print(
            f"{label}\t{args.metric} {value:.2f}" + ("\t<- best" if label == best else ""),
            file=sys.stderr,
        )
    print(best)


if __name__ == "__main__":
    sys.exit(main())
