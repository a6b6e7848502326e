"""egs/librispeech/asr1's real modes (LIBRISPEECH set) end to end as smoke runs (--smoke true, README "Smoke
runs") on the release-layout fixture with all seven parts: the 100 h setup's configs and options, with LM
fusion (the SLR11 text) and without; and then the 960 h setup (--config conf/train_960h.conf: the three
training parts combined, the base model) in the same recipe dir, which keeps the 100 h setup's token list and
statistics (asr.sh names them by the training set) and so leaves its model and decodings done."""

import json
import re

import pytest
import yaml
from real_fixtures import librispeech_960h_parts, librispeech_release
from recipe_fixture import make_recipe_copy, read_table, run

# What a tiny corpus forces besides --smoke: one job per stage (a few utterances per set).
SMOKE = ["--smoke", "true", "--nj", "1", "--inference_nj", "1", "--train_num_threads", "1"]
TEST_SETS = ["dev_clean", "dev_other", "test_clean", "test_other"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The release with every part (the 100 h setup reads five of them): the LIBRISPEECH environment."""
    root = librispeech_release(tmp_path_factory.mktemp("librispeech_corpus"))
    librispeech_960h_parts(root)
    return {"LIBRISPEECH": str(root), "LIBRISPEECH_LM": str(root)}


@pytest.fixture(scope="module")
def real_run(tmp_path_factory, corpus):
    """All stages with LM fusion, then stages 10-12 without the LM: (recipe, LM run, plain run)."""
    dest = tmp_path_factory.mktemp("librispeech_real")
    recipe = make_recipe_copy("librispeech", "asr1", dest)
    env = corpus
    with_lm = run(recipe, [*SMOKE, "--use_lm", "true"], env=env)
    assert with_lm.returncode == 0, with_lm.stderr[-4000:]
    plain = run(recipe, [*SMOKE, "--stage", "10"], env=env)
    assert plain.returncode == 0, plain.stderr[-4000:]
    return recipe, with_lm, plain


def test_every_stage_runs_on_the_release_layout(real_run):
    recipe, with_lm, _ = real_run
    assert len(read_table(recipe / "data" / "train_clean_100" / "text")) == 6
    assert len(read_table(recipe / "data" / "dev" / "text")) == 7  # dev_clean + dev_other
    # the 960 h parts are the 960 h setup's
    assert not (recipe / "data" / "train_clean_360").exists()
    for n in range(1, 13):
        assert re.search(rf"Stage {n}: .*: done in", with_lm.stderr), n
    exp = recipe / "exp" / "asr_train_asr_small"
    # the real model selection (valid.acc.best.pth) and the LM of the training + SLR11 text
    assert (exp / "valid.acc.best.pth").exists()
    lm_exp = recipe / "exp" / "lm_extended_train_clean_100_bpe_unigram5000"  # by its token list
    assert (lm_exp / "valid.loss.ave.pth").exists()
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


def _tree(directory):
    return {p.relative_to(directory): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def run_960h(real_run, corpus):
    """All stages of the 960 h setup (run.sh's header: --config conf/train_960h.conf) in the finished 100 h
    recipe dir: (recipe, run, the 100 h token list and statistics before it)."""
    recipe = real_run[0]
    before = {
        name: _tree(recipe / name)
        for name in (
            "data/token_list/train_clean_100",
            "exp/asr_stats_train_clean_100_bpe_unigram5000",
        )
    }
    out = run(recipe, [*SMOKE, "--config", "conf/train_960h.conf"], env=corpus)
    assert out.returncode == 0, out.stderr[-4000:]
    return recipe, out, before


def test_960h_setup_trains_the_base_model_on_three_parts_and_scores_every_test_set(run_960h):
    recipe, out, _ = run_960h
    train = read_table(recipe / "data" / "train_960" / "text")
    assert len(train) == 6 + 4 + 2  # train-clean-100 + train-clean-360 + train-other-500
    assert {"14-208-0000", "17-362-0001", "20-205-0001"} <= set(train)
    for n in (*range(1, 5), *range(8, 13)):  # no LM: stages 5-7 are the LM's
        assert re.search(rf"Stage {n}: .*: done in", out.stderr), n
    exp = recipe / "exp" / "asr_train_asr_base"
    config = yaml.safe_load((exp / "config.yaml").read_text())
    assert any("train_960_filtered/" in str(e) for e in config["train_data_path_and_name_and_type"])
    # the base model (A.3.1: N_e = 12, N_d = 6) at width / 8, the real schedule and batch
    assert config["encoder_conf"]["num_blocks"] == 12 and config["decoder_conf"]["num_blocks"] == 6
    assert config["encoder_conf"]["output_size"] == 64
    assert config["scheduler"] == "tristagelr" and config["batch_bins"] == 22000
    assert config["max_epoch"] == 2 and config["num_iters_per_epoch"] == 1
    assert (exp / "valid.acc.best.pth").exists()
    for dset in TEST_SETS:
        refs = read_table(recipe / "dump" / "fbank" / dset / "text")
        decoded = exp / "decode_decode_asr" / dset
        hyps = (decoded / "text").read_text().splitlines()
        assert [line.split(" ", 1)[0] for line in hyps] == sorted(refs)
        assert json.loads((decoded / "score_wer" / "result.json").read_text())["wer"] >= 0
    results = (recipe / "exp" / "RESULTS.md").read_text()
    assert results.startswith("# LibriSpeech 960 h"), results[:200]
    row = r"\| asr_train_asr_base / decode_decode_asr \|( [0-9.]+ \|){4}"
    assert re.search(row, results), results


def test_960h_setup_keeps_the_100h_token_list_statistics_and_model(run_960h, corpus, tmp_path):
    recipe, out, before = run_960h
    tokens_960 = recipe / "data/token_list/train_960/bpe_unigram5000/tokens.txt"
    assert tokens_960.exists() and (recipe / "exp/asr_stats_train_960_bpe_unigram5000").is_dir()
    for name, files in before.items():
        assert files and _tree(recipe / name) == files, name
    config = yaml.safe_load((recipe / "exp/asr_train_asr_base/config.yaml").read_text())
    assert config["bpemodel"] == "data/token_list/train_960/bpe_unigram5000/bpe.model"
    # the 100 h setup after it: from its token list to its scoring, every stage planned as done
    plan = run(recipe, [*SMOKE, "--stage", "4", "--stop_stage", "11"],
               env={**corpus, "PIPELINE_DRY_RUN": str(tmp_path)})  # fmt: skip
    assert plan.returncode == 0, plan.stderr[-4000:]
    assert "would run" not in plan.stderr, plan.stderr[-4000:]
    for n in (4, 8, 9, 10, 11):
        assert re.search(rf"Stage {n}: .*: already done", plan.stderr), n
