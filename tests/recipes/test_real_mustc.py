"""egs/mustc/asr1 then egs/mustc/st1 in their real mode (MUSTC set) end to end as smoke runs (--smoke true,
README "Smoke runs") on the release-layout fixture: the ST encoder starts from the ASR recipe's model
(--asr_init, the real run.sh's default: its best checkpoint), as the Multiformer thesis' setup."""

import json
import re
from pathlib import Path

import pytest
import yaml
from recipe_fixture import make_recipe_copy, read_table, run

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mustc"
SMOKE = ["--smoke", "true", "--nj", "1", "--inference_nj", "1", "--train_num_threads", "1"]
TEST_SETS = ["tst_COMMON", "tst_HE"]


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory):
    dest = tmp_path_factory.mktemp("mustc_real")
    asr = make_recipe_copy("mustc", "asr1", dest)
    st = make_recipe_copy("mustc", "st1", dest)
    env = {"MUSTC": str(FIXTURE)}
    for recipe in (asr, st):
        out = run(recipe, SMOKE, env=env)
        assert out.returncode == 0, out.stderr[-4000:]
    return asr, st


@pytest.mark.parametrize(
    "task, exp, metric", [("asr", "asr_train_asr", "wer"), ("st", "st_train_st_asrinit", "bleu")]
)
def test_each_test_set_is_decoded_scored_and_tabled(real_runs, task, exp, metric):
    recipe = dict(zip(("asr", "st"), real_runs))[task]
    exp_dir = recipe / "exp" / exp
    assert (exp_dir / "valid.acc.ave.pth").exists()
    decodes = [p for p in exp_dir.glob("decode_*") if p.is_dir()]
    assert len(decodes) == 1
    for dset in TEST_SETS:
        refs = read_table(recipe / "data" / dset / "text")
        hyps = (decodes[0] / dset / "text").read_text().splitlines()
        assert [line.split(" ", 1)[0] for line in hyps] == sorted(refs)
        score = json.loads((decodes[0] / dset / f"score_{metric}" / "result.json").read_text())
        assert score[metric] >= 0
        # ASR: fairseq's MuST-C WER (run.sh --wer_opts), the raw WER beside it
        assert ("raw" in score) == (task == "asr")
    results = (recipe / "exp" / "RESULTS.md").read_text()
    assert re.search(rf"\| {exp} / {decodes[0].name} \|( [0-9.]+ \|){{2}}", results), results


def test_st_encoder_starts_from_the_asr_model(real_runs):
    asr, st = real_runs
    exp = st / "exp" / "st_train_st_asrinit"
    config = yaml.safe_load((exp / "config.yaml").read_text())
    asr_config = yaml.safe_load((asr / "exp" / "asr_train_asr" / "config.yaml").read_text())
    assert (
        config["encoder_conf"] == asr_config["encoder_conf"]
    )  # both shrunk alike from the real sizes
    assert config["max_epoch"] == 2 and config["num_iters_per_epoch"] == 1
    command = (exp / "train.log").read_text().splitlines()[0]
    model = "../asr1/exp/asr_train_asr/valid.acc.best.pth"  # the thesis: the best ASR checkpoint
    # utterance_cmvn_specaug holds no statistics, so the encoder is all the ASR model gives
    assert f"--init_param {model}:encoder:encoder --" in command
