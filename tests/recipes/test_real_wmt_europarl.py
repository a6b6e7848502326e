"""egs/wmt/mt1's seven real modes (WMT set) and egs/europarl/asr1's default De-En path (EUROPARL_ST, TEDLIUM
and WMT set) end to end as smoke runs (--smoke true, README "Smoke runs") on corpora in the release layouts:
the multilingual head-selection models, the three LegoNN pairs with their newstest sets as WMT names them,
the compose -> decode -> fine-tune -> decode path, the swap matrix of two De-En seeds, and the Europarl
LegoNN ASR that reuses the De-En decoder trained here. The multilingual modes decode two of the 14 test sets
run.sh lists (one data dir and one BLEU per language: decoding more costs CPU, not coverage); an echo run
checks that run.sh lists all 14."""

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from real_fixtures import WMT_DEV, WMT_LANGS, WMT_TEST, wmt_release
from recipe_fixture import echo_recipe, echoed_args, make_recipe_copy, read_table, run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SMOKE = ["--smoke", "true", "--nj", "1", "--inference_nj", "1"]
DEEN = "train_lego_wemb_deroen"
ROEN = "train_lego_ctc_deroen"  # Table III's encoder-only module (§IV-B3, §V-C1)
# of WMT_LANGS, what the multilingual modes' smoke runs decode (--test_sets after run.sh's)
DECODED = ["cs", "zh"]
# The En-De test sets run.sh lists (§V-B: newstest2011-16 without 2013); lego_ende decodes one of each naming
# (WMT names its sets with the pair from 2014 on: newstest2012-src.en.sgm, newstest2014-deen-src.en.sgm), data
# preparation makes all of them (test_lego_ende_prepares_and_lists_every_newstest_set)
ENDE_TESTS = [f"ende_test_newstest{y}" for y in (2011, 2012, 2014, 2015, 2016)]
ENDE_DECODED = ["ende_test_newstest2012", "ende_test_newstest2014"]
# mode -> (extra options, experiment under exp/<mode>, test sets)
MODES = {
    f"multilingual_{d}": (
        ["--test_sets", " ".join(f"{d}_test_{x}" for x in DECODED)],
        f"mt_train_mt_group_{d}",
        [f"{d}_test_{x}" for x in DECODED],
    )
    for d in ("m2o", "o2m")
} | {
    "lego_ende": (
        ["--test_sets", " ".join(ENDE_DECODED)],
        "mt_train_lego_wemb_ende",
        ENDE_DECODED,
    ),
    "lego_deen": ([], f"mt_{DEEN}", ["deen_test_newstest2019"]),
    "lego_roen": ([], f"mt_{ROEN}", ["roen_test_newstest2016"]),
}


@pytest.fixture(scope="module")
def wmt_runs(tmp_path_factory):
    """The WMT recipe after every mode, with egs/europarl/asr1 beside it: (dest, env, {mode: run})."""
    dest = tmp_path_factory.mktemp("wmt_real")
    env = {
        "WMT": str(wmt_release(dest / "wmt")),
        "EUROPARL_ST": str(FIXTURES / "europarl_st" / "v1.1"),
        "TEDLIUM": str(FIXTURES / "tedlium" / "TEDLIUM_release-3"),
    }
    recipe = make_recipe_copy("wmt", "mt1", dest)
    make_recipe_copy("europarl", "asr1", dest)
    runs = {}
    for mode, (args, _, _) in MODES.items():
        runs[mode] = run(recipe, ["--mode", mode, *SMOKE, *args], env=env)
    # a second De-En seed (the family of the swap matrix), on lego_deen's data
    runs["seed1"] = run(
        recipe,
        [
            "--mode",
            "lego_deen",
            *SMOKE,
            "--stage",
            "7",
            "--mt_tag",
            "seed1",
            "--mt_args",
            "--seed 1",
        ],
        env=env,
    )
    runs["lego_swap"] = run(
        recipe, ["--mode", "lego_swap", *SMOKE, "--swap_tags", f"{DEEN} seed1"], env=env
    )
    runs["lego_compose"] = run(recipe, ["--mode", "lego_compose", *SMOKE], env=env)
    return dest, env, runs


def _decoded(recipe: Path, exp: Path, test_sets: list[str], data_mode: str) -> None:
    decodes = [p for p in exp.glob("decode_*") if p.is_dir()]
    assert len(decodes) == 1, decodes
    for dset in test_sets:
        refs = read_table(recipe / "dump" / data_mode / "raw" / dset / "text")
        hyps = (decodes[0] / dset / "text").read_text().splitlines()
        assert [line.split(" ", 1)[0] for line in hyps] == sorted(refs), dset
        assert (
            json.loads((decodes[0] / dset / "score_bleu" / "result.json").read_text())["bleu"] >= 0
        )


@pytest.mark.parametrize("mode", list(MODES))
def test_mode_trains_decodes_and_scores_every_test_set(wmt_runs, mode):
    dest, _, runs = wmt_runs
    assert runs[mode].returncode == 0, runs[mode].stderr[-4000:]
    recipe = dest / "egs" / "wmt" / "mt1"
    _, exp, test_sets = MODES[mode]
    _decoded(recipe, recipe / "exp" / mode / exp, test_sets, mode)
    config = yaml.safe_load((recipe / "exp" / mode / exp / "config.yaml").read_text())
    assert config["num_iters_per_epoch"] == 1
    if mode.startswith("lego_"):
        # the paper's moving window of 10 checkpoints, picked by validation BLEU
        assert (recipe / "exp" / mode / exp / "window10.valid.bleu.max.pth").exists()
        # lego_roen: the encoder-only model, decoded by its greedy CTC path; no decoder to export
        encoder_only = mode == "lego_roen"
        assert config["model"] == ("legonn_ctc" if encoder_only else "legonn")
        assert (recipe / "exp" / mode / exp / "modules" / "encoder0.pt").exists()
        assert (recipe / "exp" / mode / exp / "modules" / "decoder.pt").exists() is not encoder_only


@pytest.mark.parametrize("split, sets", [("valid", WMT_DEV), ("test", WMT_TEST)])
def test_multilingual_valid_and_test_are_each_language_s_own_set_only(wmt_runs, split, sets):
    """Of every set in <x>-en/dev/ and <x>-en/test/ (the fixture has an older one beside each), the
    language's own (local/data.sh --multilingual_dev, --multilingual_test)."""
    recipe = wmt_runs[0] / "egs" / "wmt" / "mt1"
    for direction in ("m2o", "o2m"):
        for x in WMT_LANGS:
            ids = list(read_table(recipe / "data" / f"{direction}_{split}_{x}" / "text"))
            assert ids == [f"{x}-{sets[x]}-1-news-0001"], (direction, x)


@pytest.mark.parametrize("direction", ["m2o", "o2m"])
def test_run_sh_scores_every_language_s_test_set(tmp_path, direction):
    recipe = echo_recipe("wmt", "mt1", "mt.sh", tmp_path)
    args = ["--mode", f"multilingual_{direction}", *SMOKE]
    given = echoed_args(recipe, args, env={"WMT": str(tmp_path / "wmt")})
    assert given["--test_sets"].split() == [f"{direction}_test_{x}" for x in WMT_LANGS]


def test_lego_ende_prepares_and_lists_every_newstest_set(wmt_runs, tmp_path):
    recipe = wmt_runs[0] / "egs" / "wmt" / "mt1"
    for dset in ENDE_TESTS:
        assert read_table(recipe / "data" / dset / "text"), dset
    echo = echo_recipe("wmt", "mt1", "mt.sh", tmp_path)
    given = echoed_args(echo, ["--mode", "lego_ende", *SMOKE], env={"WMT": str(tmp_path / "wmt")})
    assert given["--test_sets"].split() == ENDE_TESTS


@pytest.mark.parametrize(
    "args, message",
    [(["--langs", "cs,de"], "cs-en/dev: no cs-en corpus newstest2018 here (found: newstest2011)"),
     (["--langs", "de,es"], "es-en/test: no es-en corpus newstest2013 here (found: newstest2011)"),
     (["--langs", "de,xx"], "key '--multilingual_dev': names no dev set for language 'xx'"),
     (["--langs", "de,es", "--multilingual_test", "de=newstest2019"],
      "key '--multilingual_test': names no test set for language 'es'")],
)  # fmt: skip
def test_multilingual_data_refuses_a_missing_dev_or_test_set(tmp_path, args, message):
    """Before any training corpus is read."""
    release = wmt_release(tmp_path / "wmt")
    for path in [*(release / "multilingual" / "cs-en" / "dev").glob("newstest2018-*"),
                 *(release / "multilingual" / "es-en" / "test").glob("newstest2013-*")]:  # fmt: skip
        path.unlink()
    recipe = make_recipe_copy("wmt", "mt1", tmp_path)
    out = subprocess.run(
        ["local/data.sh", "--task", "multilingual_m2o", *args],
        cwd=recipe, env={**os.environ, "WMT": str(release)}, capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode != 0 and message in out.stderr, out.stderr[-3000:]
    assert not list((recipe / "data").glob("m2o_train*"))


def test_compose_decodes_then_fine_tunes_and_decodes_again(wmt_runs):
    dest, _, runs = wmt_runs
    assert runs["lego_compose"].returncode == 0, runs["lego_compose"].stderr[-4000:]
    recipe = dest / "egs" / "wmt" / "mt1"
    for tag in (f"composed_{DEEN}", f"composed_{DEEN}_finetuned"):
        _decoded(
            recipe,
            recipe / "exp" / "lego_compose" / f"mt_{tag}",
            ["roen_test_newstest2016"],
            "lego_roen",
        )
    # Table III: the encoder trained with CTC alone + the De-En LegoNN decoder
    import torch

    composed = torch.load(
        recipe / "exp" / "lego_compose" / f"mt_composed_{DEEN}" / "model.pth", map_location="cpu"
    )
    for mode, name, part in (("lego_roen", ROEN, "encoder."), ("lego_deen", DEEN, "decoder.")):
        trained = torch.load(
            recipe / "exp" / mode / f"mt_{name}" / "window10.valid.bleu.max.pth", map_location="cpu"
        )
        keys = [k for k in trained if k.startswith(part)]
        assert keys and all(torch.equal(composed[k], trained[k]) for k in keys), mode


def test_swap_matrix_of_two_seeds(wmt_runs):
    dest, _, runs = wmt_runs
    assert runs["seed1"].returncode == 0, runs["seed1"].stderr[-4000:]
    assert runs["lego_swap"].returncode == 0, runs["lego_swap"].stderr[-4000:]
    out = dest / "egs" / "wmt" / "mt1" / "exp" / "lego_swap" / f"{DEEN}__seed1"
    assert any(out.iterdir())
    # the N^2 decodings ran as one job of the backend, on the CPU unless --gpu_inference true
    log = (out.parent / "log" / f"{DEEN}__seed1.log").read_text()
    assert "espnet_ext.analysis.lego_swap" in log.splitlines()[0] and "--device cpu" in log


def test_europarl_default_de_en_path(wmt_runs):
    """egs/europarl/asr1's real mode with the De-En decoder of ../../wmt/mt1 (trained above)."""
    dest, env, _ = wmt_runs
    recipe = dest / "egs" / "europarl" / "asr1"
    # one job per stage (the real --asr_opts with nj 1; --inference_nj is legonn.sh's, passed on to asr.sh)
    asr_opts = "--nj 1 --max_frames 3000 --inference_model valid.acc.ave.pth"
    opts = ["--inference_nj", "1", "--asr_opts", asr_opts, "--mt_opts", " ".join(SMOKE[2:])]
    out = run(recipe, [*SMOKE[:2], *opts], env=env)
    assert out.returncode == 0, out.stderr[-4000:]
    # §V-C2: the Europarl and TED modules of the real mode are encoder-only models trained with CTC alone
    for exp in ("asr_legonn", "ted/asr_ted_legonn"):
        config = yaml.safe_load((recipe / "exp" / exp / "config.yaml").read_text())
        assert (config["model"], config["decoder"]) == ("legonn_ctc", None), exp
    assert (recipe / "exp" / "asr_composed_iv" / "model.pth").exists()
    tables = (recipe / "exp" / "RESULTS_legonn.md").read_text()
    assert "LegoNN encoder only" in tables and "its own decoder" not in tables
