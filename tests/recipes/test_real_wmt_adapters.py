"""egs/wmt/mt1's multilingual adapter model in real mode (WMT set) end to end as a smoke run (--smoke true,
README "Smoke runs") on the release-layout corpus: the shared M2O model of the 14 languages trained first
(--skip_eval: its training and model only), then conf/train_mt_adapter_m2o.yaml, which run.sh starts from
that shared model of the same mode (--init_param, its header) and trains with it frozen; decoded and scored
on two of the 14 test sets run.sh lists (the M2O head-selection model of test_real_wmt_europarl.py decodes two
too; each is one data dir and one BLEU per language, so more would cost CPU, not coverage)."""

import json

import pytest
import torch
import yaml
from real_fixtures import WMT_LANGS, wmt_release
from recipe_fixture import echo_recipe, echoed_args, make_recipe_copy, read_table, run

from espnet_ext.nets.adapters import is_adapter_parameter

SMOKE = ["--smoke", "true", "--nj", "1", "--inference_nj", "1", "--mode", "multilingual_m2o"]
SHARED, ADAPTER = "mt_train_mt_shared_m2o", "mt_train_mt_adapter_m2o"
TEST_SETS = [f"m2o_test_{x}" for x in WMT_LANGS]  # what run.sh lists
# what the adapter run decodes (--test_sets after run.sh's)
DECODED = ["m2o_test_cs", "m2o_test_zh"]
ADAPTER_ARGS = ["--mt_config", "conf/train_mt_adapter_m2o.yaml", "--stage", "8"]


@pytest.fixture(scope="module")
def adapter_runs(tmp_path_factory):
    """(recipe, {"shared": run, "adapter": run}): the adapter model from the shared one's statistics on."""
    dest = tmp_path_factory.mktemp("wmt_adapters")
    env = {"WMT": str(wmt_release(dest / "wmt"))}
    recipe = make_recipe_copy("wmt", "mt1", dest)
    runs = {
        "shared": run(
            recipe,
            [*SMOKE, "--mt_config", "conf/train_mt_shared_m2o.yaml", "--skip_eval", "true"],
            env=env,
        )
    }
    runs["adapter"] = run(
        recipe, [*SMOKE, *ADAPTER_ARGS, "--test_sets", " ".join(DECODED)], env=env
    )
    return recipe, runs


def test_run_sh_lists_every_language_for_the_adapter_model(tmp_path):
    recipe = echo_recipe("wmt", "mt1", "mt.sh", tmp_path)
    given = echoed_args(recipe, [*SMOKE, *ADAPTER_ARGS], env={"WMT": str(tmp_path / "wmt")})
    assert given["--test_sets"].split() == TEST_SETS
    assert set(DECODED) <= set(TEST_SETS)


def test_adapter_model_decodes_and_scores_its_test_sets(adapter_runs):
    recipe, runs = adapter_runs
    for name, out in runs.items():
        assert out.returncode == 0, f"{name}: {out.stderr[-4000:]}"
    exp = recipe / "exp" / "multilingual_m2o" / ADAPTER
    decodes = [p for p in exp.glob("decode_*") if p.is_dir()]
    assert len(decodes) == 1, decodes
    for dset in DECODED:
        refs = read_table(recipe / "dump" / "multilingual_m2o" / "raw" / dset / "text")
        hyps = (decodes[0] / dset / "text").read_text().splitlines()
        assert [line.split(" ", 1)[0] for line in hyps] == sorted(refs), dset
        bleu = json.loads((decodes[0] / dset / "score_bleu" / "result.json").read_text())["bleu"]
        assert bleu >= 0
    results = (recipe / "exp" / "multilingual_m2o" / "RESULTS.md").read_text()
    assert ADAPTER in results and all(dset in results for dset in DECODED)
    # the shared model was trained only: nothing decoded
    assert not list((recipe / "exp" / "multilingual_m2o" / SHARED).glob("decode_*"))


def test_adapter_model_starts_from_the_shared_model_and_keeps_it_frozen(adapter_runs):
    recipe, runs = adapter_runs
    for name, out in runs.items():
        assert out.returncode == 0, f"{name}: {out.stderr[-4000:]}"
    exp = recipe / "exp" / "multilingual_m2o"
    config = yaml.safe_load((exp / ADAPTER / "config.yaml").read_text())
    assert config["init_param"] == [f"exp/multilingual_m2o/{SHARED}/valid.acc.ave.pth"]
    assert config["model_conf"]["train_adapters_only"] is True
    assert config["model_conf"]["task_tags"] == WMT_LANGS
    adapter = torch.load(exp / ADAPTER / "valid.acc.ave.pth", map_location="cpu")
    shared = torch.load(exp / SHARED / "valid.acc.ave.pth", map_location="cpu")
    frozen = {k for k in adapter if not is_adapter_parameter(k)}
    assert frozen == set(shared) and len(frozen) < len(adapter)
    for key in frozen:
        torch.testing.assert_close(adapter[key], shared[key], rtol=1e-6, atol=1e-7, msg=key)
