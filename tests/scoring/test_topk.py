"""Top-1 / top-k accuracy of image classification, by hand."""

import json

import pytest

from espnet_ext.errors import InputError
from espnet_ext.scoring.topk import main, score_classification


def write(path, lines):
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def test_top1_and_top3_by_hand(tmp_path):
    ref = write(tmp_path / "ref", ["a cat", "b dog", "c fox", "d cat"])
    hyp = write(tmp_path / "hyp", ["a cat", "b cat", "c dog", "d fox"])
    topk = write(
        tmp_path / "topk", ["a cat dog fox", "b cat dog fox", "c dog cat emu", "d fox emu owl"]
    )
    result = score_classification(ref, hyp, topk)
    assert result["top1"] == 25.0 and result["topk"] == 50.0 and result["k"] == 3
    assert (
        main(
            [
                "--ref",
                str(ref),
                "--hyp",
                str(hyp),
                "--topk",
                str(topk),
                "--out_dir",
                str(tmp_path / "s"),
            ]
        )
        == 0
    )
    written = json.loads((tmp_path / "s" / "result.json").read_text())
    assert written["topk"] == 50.0 and written["metric"] == "top1"
    assert (written["ref"], written["hyp"]) == (str(ref), str(hyp))
    assert (tmp_path / "s" / "result.txt").read_text().startswith("%Top1 25.00 %Top3 50.00")


def test_inconsistent_ranking_is_refused(tmp_path):
    ref = write(tmp_path / "ref", ["a cat", "b dog"])
    hyp = write(tmp_path / "hyp", ["a cat", "b dog"])
    with pytest.raises(InputError, match="best class") as error:
        score_classification(ref, hyp, write(tmp_path / "t1", ["a cat dog", "b cat dog"]))
    assert error.value.key == "b"
    with pytest.raises(InputError, match="different numbers"):
        score_classification(ref, hyp, write(tmp_path / "t2", ["a cat dog", "b dog"]))
    with pytest.raises(InputError, match="not in"):
        score_classification(ref, write(tmp_path / "h", ["a cat"]))
