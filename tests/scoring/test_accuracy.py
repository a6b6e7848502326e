"""Sequence/character accuracy as the sharp-attention paper scores text recognition, and the entropy mean."""

import json

import pytest

from espnet_ext.errors import InputError
from espnet_ext.scoring.accuracy import main, normalise, score_accuracy


def write(path, rows):
    path.write_text("".join(f"{k} {v}\n" for k, v in rows))
    return path


def test_lower_case_and_punctuation_removed_before_comparing():
    assert normalise("Don't-Stop!") == "dontstop"


def test_scores(tmp_path):
    ref = write(tmp_path / "ref", [("a", "31415"), ("b", "Hello,"), ("c", "2718")])
    hyp = write(tmp_path / "hyp", [("a", "31415"), ("b", "hello"), ("c", "2719")])
    result = score_accuracy(ref, hyp)
    assert result["seq_acc"] == pytest.approx(200 / 3)
    assert result["char_acc"] == pytest.approx(100 * (1 - 1 / 14))
    entropy = write(tmp_path / "entropy", [("a", "0.5"), ("b", "1.0"), ("c", "1.5")])
    assert score_accuracy(ref, hyp, entropy)["entropy"] == pytest.approx(1.0)
    main(
        [
            "--ref",
            str(ref),
            "--hyp",
            str(hyp),
            "--entropy",
            str(entropy),
            "--out_dir",
            str(tmp_path / "out"),
        ]
    )
    assert json.loads((tmp_path / "out" / "result.json").read_text())["metric"] == "seq_acc"


def test_missing_entropy_is_an_error(tmp_path):
    ref = write(tmp_path / "ref", [("a", "1")])
    with pytest.raises(InputError, match="no entropy for 1 images"):
        score_accuracy(ref, ref, write(tmp_path / "entropy", [("z", "0.1")]))
