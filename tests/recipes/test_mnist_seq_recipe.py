"""mnist_seq/ocr1 end to end on a tiny set of real MNIST strips: sharp attention (chain, reference), soft."""

import json
import re

import pytest
from recipe_fixture import TINY_OCR, make_recipe_copy, run

DATA = ["--local_data_opts", "--length 5 --rotated true --num_train 48 --num_dev 8 --num_test 8"]


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    recipe = make_recipe_copy("mnist_seq", "ocr1", tmp_path_factory.mktemp("mnist"))
    (recipe / "conf" / "tiny.yaml").write_text(TINY_OCR)
    out = run(
        recipe,
        ["--attention", "chain", "--ocr_config", "conf/tiny.yaml", "--rotated", "true"] + DATA,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    return recipe


def test_all_stages_with_sharp_attention(recipe):
    assert sorted(
        p.name for p in (recipe / "data").iterdir() if p.is_dir() and "_l5r" in p.name
    ) == ["dev_l5r", "test_l5r", "train_l5r"]
    exp = recipe / "exp" / "ocr_chain_l5r"
    assert (
        "sharp_attention" in (exp / "config.yaml").read_text()
        and "context: chain" in (exp / "config.yaml").read_text()
    )
    decode = exp / "decode" / "test_l5r"
    hyps = (decode / "text").read_text().splitlines()
    assert [h.split()[0] for h in hyps] == [f"l5r-test-{i}" for i in range(8)]
    entropies = [float(line.split()[1]) for line in (decode / "entropy").read_text().splitlines()]
    assert len(entropies) == 8 and all(0 <= e <= 3.2 for e in entropies)  # at most log(24)
    assert len(list((decode / "plots").glob("*.png"))) == 8
    result = json.loads((decode / "score_acc" / "result.json").read_text())
    assert result["num_images"] == 8 and 0 <= result["seq_acc"] <= 100 and "entropy" in result
    results = (recipe / "exp" / "RESULTS.md").read_text()
    assert re.search(r"\| ocr_chain_l5r / decode \| [0-9.]+ \|", results), results


def test_reference_supervision_and_soft_attention_reuse_the_data(recipe):
    out = run(
        recipe,
        [
            "--attention",
            "reference",
            "--ocr_config",
            "conf/tiny.yaml",
            "--rotated",
            "true",
            "--stop_stage",
            "4",
        ]
        + DATA,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert "Stage 1: data preparation: already done" in out.stderr
    log = (recipe / "exp" / "ocr_reference_l5r" / "train.log").read_text()
    assert "loss_reference=" in log
    out = run(
        recipe,
        ["--attention", "soft", "--ocr_config", "conf/tiny.yaml", "--rotated", "true"] + DATA,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert (recipe / "exp" / "ocr_soft_l5r" / "decode" / "test_l5r" / "entropy").exists()
