"""egs/mnist_seq/ocr1's real modes end to end as smoke runs (--smoke true, README "Smoke runs"), in one recipe
dir: on idx files in the MNIST release format, the paper's config with soft attention, then sharp attention
(chain context) and the reference-digit model on the same data, and the rotated strips (--rotated true, chain
context); on LMDBs in the deep-text-recognition-benchmark layout, the scene-text setup (--scene_text true,
§4.2) with its real config, conf/train_ocr_scene_text.yaml (sharp attention, chain context, two STNs)."""

import json
import re

import pytest
import yaml
from real_fixtures import SCENE_TEXT_TEST_SETS, mnist_release, scene_text_release
from recipe_fixture import make_recipe_copy, read_table, run

# A tiny corpus forces one job per stage and, for the digit strips, few strips (the real 20,000 / 1,000 /
# 10,000 are data.sh defaults; the scene-text sets are what the LMDBs hold).
ONE_JOB = ["--smoke", "true", "--nj", "1", "--inference_nj", "1", "--train_num_threads", "1"]
SMOKE = [*ONE_JOB, "--local_data_opts", "--num_train 12 --num_dev 2 --num_test 2"]
MODELS = ("soft", "chain", "reference")
OTHER_MODES = {  # exp tag: run.sh options
    "chain_l5r": [*SMOKE, "--rotated", "true", "--attention", "chain"],
    "chain_st": [*ONE_JOB, "--scene_text", "true", "--attention", "chain"],
}
SCENE_TEST_SETS = [f"test_{short}" for short in SCENE_TEXT_TEST_SETS.values()]


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    """(recipe, {exp tag: (its run, exp/RESULTS.md as that run left it)}): RESULTS.md tables the models
    decoded on the last run's test sets."""
    dest = tmp_path_factory.mktemp("mnist_real")
    env = {
        "MNIST": str(mnist_release(dest / "mnist")),
        "SCENE_TEXT": str(scene_text_release(dest / "scene_text")),
    }
    recipe = make_recipe_copy("mnist_seq", "ocr1", dest)
    plan = {}
    for attention in MODELS:
        stage = ["--stage", "4"] if plan else []  # data, tokens and statistics of the first run
        plan[f"{attention}_l5"] = [*SMOKE, *stage, "--attention", attention]
    plan.update(OTHER_MODES)  # data of their own
    runs = {}
    for tag, args in plan.items():
        out = run(recipe, args, env=env)
        assert out.returncode == 0, out.stderr[-4000:]
        runs[tag] = out, (recipe / "exp" / "RESULTS.md").read_text()
    return recipe, runs


def check_config(exp):
    """The paper's training in exp's config.yaml, with the smoke run's changes only."""
    config = yaml.safe_load((exp / "config.yaml").read_text())
    assert config["optim"] == "adadelta" and config["optim_conf"]["weight_decay"] == 4e-5
    assert config["batch_size"] == 8  # the smoke cap of the paper's 192
    assert config["max_epoch"] == 2 and config["num_iters_per_epoch"] == 1
    assert config["model_conf"]["channels"] == [8, 16, 32, 64]  # the VGG's widths / 8
    return config


def check_decoded(recipe, exp, test_set, images):
    refs = read_table(recipe / "data" / test_set / "text")
    hyps = (exp / "decode" / test_set / "text").read_text().splitlines()
    assert [line.split(" ", 1)[0] for line in hyps] == sorted(refs)
    result = json.loads((exp / "decode" / test_set / "score_acc" / "result.json").read_text())
    assert result["num_images"] == images


@pytest.mark.parametrize("attention", MODELS)
def test_each_model_trains_decodes_and_scores(real_run, attention):
    recipe, runs = real_run
    exp = recipe / "exp" / f"ocr_{attention}_l5"
    check_config(exp)
    check_decoded(recipe, exp, "test_l5", 2)
    results = runs[f"{attention}_l5"][1]
    assert re.search(rf"\| ocr_{attention}_l5 / decode \| [0-9.]+ \|", results), results


def test_rotated_strips_train_decode_and_score(real_run):
    recipe, runs = real_run
    exp = recipe / "exp" / "ocr_chain_l5r"
    config = check_config(exp)
    assert config["model"] == "sharp_attention" and config["model_conf"]["context"] == "chain"
    assert config["model_conf"]["max_length"] == 5 and config["model_conf"]["lambda_r"] == 1.0
    train = read_table(recipe / "data" / "train_l5r" / "text")
    assert len(train) == 12 and all(re.fullmatch(r"[0-9]{5}", label) for label in train.values())
    assert any("data/train_l5r/" in str(e) for e in config["train_data_path_and_name_and_type"])
    check_decoded(recipe, exp, "test_l5r", 2)
    results = runs["chain_l5r"][1]
    assert re.search(r"\| ocr_chain_l5r / decode \| [0-9.]+ \|", results), results


def test_scene_text_real_config_trains_two_stn_sharp_attention_and_scores_six_test_sets(real_run):
    recipe, runs = real_run
    exp = recipe / "exp" / "ocr_chain_st"
    config = check_config(exp)
    assert config["grad_clip"] == float("inf") and config["optim_conf"]["lr"] == 1.0
    assert config["model"] == "sharp_attention"
    model_conf = config["model_conf"]
    assert model_conf["context"] == "chain" and model_conf["num_stn"] == 2
    assert model_conf["max_length"] == 16  # §4.2: at most 16 characters
    # the scene-text config's λ_r and region scale (the digit strips': 1.0 and 1.8)
    assert model_conf["lambda_r"] == 0.1 and model_conf["region_scale"] == 2.0
    assert model_conf["lstm_units"] == 32 and model_conf["decoder_units"] == 32  # 256 / 8
    train = read_table(recipe / "data" / "train_st" / "text")
    assert len(train) == 8 + 8  # MJSynth + SynthText
    # in run.sh's 16 parts (--num_splits_ocr), one after the other by ESPnet's multiple iterator
    assert config["multiple_iterator"] is True
    assert all("/splits16/" in path for path, *_ in config["train_data_path_and_name_and_type"])
    assert sorted(p.name for p in (exp / "splits16").iterdir()) == [
        ".done",
        "image",
        "image_shape",
        "text",
    ]
    assert all(re.fullmatch(r"[0-9a-z]+", label) for label in train.values())  # normalised labels
    assert len(read_table(recipe / "data" / "dev_st" / "text")) == 2
    for test_set in SCENE_TEST_SETS:
        check_decoded(recipe, exp, test_set, 2)
    results = runs["chain_st"][1]
    assert re.search(r"\| ocr_chain_st / decode \|( [0-9.]+ \|){6}", results), results
