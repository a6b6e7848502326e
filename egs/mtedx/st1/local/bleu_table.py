#!/usr/bin/env python3
"""RESULTS.md of mTEDx multilingual ST in the layout of the head-selection paper's Table 4.

Rows are models (experiment dirs), columns AVG-A (mean BLEU over all test directions), AVG-T (over the
trained directions) and AVG-Z (over the zero-shot ones); a second table gives BLEU per direction. An
average is shown only when every direction it covers was scored ("-" otherwise, as the paper's adapter
row, which cannot translate zero-shot directions). BLEU per direction is read from st.sh's
``exp/st_<tag>/<decode>/test_<src>-<tgt>/score_bleu/result.json``.

    local/bleu_table.py --exp_dir exp --decode decode_st_mini --out RESULTS.md \\
        --train_directions "es-en fr-en" --zero_shot_directions "it-en" \\
        --model "S2T Transformer=train_st_shared_mini_asrinit" --model "Group strategy=..."
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

# Works from a checkout (and through the recipe's utils link) even when espnet_ext is not installed.
sys.path.append(str(Path(__file__).resolve().parents[4]))

from espnet_ext.analysis.tables import average_columns  # noqa: E402
from espnet_ext.errors import InputError, reports_input_errors  # noqa: E402
from espnet_ext.results import Cell, Table, lookup, write_results  # noqa: E402

AVERAGES = ("AVG-A", "AVG-T", "AVG-Z")


def averages(
    bleu: Mapping[str, float | None], trained: Sequence[str], zero_shot: Sequence[str]
) -> dict[str, float | None]:
    """AVG-A / AVG-T / AVG-Z of BLEU per direction; None where a covered direction has no score."""
    covered = {"AVG-A": [*trained, *zero_shot], "AVG-T": trained, "AVG-Z": zero_shot}
    return average_columns(bleu, covered)


def read_bleu(exp_dir: Path, tag: str, decode: str, directions: Sequence[str]) -> dict:
    """{direction: BLEU or None (not scored)} of one model."""
    return {
        d: lookup(
            exp_dir / f"st_{tag}" / decode / f"test_{d}" / "score_bleu" / "result.json", "bleu"
        )
        for d in directions
    }


def tables(
    models: Mapping[str, Mapping[str, float | None]],
    trained: Sequence[str],
    zero_shot: Sequence[str],
) -> list[Table]:
    """Table 4 (averages) and BLEU per direction, rows in ``models``' order."""
    directions = [*trained, *zero_shot]
    table4 = Table("Table 4: BLEU of speech translation on mTEDx", list(models), list(AVERAGES))
    per_direction = Table(
        "BLEU per direction (trained, then zero-shot: " + ", ".join(zero_shot) + ")",
        list(models),
        directions,
    )
    for model, bleu in models.items():
        for column, value in averages(bleu, trained, zero_shot).items():
            if value is not None:
                table4.cells.append(Cell(model, column, value=value, format=".1f"))
        for direction in directions:
            if bleu.get(direction) is not None:
                per_direction.cells.append(
                    Cell(model, direction, value=bleu[direction], format=".1f")
                )
    table4.row_header = per_direction.row_header = "Model"
    return [table4, per_direction]


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--exp_dir", type=Path, default=Path("exp"))
    parser.add_argument("--decode", required=True, help="the decoding dir, e.g. decode_st_mini")
    parser.add_argument("--train_directions", required=True)
    parser.add_argument("--zero_shot_directions", required=True)
    parser.add_argument(
        "--model", action="append", required=True, help="<row label>=<st_tag> (exp/st_<st_tag>)"
    )
    parser.add_argument("--title", default="mTEDx multilingual ST")
    parser.add_argument("--notes", default="")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    trained, zero_shot = args.train_directions.split(), args.zero_shot_directions.split()
    models = {}
    for item in args.model:
        label, eq, tag = item.partition("=")
        if not eq or not label or not tag:
            raise InputError(f"--model '{item}' is not <row label>=<st_tag>", key="--model")
        models[label] = read_bleu(args.exp_dir, tag, args.decode, [*trained, *zero_shot])
    command = " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])])
    write_results(args.out, args.title, tables(models, trained, zero_shot), command, args.notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
