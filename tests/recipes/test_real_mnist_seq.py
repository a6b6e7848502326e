"""egs/mnist_seq/ocr1's real mode (MNIST set) end to end as a smoke run (--smoke true, README "Smoke runs") on
idx files in the release format: the paper's config with soft attention, then sharp attention (chain context)
and the reference-digit model on the same data."""

import json
import re

import pytest
import yaml
from real_fixtures import mnist_release
from recipe_fixture import make_recipe_copy, read_table, run

# A tiny corpus forces few strips (the real 20,000 / 1,000 / 10,000 are data.sh defaults) and one job.
SMOKE = ["--smoke", "true", "--nj", "1", "--inference_nj", "1", "--train_num_threads", "1",
         "--local_data_opts", "--num_train 12 --num_dev 2 --num_test 2"]  # fmt: skip
MODELS = ("soft", "chain", "reference")


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    dest = tmp_path_factory.mktemp("mnist_real")
    env = {"MNIST": str(mnist_release(dest / "mnist"))}
    recipe = make_recipe_copy("mnist_seq", "ocr1", dest)
    runs = {}
    for attention in MODELS:
        stage = ["--stage", "4"] if runs else []  # data, tokens and statistics of the first run
        runs[attention] = run(recipe, [*SMOKE, *stage, "--attention", attention], env=env)
        assert runs[attention].returncode == 0, runs[attention].stderr[-4000:]
    return recipe, runs


@pytest.mark.parametrize("attention", MODELS)
def test_each_model_trains_decodes_and_scores(real_run, attention):
    recipe, runs = real_run
    exp = recipe / "exp" / f"ocr_{attention}_l5"
    config = yaml.safe_load((exp / "config.yaml").read_text())
    assert (
        config["optim"] == "adadelta" and config["optim_conf"]["weight_decay"] == 4e-5
    )  # the paper's
    assert config["batch_size"] == 8  # the smoke cap of the paper's 192
    assert config["max_epoch"] == 2 and config["num_iters_per_epoch"] == 1
    refs = read_table(recipe / "data" / "test_l5" / "text")
    hyps = (exp / "decode" / "test_l5" / "text").read_text().splitlines()
    assert [line.split(" ", 1)[0] for line in hyps] == sorted(refs)
    result = json.loads((exp / "decode" / "test_l5" / "score_acc" / "result.json").read_text())
    assert result["num_images"] == 2
    results = (recipe / "exp" / "RESULTS.md").read_text()
    assert re.search(rf"\| ocr_{attention}_l5 / decode \| [0-9.]+ \|", results), results
