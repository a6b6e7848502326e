"""egs/mtedx/st1's configs and sweeps say what the head-selection paper's Tables 4 and 5 define."""

import shlex
from pathlib import Path

import pytest
import yaml

from espnet_ext.analysis.sweep import load_sweep
from espnet_ext.nets.adapters import ADAPTER_KEY
from espnet_ext.registry import build_model
from tests.configs.separate_runs import check_separate_runs, last_value

RECIPE = Path(__file__).resolve().parents[2] / "egs" / "mtedx" / "st1"
CONFIGS = sorted(p.name for p in (RECIPE / "conf").glob("train_st_*.yaml"))
DOMAINS = {"": ["tedx", "covost", "europarl"], "_mini": ["tedx", "other"]}


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    path = tmp_path_factory.mktemp("tokens") / "tokens.txt"
    path.write_text("\n".join(["<blank>", "<unk>", "a", "b", "<sos/eos>"]) + "\n")
    return path


def build(name: str, tokens: Path):
    token_args = ["--token_list", str(tokens), "--src_token_list", str(tokens)]
    args = ["--config", str(RECIPE / "conf" / name), *token_args, "--token_type", "char"]
    return build_model("st", [*args, "--src_token_type", "char", "--input_size", "80"])


@pytest.mark.parametrize("name", CONFIGS)
def test_every_config_builds_with_one_task_per_tag(name, tokens):
    model = build(name, tokens)
    config = yaml.safe_load((RECIPE / "conf" / name).read_text())
    kind = name.removeprefix("train_st_").removesuffix(".yaml").removesuffix("_mini")
    selection = [n for n, _ in model.named_parameters() if n.endswith("selection_logits")]
    adapters = [n for n, _ in model.named_parameters() if ADAPTER_KEY in n]
    assert bool(selection) == kind.startswith(("group", "subset"))
    assert bool(adapters) == kind.startswith("adapter")
    model_conf = config["model_conf"]
    if kind.endswith("_domains"):  # Table 5: the task is the domain, mTEDx's first
        scale = "_mini" if name.endswith("_mini.yaml") else ""
        assert model_conf["task_tags"] == DOMAINS[scale]
    for side in ("encoder", "decoder"):
        tags = model_conf.get(f"{side}_task_tags", model_conf.get("task_tags"))
        if any(n.startswith(side) for n in selection) or adapters:
            assert config[f"{side}_conf"]["num_tasks"] == len(tags)
    if kind.endswith("_enc"):  # Table 6's ablation: selection in the encoder only
        assert selection and all(n.startswith("encoder.") for n in selection)


@pytest.mark.parametrize("kind", ["group", "subset", "adapter"])
@pytest.mark.parametrize("scale", ["", "_mini"])
def test_a_domain_config_is_its_language_config_but_for_the_tasks(kind, scale):
    """The same model and training as Table 4's, so Tables 4 and 5 differ in the tasks only."""
    ignore = ("num_tasks", "task_tags", "encoder_task_tags", "decoder_task_tags")

    def without_tasks(name):
        config = yaml.safe_load((RECIPE / "conf" / name).read_text())
        for part in ("encoder_conf", "decoder_conf", "model_conf"):
            config[part] = {k: v for k, v in config[part].items() if k not in ignore}
        # the model an adapter starts from: the direction adapters' names the shared run, the domain
        # adapters get the joint model at run time (--st_args "--init_param ...")
        config.pop("init_param", None)
        return config

    assert without_tasks(f"train_st_{kind}_domains{scale}.yaml") == without_tasks(
        f"train_st_{kind}{scale}.yaml"
    )


def test_table5_mini_separate_models_train_on_one_domain_each():
    check_separate_runs(
        load_sweep(RECIPE / "conf" / "sweeps" / "table5_mini.yaml"),
        "--st_stats_dir",
        "conf/train_st_shared_mini.yaml",
    )


def test_table5_mini_encoders_start_from_table3s_model_of_the_same_row():
    sweep = load_sweep(RECIPE / "conf" / "sweeps" / "table5_mini.yaml")
    asr_sweep = load_sweep(RECIPE.parent / "asr1" / "conf" / "sweeps" / "table3_mini.yaml")
    for run in ("joint", "group", "subset", "separate_tedx", "separate_other"):
        (train, *_) = sweep.invocations(run)
        train = shlex.split(" ".join(train))
        assert last_value(train, "--asr_init") == f"../asr1/exp_domains/asr_{run}/valid.acc.ave.pth"
        (asr_train, *_) = asr_sweep.invocations(run)  # the ASR sweep trains that tag ...
        asr_train = shlex.split(" ".join(asr_train))
        assert last_value(asr_train, "--expdir") == "exp_domains"
        for option in ("--train_set", "--tasks"):  # ... on the same data, with the same task kind
            if option in train or option in asr_train:
                assert last_value(train, option) == last_value(asr_train, option)
    (adapter, *_) = sweep.invocations("adapter")  # from the joint ST model, not from an ASR model
    assert last_value(adapter, "--asr_init") == ""


def test_table5_mini_adapters_start_from_the_prepared_joint_model():
    sweep = load_sweep(RECIPE / "conf" / "sweeps" / "table5_mini.yaml")
    joint = next(p for p in sweep.prepare if "--st_tag joint" in p)
    assert "conf/train_st_shared_mini.yaml" in joint and "--stop_stage 8" in joint
    (train, *_) = sweep.invocations("adapter")
    assert (
        train[train.index("--st_args") + 1] == "--init_param exp_domains/st_joint/valid.acc.ave.pth"
    )
    for run in ("group", "subset", "adapter"):
        (train, *_) = sweep.invocations(run)
        assert train[train.index("--tasks") + 1] == "domains"
        assert f"conf/train_st_{run}_domains_mini.yaml" in train
    common = shlex.split(" ".join(sweep.invocations("joint")[0]))
    assert common[common.index("--other_domains") + 1] == "other"
    assert {s for s in sweep.sets if "other" in s} == {
        f"test_other_{d}" for d in ("es-en", "it-en", "it-es", "pt-es")
    }
