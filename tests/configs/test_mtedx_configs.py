"""egs/mtedx/asr1's configs and sweeps say what the head-selection paper's tables define (Tables 2, 6, Fig. 2)."""

import shlex
from pathlib import Path

import pytest
import yaml

from espnet_ext.analysis.sweep import load_sweep
from espnet_ext.nets.adapters import ADAPTER_KEY
from espnet_ext.registry import build_model
from tests.configs.separate_runs import check_separate_runs
from tests.recipes.recipe_fixture import echo_recipe, echoed_args

RECIPE = Path(__file__).resolve().parents[2] / "egs" / "mtedx" / "asr1"
CONFIGS = sorted(p.name for p in (RECIPE / "conf").glob("train_asr_*.yaml"))


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    path = tmp_path_factory.mktemp("tokens") / "tokens.txt"
    path.write_text("\n".join(["<blank>", "<unk>", "a", "b", "<sos/eos>"]) + "\n")
    return path


def build(name: str, tokens: Path, *extra: str):
    args = ["--config", str(RECIPE / "conf" / name), "--token_list", str(tokens)]
    return build_model("asr", [*args, "--token_type", "char", "--input_size", "80", *extra])


def selection_layers(model) -> dict[str, int]:
    """side -> the number of layers with head-selection logits."""
    names = [n for n, _ in model.named_parameters() if n.endswith("selection_logits")]
    return {side: sum(n.startswith(side) for n in names) for side in ("encoder", "decoder")}


@pytest.mark.parametrize("name", CONFIGS)
def test_every_config_builds_and_selects_heads_where_its_name_says(name, tokens):
    model = build(name, tokens)
    config = yaml.safe_load((RECIPE / "conf" / name).read_text())
    layers = (config["encoder_conf"]["num_blocks"], config["decoder_conf"]["num_blocks"])
    tasks = len(config["model_conf"]["task_tags"])
    kind = name.removeprefix("train_asr_").removesuffix(".yaml").removesuffix("_mini")
    expected = {
        "shared": (0, 0),
        "adapter": (0, 0),
        "group_enc": (layers[0], 0),
        "group_dec": (0, layers[1]),
    }.get(kind.removesuffix("_domains"), layers)
    assert tuple(selection_layers(model).values()) == expected
    for conf in (config["encoder_conf"], config["decoder_conf"]):
        assert conf.get("num_tasks", tasks) == tasks  # one task per language tag
    if kind.endswith("_domains"):  # Table 3: the task is the domain, mTEDx's first
        domains = (
            ["tedx", "other"] if name.endswith("_mini.yaml") else ["tedx", "covost", "europarl"]
        )
        assert config["model_conf"]["task_tags"] == domains
    if "adapter" in name:
        assert config["model_conf"]["train_adapters_only"] is True
        assert any(ADAPTER_KEY in n for n, _ in model.named_parameters())


def test_selection_adds_exactly_t_x_h_candidates_x_layers_logits(tokens):
    shared, group = build("train_asr_shared.yaml", tokens), build("train_asr_group.yaml", tokens)
    logits = sum(p.numel() for n, p in group.named_parameters() if n.endswith("selection_logits"))
    assert logits == 8 * 8 * (12 + 6)  # T = 8 languages, H' = 8, 12 encoder + 6 decoder layers
    # docs/head_selection.md's +3.55M: the H' - H = 4 extra candidates' q/k/v rows, 3 x 4 x d_k (d + 1) a layer
    extra = sum(p.numel() for p in group.parameters()) - sum(p.numel() for p in shared.parameters())
    assert extra - logits == 18 * 3 * 4 * 64 * 257 == 3_552_768
    shared_names = {n for n, _ in shared.named_parameters()}
    assert shared_names <= {n for n, _ in group.named_parameters()}  # same model, wider q/k/v


def test_adapter_starts_from_what_the_shared_run_decodes_with():
    for spec, model_file in (("table2.yaml", "last10.pth"), ("mini.yaml", "valid.acc.ave.pth")):
        sweep = load_sweep(RECIPE / "conf" / "sweeps" / spec)
        assert any("--asr_tag shared" in p and "--stop_stage 11" in p for p in sweep.prepare)
        (train, *_) = sweep.invocations("adapter")
        init = train[train.index("--asr_args") + 1]
        assert shlex.split(init) == ["--init_param", f"exp/asr_shared/{model_file}"]
        mini = "_mini" if spec == "mini.yaml" else ""
        assert f"conf/train_asr_adapter{mini}.yaml" in train


def test_head_candidates_sweep_is_fig2():
    sweep = load_sweep(RECIPE / "conf" / "sweeps" / "head_candidates.yaml")
    for strategy in ("subset", "group"):
        for h in (4, 8, 12, 16):
            (train, *_) = sweep.invocations(f"{strategy}_h{h}")
            assert f"conf/train_asr_{strategy}.yaml" in train
            assert f"--encoder_conf head_candidates={h} --decoder_conf head_candidates={h}" in train
    tables, curve = sweep.analyses[:2], sweep.analyses[2]
    assert [len(a["rows"]) for a in tables] == [4, 4]
    # Fig. 2 itself: the average WER against H', one line per strategy
    assert curve["kind"] == "curve" and curve["column"] == "AVG"
    assert set(curve["averages"]["AVG"]) == set(sweep.sets)
    assert curve["series"] == {
        name: {h: f"{strategy}_h{h}" for h in (4, 8, 12, 16)}
        for name, strategy in (("Subset", "subset"), ("Group", "group"))
    }


def selection_strategies(model) -> set[str]:
    return {m.strategy for m in model.modules() if hasattr(m, "selection_logits")}


@pytest.mark.parametrize(("spec", "layers"), [("sides.yaml", (12, 6)), ("sides_mini.yaml", (6, 3))])
def test_sides_sweep_is_table6(spec, layers, tokens):
    sweep = load_sweep(RECIPE / "conf" / "sweeps" / spec)
    rows = {row["label"]: row["run"] for row in sweep.analyses[0]["rows"]}
    encoder, decoder = layers
    assert rows.pop("none (shared)") == "shared"
    expected = {"encoder only": (encoder, 0), "decoder only": (0, decoder)}
    expected["encoder + decoder"] = (encoder, decoder)
    assert len(rows) == 2 * len(expected)
    for strategy in ("group", "subset"):
        for side, selecting in expected.items():
            (train, *_) = sweep.invocations(rows[f"{strategy}: {side}"])
            config = train[train.index("--asr_config") + 1].removeprefix("conf/")
            extra = (
                shlex.split(train[train.index("--asr_args") + 1]) if "--asr_args" in train else []
            )
            model = build(config, tokens, *extra)
            assert tuple(selection_layers(model).values()) == selecting
            assert selection_strategies(model) == {strategy}


def test_the_recipe_decodes_the_real_corpus_with_the_last_10_epochs_averaged():
    run_sh = (RECIPE / "run.sh").read_text()
    assert "--inference_model last10.pth" in run_sh
    for name in ("train_asr_shared.yaml", "train_asr_group.yaml", "train_asr_subset.yaml"):
        config = yaml.safe_load((RECIPE / "conf" / name).read_text())
        assert ["train", "total_count", "max"] in config["best_model_criterion"]
        assert config["patience"] == 10 and config["keep_nbest_models"] >= 10


def test_the_recipe_scores_wer_as_the_authors(tmp_path):
    """examples/attention_head_selection/README.md: fairseq-generate --scoring wer --wer-tokenizer 13a
    --wer-lowercase --wer-remove-punct (the raw WER beside it: tests/scoring/test_wer.py)."""
    recipe = echo_recipe("mtedx", "asr1", "asr.sh", tmp_path)
    for corpus in ("/corpora/mtedx", ""):  # real mode, the mini corpus
        args = echoed_args(recipe, [], {"MTEDX": corpus})
        assert args["--wer_opts"].split() == ["--tokenizer", "13a", "--lowercase", "--remove_punct"]


def test_table3_mini_separate_models_train_on_one_domain_each():
    check_separate_runs(
        load_sweep(RECIPE / "conf" / "sweeps" / "table3_mini.yaml"),
        "--asr_stats_dir",
        "conf/train_asr_shared_mini.yaml",
    )


def test_table3_mini_adapters_start_from_the_prepared_joint_model():
    sweep = load_sweep(RECIPE / "conf" / "sweeps" / "table3_mini.yaml")
    joint = next(p for p in sweep.prepare if "--asr_tag joint" in p)
    assert "conf/train_asr_shared_mini.yaml" in joint and "--stop_stage 11" in joint
    (train, *_) = sweep.invocations("adapter")
    init = train[train.index("--asr_args") + 1]
    assert shlex.split(init) == ["--init_param", "exp_domains/asr_joint/valid.acc.ave.pth"]
    for run in ("group", "subset", "adapter"):
        (train, *_) = sweep.invocations(run)
        assert train[train.index("--tasks") + 1] == "domains"
        assert f"conf/train_asr_{run}_domains_mini.yaml" in train
    (joint_train, *_) = sweep.invocations("joint")
    assert "--tasks" not in joint_train and "--other_domains" in joint_train
    assert {s for s in sweep.sets if "other" in s} == {
        f"test_other_{x}" for x in ("es", "it", "pt")
    }
