"""egs/mtedx/asr1 then egs/mtedx/st1 in their real mode (MTEDX set) end to end as smoke runs (--smoke true,
README "Smoke runs") on a release-layout corpus of all 8 languages and 13 directions: group head selection
over the languages, averaged over the last 10 epochs (ASR), and the ST model whose encoder starts from it;
then the recipes' other real modes in the same runs: the adapter models (ASR per language, ST per direction,
--tasks directions) started from the shared models, and the multi-domain models (--tasks domains: head
selection, and adapters on a joint shared model) with CoVoST 2 and Europarl-ST added, each decoding a few of
the test sets it lists."""

import json
from pathlib import Path

import pytest
import torch
import yaml
from real_fixtures import (
    MTEDX_LANGS,
    MTEDX_ST_TRAINED,
    MTEDX_ST_ZERO_SHOT,
    mtedx_other_domains,
    mtedx_release,
)
from recipe_fixture import echo_recipe, echoed_args, make_recipe_copy, read_table, run

from espnet_ext.data.domains import test_sets as domain_test_sets
from espnet_ext.nets.adapters import is_adapter_parameter

SMOKE = ["--smoke", "true", "--nj", "1", "--inference_nj", "1", "--train_num_threads", "1"]
# recipe -> (experiment, decoding, test sets run.sh lists, test sets decoded here, metric). The main runs
# decode a few of the sets they list, as the modes below do: decoding and scoring cost seconds of CPU a set,
# not coverage (test_main_run_lists_every_test_set checks the lists). Their sets are those the modes that start
# from their dumps (--stage 6 / 9) decode, and a zero-shot direction.
RUNS = {
    "asr1": (
        "asr_train_asr_group",
        "decode_decode_asr",
        [f"test_{x}" for x in MTEDX_LANGS],
        ["test_ar", "test_de", "test_ru"],
        "wer",
    ),
    "st1": (
        "st_train_st_group_asrinit",
        "decode_decode_st",
        [f"test_{p}" for p in MTEDX_ST_TRAINED + MTEDX_ST_ZERO_SHOT],
        ["test_el-en", "test_fr-pt", "test_it-en"],
        "bleu",
    ),
}


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory):
    dest = tmp_path_factory.mktemp("mtedx_real")
    env = {"MTEDX": str(mtedx_release(dest / "mtedx"))}
    recipes = {task: make_recipe_copy("mtedx", task, dest) for task in RUNS}
    for task, recipe in recipes.items():
        out = run(recipe, [*SMOKE, "--test_sets", " ".join(RUNS[task][3])], env=env)
        assert out.returncode == 0, out.stderr[-4000:]
    return recipes


@pytest.mark.parametrize("task", list(RUNS))
def test_main_run_decodes_and_scores_its_test_sets(real_runs, task):
    exp, decode, _, decoded, metric = RUNS[task]
    _decoded_and_scored(real_runs[task], exp, decode, decoded, metric)


@pytest.mark.parametrize("task", list(RUNS))
def test_main_run_lists_every_test_set(tmp_path, task):
    """What run.sh asks of its pipeline with no options (the pipeline replaced by a script printing it):
    every language (ASR) or direction, trained and zero-shot (ST)."""
    _lists(tmp_path, task, [], RUNS[task][2], RUNS[task][3])


def test_asr_averages_its_last_ten_epochs_and_starts_the_st_encoder(real_runs):
    exp = real_runs["asr1"] / "exp" / "asr_train_asr_group"
    assert (exp / "last10.pth").exists()
    config = yaml.safe_load((exp / "config.yaml").read_text())
    assert config["max_epoch"] == 10 and config["model_conf"]["task_tags"] == MTEDX_LANGS
    st = real_runs["st1"] / "exp" / "st_train_st_group_asrinit"
    command = (st / "train.log").read_text().splitlines()[0]
    model = "../asr1/exp/asr_train_asr_group/valid.acc.ave.pth"
    # the encoder (utterance CMVN, the configs' normalize, has no state to carry over)
    assert f"--init_param {model}:encoder:encoder " in command


# The other real modes, each one run.sh invocation in the recipes above (their data, token lists and
# statistics: --stage past what is done), in the order they depend on each other: the shared models (training
# and its averages only, --skip_eval), the adapter models started from them, then the multi-domain models on
# data prepared anew with CoVoST 2 and Europarl-ST added (local/data.sh --other_domains, from stage 1).
# Each decodes a few of the test sets its run.sh lists (--test_sets after run.sh's own; one of each kind:
# languages, trained and zero-shot directions, domains): decoding and scoring cost seconds of CPU a set, the
# runs above decode every mTEDx set, and test_each_mode_lists_its_real_test_sets checks the lists.
OTHER_DOMAINS = ["covost", "europarl"]
ASR_SETS, ST_SETS = RUNS["asr1"][2], RUNS["st1"][2]
MODES = {  # mode -> (recipe, options, experiment, test sets run.sh lists, test sets decoded here)
    "asr_shared": ("asr1", ["--asr_config", "conf/train_asr_shared.yaml", "--stage", "9", "--skip_eval", "true"],
                   "asr_train_asr_shared", ASR_SETS, []),
    "asr_adapter": ("asr1", ["--asr_config", "conf/train_asr_adapter.yaml", "--stage", "9"],
                    "asr_train_asr_adapter", ASR_SETS, ["test_ar", "test_ru"]),
    "st_shared": ("st1", ["--st_config", "conf/train_st_shared.yaml", "--stage", "6", "--skip_eval", "true",
                          "--asr_init", "../asr1/exp/asr_train_asr_shared/valid.acc.ave.pth"],
                  "st_train_st_shared_asrinit", ST_SETS, []),
    "st_directions": ("st1", ["--tasks", "directions", "--stage", "6"], "st_train_st_adapter",
                      [f"test_{p}" for p in MTEDX_ST_TRAINED],  # no adapter for a zero-shot direction
                      ["test_el-en", "test_fr-pt"]),
    "asr_domains": ("asr1", ["--tasks", "domains", "--asr_config", "conf/train_asr_group_domains.yaml"],
                    "asr_train_asr_group_domains", ASR_SETS + domain_test_sets("asr", OTHER_DOMAINS),
                    ["test_ar", "test_covost_ru", "test_europarl_de"]),
    "st_domains": ("st1", ["--tasks", "domains"], "st_train_st_group_domains",
                   ST_SETS + domain_test_sets("st", OTHER_DOMAINS),
                   ["test_el-en", "test_pt-es", "test_covost_ru-en", "test_europarl_fr-pt"]),
    # Tables 3 and 5's adapter rows: per-domain adapters on the joint shared model of the combined data (the
    # shared ST model's encoder from scratch here: the ASR init is the modes' above)
    "asr_shared_domains": ("asr1", ["--tasks", "domains", "--asr_config", "conf/train_asr_shared_domains.yaml",
                                    "--stage", "9", "--skip_eval", "true"],
                           "asr_train_asr_shared_domains",
                           ASR_SETS + domain_test_sets("asr", OTHER_DOMAINS), []),
    "asr_adapter_domains": ("asr1", ["--tasks", "domains", "--asr_config", "conf/train_asr_adapter_domains.yaml",
                                     "--stage", "9", "--asr_args",
                                     "--init_param exp/asr_train_asr_shared_domains/last10.pth"],
                            "asr_train_asr_adapter_domains",
                            ASR_SETS + domain_test_sets("asr", OTHER_DOMAINS), ["test_de", "test_europarl_de"]),
    "st_shared_domains": ("st1", ["--st_config", "conf/train_st_shared.yaml", "--other_domains", "covost europarl",
                                  "--st_tag", "shared_domains", "--asr_init", "", "--stage", "6",
                                  "--skip_eval", "true"],
                          "st_shared_domains", ST_SETS + domain_test_sets("st", OTHER_DOMAINS), []),
    "st_adapter_domains": ("st1", ["--tasks", "domains", "--st_config", "conf/train_st_adapter_domains.yaml",
                                   "--stage", "6", "--st_args", "--init_param exp/st_shared_domains/valid.acc.ave.pth"],
                           "st_train_st_adapter_domains",
                           ST_SETS + domain_test_sets("st", OTHER_DOMAINS),
                           ["test_el-en", "test_europarl_fr-pt"]),
}  # fmt: skip


@pytest.mark.parametrize("mode", list(MODES))
def test_each_mode_lists_its_real_test_sets(tmp_path, mode):
    """What run.sh asks of its pipeline in each mode (the pipeline replaced by a script printing it): every
    test set of the real setup; the sets decoded below are among them."""
    task, args, _, listed, decoded = MODES[mode]
    _lists(tmp_path, task, args, listed, decoded)


def _lists(
    tmp_path: Path, task: str, args: list[str], listed: list[str], decoded: list[str]
) -> None:
    recipe = echo_recipe("mtedx", task, {"asr1": "asr.sh", "st1": "st.sh"}[task], tmp_path)
    given = echoed_args(recipe, args, env={"MTEDX": str(tmp_path / "mtedx")})
    assert given["--test_sets"].split() == listed
    assert set(decoded) <= set(listed)


@pytest.fixture(scope="module")
def mode_runs(real_runs, tmp_path_factory):
    """{mode: completed run.sh} of MODES in the recipes of real_runs (a failed mode does not stop the
    others; each test checks its own)."""
    release = real_runs["asr1"].parents[2] / "mtedx"
    dest = tmp_path_factory.mktemp("mtedx_other_domains")
    domains = {task: mtedx_other_domains(dest, release, task) for task in ("asr", "st")}
    runs = {}
    for mode, (task, args, _, _, decoded) in MODES.items():
        if "--tasks" in args and args[args.index("--tasks") + 1] == "domains":
            args = [*args, "--local_data_opts", f"--other_domains {domains[task[:-1]]}"]
        if decoded:
            args = [*args, "--test_sets", " ".join(decoded)]
        runs[mode] = run(
            real_runs[task], [*SMOKE, *args], env={"MTEDX": str(release)}, timeout=3600
        )
    return runs


def _decoded_and_scored(
    recipe: Path, exp: str, decode: str, test_sets: list[str], metric: str
) -> None:
    for dset in test_sets:
        refs = read_table(recipe / "data" / dset / "text")
        hyps = (recipe / "exp" / exp / decode / dset / "text").read_text().splitlines()
        assert [line.split(" ", 1)[0] for line in hyps] == sorted(refs), dset
        result = recipe / "exp" / exp / decode / dset / f"score_{metric}" / "result.json"
        assert json.loads(result.read_text())[metric] >= 0
    results = (recipe / "exp" / "RESULTS.md").read_text()
    assert exp in results and all(dset in results for dset in test_sets)


def _frozen_as_in(adapter_model: Path, shared_model: Path) -> None:
    """Every tensor of the adapter model but its adapters is the shared model's (trained frozen)."""
    adapter = torch.load(adapter_model, map_location="cpu")
    shared = torch.load(shared_model, map_location="cpu")
    frozen = {k for k in adapter if not is_adapter_parameter(k)}
    assert frozen == set(shared) and len(frozen) < len(adapter)
    for key in frozen:
        torch.testing.assert_close(adapter[key], shared[key], rtol=1e-6, atol=1e-7, msg=key)


@pytest.mark.parametrize("mode", [m for m, (*_, decoded) in MODES.items() if decoded])
def test_mode_decodes_and_scores_its_test_sets(real_runs, mode_runs, mode):
    task, _, exp, _, test_sets = MODES[mode]
    assert mode_runs[mode].returncode == 0, mode_runs[mode].stderr[-4000:]
    _, decode, _, _, metric = RUNS[task]
    _decoded_and_scored(real_runs[task], exp, decode, test_sets, metric)


def test_asr_adapters_start_from_the_shared_model_the_config_names(real_runs, mode_runs):
    for mode in ("asr_shared", "asr_adapter"):
        assert mode_runs[mode].returncode == 0, mode_runs[mode].stderr[-4000:]
    exp = real_runs["asr1"] / "exp"
    config = yaml.safe_load((exp / "asr_train_asr_adapter" / "config.yaml").read_text())
    # conf/train_asr_adapter.yaml's init_param: the shared run's average of its last 10 epochs
    assert config["init_param"] == ["exp/asr_train_asr_shared/last10.pth"]
    assert config["model_conf"]["train_adapters_only"] is True
    _frozen_as_in(
        exp / "asr_train_asr_adapter" / "last10.pth", exp / "asr_train_asr_shared" / "last10.pth"
    )


def test_st_adapters_start_from_the_shared_st_model(real_runs, mode_runs):
    for mode in ("asr_shared", "st_shared", "st_directions"):
        assert mode_runs[mode].returncode == 0, mode_runs[mode].stderr[-4000:]
    st, asr = real_runs["st1"] / "exp", "../asr1/exp/asr_train_asr_shared/valid.acc.ave.pth"
    # the shared ST model's encoder from the shared ASR model, the adapters from the shared ST model
    command = (st / "st_train_st_shared_asrinit" / "train.log").read_text().splitlines()[0]
    assert f"--init_param {asr}:encoder:encoder " in command
    config = yaml.safe_load((st / "st_train_st_adapter" / "config.yaml").read_text())
    assert config["init_param"] == ["exp/st_train_st_shared_asrinit/valid.acc.ave.pth"]
    assert config["model_conf"]["task_tags"] == MTEDX_ST_TRAINED
    _frozen_as_in(
        st / "st_train_st_adapter" / "valid.acc.ave.pth",
        st / "st_train_st_shared_asrinit" / "valid.acc.ave.pth",
    )


@pytest.mark.parametrize("task", ["asr", "st"])
def test_domain_adapters_start_from_the_joint_shared_model(real_runs, mode_runs, task):
    shared, adapter = MODES[f"{task}_shared_domains"], MODES[f"{task}_adapter_domains"]
    for mode in (f"{task}_shared_domains", f"{task}_adapter_domains"):
        assert mode_runs[mode].returncode == 0, mode_runs[mode].stderr[-4000:]
    exp = real_runs[adapter[0]] / "exp"
    # each recipe's real inference model
    model = {"asr": "last10.pth", "st": "valid.acc.ave.pth"}[task]
    config = yaml.safe_load((exp / adapter[2] / "config.yaml").read_text())
    assert config["init_param"] == [f"exp/{shared[2]}/{model}"]
    assert config["model_conf"]["train_adapters_only"] is True
    _frozen_as_in(exp / adapter[2] / model, exp / shared[2] / model)


@pytest.mark.parametrize(
    "mode", ["asr_domains", "st_domains", "asr_adapter_domains", "st_adapter_domains"]
)
def test_domains_select_by_domain_on_the_combined_data(real_runs, mode_runs, mode):
    assert mode_runs[mode].returncode == 0, mode_runs[mode].stderr[-4000:]
    recipe = real_runs[MODES[mode][0]]
    config = yaml.safe_load((recipe / "exp" / MODES[mode][2] / "config.yaml").read_text())
    assert config["model_conf"]["task_tags"] == ["tedx", *OTHER_DOMAINS]
    assert any(
        str(path).endswith("train_filtered/domain_id")
        for path, name, _ in config["train_data_path_and_name_and_type"]
        if name == "task_id"
    )
    domains = set(read_table(recipe / "data" / "train" / "domain").values())
    assert domains == {"tedx", *OTHER_DOMAINS}
