"""egs/librispeech/asr1's real mode (LIBRISPEECH set) end to end as a smoke run (--smoke true, README "Smoke
runs") on the release-layout fixture: the 100 h setup's configs and options, with LM fusion (the SLR11 text)
and without."""

import json
import re

import pytest
import yaml
from real_fixtures import librispeech_release
from recipe_fixture import make_recipe_copy, read_table, run

# What a tiny corpus forces besides --smoke: one job per stage (a few utterances per set).
SMOKE = ["--smoke", "true", "--nj", "1", "--inference_nj", "1", "--train_num_threads", "1"]
TEST_SETS = ["dev_clean", "dev_other", "test_clean", "test_other"]


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    """All stages with LM fusion, then stages 10-12 without the LM: (recipe, env, LM run, plain run)."""
    dest = tmp_path_factory.mktemp("librispeech_real")
    corpus = librispeech_release(dest / "corpus")
    recipe = make_recipe_copy("librispeech", "asr1", dest)
    env = {"LIBRISPEECH": str(corpus), "LIBRISPEECH_LM": str(corpus)}
    with_lm = run(recipe, [*SMOKE, "--use_lm", "true"], env=env)
    assert with_lm.returncode == 0, with_lm.stderr[-4000:]
    plain = run(recipe, [*SMOKE, "--stage", "10"], env=env)
    assert plain.returncode == 0, plain.stderr[-4000:]
    return recipe, with_lm, plain


def test_every_stage_runs_on_the_release_layout(real_run):
    recipe, with_lm, _ = real_run
    assert len(read_table(recipe / "data" / "train_clean_100" / "text")) == 6
    assert len(read_table(recipe / "data" / "dev" / "text")) == 7  # dev_clean + dev_other
    for n in range(1, 13):
        assert re.search(rf"Stage {n}: .*: done in", with_lm.stderr), n
    exp = recipe / "exp" / "asr_train_asr_small"
    # the real model selection (valid.acc.best.pth) and the LM of the training + SLR11 text
    assert (exp / "valid.acc.best.pth").exists()
    assert (recipe / "exp" / "lm_extended" / "valid.loss.ave.pth").exists()
    config = yaml.safe_load((exp / "config.yaml").read_text())
    # the real config's settings, with the smoke overrides only
    assert config["scheduler"] == "tristagelr" and config["batch_bins"] == 22000
    assert config["encoder_conf"]["num_blocks"] == 6 and config["encoder_conf"]["output_size"] == 64
    assert (
        config["max_epoch"] == 2
        and config["num_iters_per_epoch"] == 1
        and config["accum_grad"] == 1
    )


@pytest.mark.parametrize("tag", ["decode_decode_asr_lm_lm_extended", "decode_decode_asr"])
def test_each_test_set_is_decoded_scored_and_tabled(real_run, tag):
    recipe, _, plain = real_run
    exp = recipe / "exp" / "asr_train_asr_small"
    assert not re.search(
        r"Stage \d+: [^\n]*training", plain.stderr
    )  # decoding alone trains nothing
    for dset in TEST_SETS:
        refs = read_table(recipe / "dump" / "fbank" / dset / "text")
        hyps = (exp / tag / dset / "text").read_text().splitlines()
        assert [line.split(" ", 1)[0] for line in hyps] == sorted(refs)
        score = json.loads((exp / tag / dset / "score_wer" / "result.json").read_text())
        assert score["wer"] >= 0
    results = (recipe / "exp" / "RESULTS.md").read_text()
    assert re.search(rf"\| asr_train_asr_small / {tag} \|( [0-9.]+ \|){{4}}", results), results
