"""egs/mtedx/asr1 then egs/mtedx/st1 in their real mode (MTEDX set) end to end as smoke runs (--smoke true,
README "Smoke runs") on a release-layout corpus of all 8 languages and 13 directions: group head selection
over the languages, averaged over the last 10 epochs (ASR), and the ST model whose encoder starts from it."""

import json

import pytest
import yaml
from real_fixtures import MTEDX_LANGS, MTEDX_ST_TRAINED, MTEDX_ST_ZERO_SHOT, mtedx_release
from recipe_fixture import make_recipe_copy, read_table, run

SMOKE = ["--smoke", "true", "--nj", "1", "--inference_nj", "1", "--train_num_threads", "1"]
RUNS = {  # recipe -> (experiment, decoding, test sets, metric)
    "asr1": ("asr_train_asr_group", "decode_decode_asr", [f"test_{x}" for x in MTEDX_LANGS], "wer"),
    "st1": (
        "st_train_st_group_asrinit",
        "decode_decode_st",
        [f"test_{p}" for p in MTEDX_ST_TRAINED + MTEDX_ST_ZERO_SHOT],
        "bleu",
    ),
}


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory):
    dest = tmp_path_factory.mktemp("mtedx_real")
    env = {"MTEDX": str(mtedx_release(dest / "mtedx"))}
    recipes = {task: make_recipe_copy("mtedx", task, dest) for task in RUNS}
    for recipe in recipes.values():
        out = run(recipe, SMOKE, env=env)
        assert out.returncode == 0, out.stderr[-4000:]
    return recipes


@pytest.mark.parametrize("task", list(RUNS))
def test_every_language_or_direction_is_decoded_and_scored(real_runs, task):
    recipe = real_runs[task]
    exp, decode, test_sets, metric = RUNS[task]
    for dset in test_sets:
        refs = read_table(recipe / "data" / dset / "text")
        hyps = (recipe / "exp" / exp / decode / dset / "text").read_text().splitlines()
        assert [line.split(" ", 1)[0] for line in hyps] == sorted(refs), dset
        result = recipe / "exp" / exp / decode / dset / f"score_{metric}" / "result.json"
        assert json.loads(result.read_text())[metric] >= 0
    assert all(dset in (recipe / "exp" / "RESULTS.md").read_text() for dset in test_sets)


def test_asr_averages_its_last_ten_epochs_and_starts_the_st_encoder(real_runs):
    exp = real_runs["asr1"] / "exp" / "asr_train_asr_group"
    assert (exp / "last10.pth").exists()
    config = yaml.safe_load((exp / "config.yaml").read_text())
    assert config["max_epoch"] == 10 and config["model_conf"]["task_tags"] == MTEDX_LANGS
    st = real_runs["st1"] / "exp" / "st_train_st_group_asrinit"
    command = (st / "train.log").read_text().splitlines()[0]
    model = "../asr1/exp/asr_train_asr_group/valid.acc.ave.pth"
    assert f"--init_param {model}:normalize:normalize {model}:encoder:encoder" in command
