"""egs/iwslt14/mt1's real mode (IWSLT14 set) end to end as a smoke run (--smoke true, README "Smoke runs") on
the release-layout fixture: the paper's λ tuning of LM fusion with the extended LM text (IWSLT14_LM), then the
default decoding without LM; the last-5 average and the tokenized BLEU of the real options."""

import json
import re
from pathlib import Path

import pytest
import yaml
from recipe_fixture import make_recipe_copy, read_table, run

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "iwslt14"
SMOKE = ["--smoke", "true", "--nj", "1", "--inference_nj", "1"]
EXP = "mt_train_mt_base"


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    """(recipe, λ-tuning run, plain decoding run)."""
    dest = tmp_path_factory.mktemp("iwslt14_real")
    recipe = make_recipe_copy("iwslt14", "mt1", dest)
    lm_text = (
        dest / "train.en"
    )  # the paper's extended LM text is MuST-C's English side: plain sentences
    lm_text.write_text("thank you very much .\nthis is a talk about ideas .\n", encoding="utf-8")
    env = {"IWSLT14": str(FIXTURE), "IWSLT14_LM": str(lm_text)}
    tuned = run(
        recipe,
        [*SMOKE, "--use_lm", "true", "--lm_text", "extended", "--lm_weights", "0 0.1"],
        env=env,
    )
    assert tuned.returncode == 0, tuned.stderr[-4000:]
    plain = run(recipe, [*SMOKE, "--stage", "9"], env=env)
    assert plain.returncode == 0, plain.stderr[-4000:]
    return recipe, tuned, plain


def test_training_keeps_the_real_settings_and_averages_the_last_five(real_run):
    recipe, _, plain = real_run
    exp = recipe / "exp" / EXP
    assert (exp / "last5.pth").exists()  # the real --inference_model: 5 epochs trained for it
    config = yaml.safe_load((exp / "config.yaml").read_text())
    assert config["max_epoch"] == 5 and config["num_iters_per_epoch"] == 1
    assert config["encoder_conf"]["num_blocks"] == 6 and config["encoder_conf"]["output_size"] == 64
    # the statistics stages built the models the smoke run trains, not the real-size ones (their cost)
    lm_config = yaml.safe_load((recipe / "exp" / "lm_extended" / "config.yaml").read_text())
    for stats, trained, sections in (
        ("mt_stats_*", config, ["encoder_conf", "decoder_conf"]),
        ("lm_stats_*", lm_config, ["lm_conf"]),
    ):
        (stats_dir,) = recipe.glob(f"exp/{stats}")
        built = yaml.safe_load((stats_dir / "logdir" / "stats.1" / "config.yaml").read_text())
        assert [built[s] for s in sections] == [trained[s] for s in sections], stats
    assert (recipe / "exp" / "lm_extended" / "valid.loss.ave.pth").exists()
    lm_lines = (recipe / "data" / "lm_extended" / "text").read_text().splitlines()
    assert [line.split(" ", 1)[1] for line in lm_lines] == [
        "thank you very much .",
        "this is a talk about ideas .",
    ]
    assert not re.search(
        r"Stage \d+: [^\n]*training", plain.stderr
    )  # decoding alone trains nothing


def test_tuned_and_plain_decodings_are_scored(real_run):
    recipe, tuned, _ = real_run
    exp = recipe / "exp" / EXP
    for tag, sets in (
        ("decode_lm_extended_lmw0", ["valid"]),
        ("decode_lm_extended_lmw0.1", ["valid"]),
        (None, ["test"]),  # the tuned weight's tag
        ("decode_decode_mt", ["valid", "test"]),
    ):
        if tag is None:
            tag = next(p.name for p in exp.glob("decode_lm_extended_tuned_lmw*"))
        for dset in sets:
            refs = read_table(recipe / "dump" / "raw" / dset / "text.en")
            hyps = (exp / tag / dset / "text").read_text().splitlines()
            assert [line.split(" ", 1)[0] for line in hyps] == sorted(refs), (tag, dset)
            score = json.loads((exp / tag / dset / "score_bleu" / "result.json").read_text())
            assert score["bleu"] >= 0 and "tokenized_bleu" in json.dumps(score), score
    results = (recipe / "exp" / "RESULTS.md").read_text()
    assert re.search(rf"{EXP} / decode_decode_mt", results), results
