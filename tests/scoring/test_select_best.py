"""Choosing the best of several scored runs (the LM-weight grid on the dev set)."""

import json
import subprocess
import sys

import pytest

from espnet_ext.errors import InputError
from espnet_ext.scoring.select_best import select_best


def result(tmp_path, name, **values):
    path = tmp_path / name / "result.json"
    path.parent.mkdir()
    path.write_text(json.dumps(values))
    return str(path)


def test_max_and_min_and_ties_go_to_the_first(tmp_path):
    runs = [
        ("0", result(tmp_path, "a", bleu=30.0, wer=5.0)),
        ("0.05", result(tmp_path, "b", bleu=31.5, wer=4.0)),
        ("0.1", result(tmp_path, "c", bleu=31.5, wer=6.0)),
    ]
    best, values = select_best(runs, "bleu", maximize=True)
    assert best == "0.05" and values == [("0", 30.0), ("0.05", 31.5), ("0.1", 31.5)]
    assert select_best(runs, "wer", maximize=False)[0] == "0.05"
    assert select_best(runs[2:] + runs[:2], "bleu", maximize=True)[0] == "0.1"


def test_missing_result_or_key_is_an_error(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        select_best([("0", str(tmp_path / "none.json"))], "bleu", maximize=True)
    with pytest.raises(InputError, match="no such key"):
        select_best([("0", result(tmp_path, "a", wer=1.0))], "bleu", maximize=True)


def test_command_line_prints_the_label(tmp_path):
    a, b = result(tmp_path, "a", bleu=10.0), result(tmp_path, "b", bleu=12.25)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "espnet_ext.scoring.select_best",
            "--metric",
            "bleu",
            "--max",
            f"0={a}",
            f"0.2={b}",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "0.2\n"
    assert "0.2\tbleu 12.25\t<- best" in out.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "espnet_ext.scoring.select_best", "--metric", "bleu", "--max", "x"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "LABEL=PATH" in bad.stderr
