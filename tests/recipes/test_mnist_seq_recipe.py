"""mnist_seq/ocr1 end to end on a small set of real MNIST strips: one sharp-attention run (pooling with
reference supervision) shared by every test, which must learn to read the strips."""

import json
import re

import pytest
from recipe_fixture import ONE_JOB, make_recipe_copy, run

# 3-digit strips, 600 for training: enough for the mini config's backbone to learn in minutes.
DATA = [*ONE_JOB, "--local_data_opts", "--length 3 --num_train 600 --num_dev 40 --num_test 40"]
LEARNING_OCR = """\
model: soft_attention
model_conf: {channels: [16, 32, 64, 64], lstm_units: 32, attention_dim: 32, decoder_units: 32,
             embed_dim: 8, stn_channels: 4}
optim: adam
optim_conf: {lr: 0.002}
batch_type: sorted
batch_size: 16
max_epoch: 9
best_model_criterion: [[valid, acc, max]]
keep_nbest_models: 1
num_workers: 0
use_tensorboard: false
use_matplotlib: false
num_att_plot: 0
"""


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    recipe = make_recipe_copy("mnist_seq", "ocr1", tmp_path_factory.mktemp("mnist"))
    (recipe / "conf" / "learning.yaml").write_text(LEARNING_OCR)
    args = ["--attention", "reference", "--length", "3", "--ocr_config", "conf/learning.yaml"]
    out = run(recipe, args + DATA)
    assert out.returncode == 0, out.stderr[-4000:]
    return recipe


def test_all_stages_with_sharp_attention(recipe):
    assert sorted(
        p.name for p in (recipe / "data").iterdir() if p.is_dir() and "_l3" in p.name
    ) == ["dev_l3", "test_l3", "train_l3"]
    exp = recipe / "exp" / "ocr_reference_l3"
    config = (exp / "config.yaml").read_text()
    assert "sharp_attention" in config and "reference_images: data/reference_digits.npy" in config
    assert "loss_reference=" in (exp / "train.log").read_text()
    decode = exp / "decode" / "test_l3"
    hyps = (decode / "text").read_text().splitlines()
    assert [h.split()[0] for h in hyps] == [f"l3-test-{i:02d}" for i in range(40)]
    entropies = [float(line.split()[1]) for line in (decode / "entropy").read_text().splitlines()]
    assert len(entropies) == 40 and all(0 <= e <= 3.2 for e in entropies)  # at most log(24)
    assert len(list((decode / "plots").glob("*.png"))) == 8  # 8 per decoding job
    results = (recipe / "exp" / "RESULTS.md").read_text()
    assert re.search(r"\| ocr_reference_l3 / decode \| [0-9.]+ \|", results), results


def test_the_model_learns_to_read_the_strips(recipe):
    result = json.loads(
        (
            recipe / "exp" / "ocr_reference_l3" / "decode" / "test_l3" / "score_acc" / "result.json"
        ).read_text()
    )
    # Chance: 10% per digit, 0.1% per 3-digit strip.
    assert result["num_images"] == 40
    assert result["char_acc"] > 80 and result["seq_acc"] > 50, result
