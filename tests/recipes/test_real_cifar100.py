"""egs/cifar100/cls1's real mode (CIFAR100 set) end to end as a smoke run (--smoke true, README "Smoke runs")
on a release-format corpus: Swin-T at 224 x 224 with the validation split held out of train, the baseline,
then relaxed attention with DRLoc, the 1024 batch and matched inference on the same data."""

import json
import re

import pytest
import yaml
from real_fixtures import cifar100_release
from recipe_fixture import make_recipe_copy, run

# One image per class held out for validation (the real recipe: 50 of 500); one job per stage.
SMOKE = ["--smoke", "true", "--nj", "1", "--inference_nj", "1", "--train_num_threads", "1",
         "--local_data_opts", "--valid_per_class 1"]  # fmt: skip
RUNS = {
    "baseline_b128": ("decode", []),
    "relaxed_drloc_g0.1_b1024": (
        "decode_matched",
        [
            "--stage",
            "3",
            "--variant",
            "relaxed_drloc",
            "--batch",
            "1024",
            "--matched_inference",
            "true",
        ],
    ),
}


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    dest = tmp_path_factory.mktemp("cifar100_real")
    env = {"CIFAR100": str(cifar100_release(dest / "cifar"))}
    recipe = make_recipe_copy("cifar100", "cls1", dest)
    for _, args in RUNS.values():
        out = run(recipe, [*SMOKE, *args], env=env)
        assert out.returncode == 0, out.stderr[-4000:]
    return recipe


@pytest.mark.parametrize("tag", list(RUNS))
def test_each_variant_trains_on_train_picks_on_valid_and_scores_test(real_run, tag):
    exp = real_run / "exp" / f"cls_{tag}"
    decode = RUNS[tag][0]
    config = yaml.safe_load((exp / "config.yaml").read_text())
    assert config["model_conf"]["img_size"] == 224 and config["model_conf"]["depths"] == [
        2,
        2,
        6,
        2,
    ]
    assert config["max_epoch"] == 2 and config["num_iters_per_epoch"] == 1
    assert config["batch_size"] == 8  # the smoke cap; the batch setting's learning rate stays
    assert config["optim_conf"]["lr"] == (1e-3 if "b1024" in tag else 1.25e-4)
    assert any("data/valid/" in str(entry) for entry in config["valid_data_path_and_name_and_type"])
    result = json.loads((exp / decode / "test" / "score_topk" / "result.json").read_text())
    assert result["num_images"] == 2 and result["k"] == 5
    results = (real_run / "exp" / "RESULTS.md").read_text()
    assert re.search(rf"cls_{re.escape(tag)} / {decode}", results), results
