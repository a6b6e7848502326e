"""Config cards (espnet_ext.analysis.config_card): every real training config against its paper's table, on
ESPnet's own batch sampler, and the card tables in the recipes' RESULTS.md current."""

import json
import math
from pathlib import Path

import pytest
import yaml

from espnet_ext.analysis import config_card

EGS = Path(__file__).resolve().parents[2] / "egs"
RECIPES = [
    "librispeech/asr1", "lrs3/vsr1", "mustc/asr1", "mustc/st1", "mtedx/asr1", "mtedx/st1", "iwslt14/mt1",
    "wmt/mt1", "cifar100/cls1", "mnist_seq/ocr1", "europarl/asr1",
]  # fmt: skip


@pytest.mark.parametrize("recipe", RECIPES)
def test_real_configs_match_the_paper_and_results_page_is_current(recipe):
    """Every real (non-mini) training config has an entry in conf/card/paper.yaml, every expected value holds
    (within its tolerance) or is a listed deviation, and RESULTS.md carries the current card table."""
    cards = config_card.recipe_cards(EGS / recipe)
    assert {c["config"] for _, c, _ in cards} == {
        p.relative_to(EGS / recipe / "conf").as_posix()
        for p in config_card.real_configs(EGS / recipe)
    }
    bad = {
        c["config"]: config_card.failures(rows)
        for _, c, rows in cards
        if config_card.failures(rows)
    }
    assert not bad, bad
    assert config_card.update_results(EGS / recipe, check=True, cards=cards), (
        f"egs/{recipe}/RESULTS.md: run python -m espnet_ext.analysis.config_card --results egs/{recipe}"
    )


def tiny_recipe(tmp_path, config: dict, lengths: dict, task="mt", vocab=None):
    conf = tmp_path / "conf"
    (conf / "card").mkdir(parents=True)
    (conf / "train.yaml").write_text(yaml.safe_dump(config))
    base = {"corpus": "c", "items": 1000, "unit": "tokens", "source": "s", "derivation": "d"}
    (conf / "card" / "lengths.json").write_text(json.dumps({**base, **lengths}))
    paper = {"pipeline": {"task": task, "vocab": vocab or {}}, "configs": {"train.yaml": {}}}
    (conf / "card" / "paper.yaml").write_text(yaml.safe_dump(paper))
    return conf / "train.yaml"


def test_numel_multiplies_the_vocabulary_as_espnet_does(tmp_path):
    """With the pipeline's text shapes (length,vocab) numel bins of 131,072 hold one sentence of a 64k
    vocabulary (the WMT configs' old batches); length bins count the tokens."""
    lengths = {"histogram": [[20, 40, 1.0]], "output_per_input": 1.0}
    vocab = {"vocab": 64000, "src_vocab": 64000}
    numel = tiny_recipe(
        tmp_path / "a", {"batch_type": "numel", "batch_bins": 131072}, lengths, vocab=vocab
    )
    paper = config_card.Paper.load(numel.parent / "card" / "paper.yaml")
    c = config_card.card(
        numel, config_card.Lengths.load(numel.parent / "card" / "lengths.json"), "mt", vocab, paper
    )
    assert c["utts_per_batch"] == 1
    length = tiny_recipe(
        tmp_path / "b", {"batch_type": "length", "batch_bins": 2000}, lengths, vocab=vocab
    )
    c = config_card.card(
        length, config_card.Lengths.load(length.parent / "card" / "lengths.json"), "mt", vocab
    )
    assert 900 <= c["inputs_per_update"] <= 1100  # half of the bins: source + target


def test_schedule_and_clip_are_espnets(tmp_path):
    """warmuplr peaks at warmup_steps with optim lr; tristage ends at final_lr_scale; grad_clip 0 is named."""
    config = {"batch_type": "unsorted", "batch_size": 10, "max_epoch": 3, "num_iters_per_epoch": 5000,
              "optim_conf": {"lr": 0.002}, "scheduler": "warmuplr", "scheduler_conf": {"warmup_steps": 4000},
              "grad_clip": 0}  # fmt: skip
    path = tiny_recipe(tmp_path / "a", config, {"fixed_size": True}, task="cls")
    c = config_card.card(
        path, config_card.Lengths.load(path.parent / "card" / "lengths.json"), "cls", {}
    )
    assert c["total_updates"] == 15000 and c["warmup_updates"] == 4000
    assert c["peak_lr"] == pytest.approx(0.002) and c["final_lr"] == pytest.approx(
        0.002 * (4000 / 15000) ** 0.5
    )
    assert "never learns" in config_card.describe(c)
    config.update(scheduler="tristagelr", grad_clip=math.inf,
                  scheduler_conf={"max_steps": 15000, "warmup_ratio": 0.2, "hold_ratio": 0.0, "decay_ratio": 0.8,
                                  "final_lr_scale": 0.05})  # fmt: skip
    path = tiny_recipe(tmp_path / "b", config, {"fixed_size": True}, task="cls")
    c = config_card.card(
        path, config_card.Lengths.load(path.parent / "card" / "lengths.json"), "cls", {}
    )
    assert c["schedule_updates"] == 15000 and c["warmup_updates"] == 3000
    assert c["final_lr"] == pytest.approx(0.002 * 0.05, rel=1e-3)


def test_precision_and_cudnn_modes_are_espnets_defaults_where_the_config_is_silent(tmp_path):
    config = {"batch_type": "unsorted", "batch_size": 10, "max_epoch": 1}
    path = tiny_recipe(tmp_path / "a", config, {"fixed_size": True}, task="cls")
    lengths = config_card.Lengths.load(path.parent / "card" / "lengths.json")
    c = config_card.card(path, lengths, "cls", {})
    # espnet2/tasks/abs_task.py: --use_amp false, --cudnn_deterministic true, --cudnn_benchmark false
    assert (c["use_amp"], c["cudnn_deterministic"], c["cudnn_benchmark"]) == (False, True, False)
    config.update(use_amp=True, cudnn_deterministic=False, cudnn_benchmark=True)
    path = tiny_recipe(tmp_path / "b", config, {"fixed_size": True}, task="cls")
    c = config_card.card(path, lengths, "cls", {})
    assert (c["use_amp"], c["cudnn_deterministic"], c["cudnn_benchmark"]) == (True, False, True)
    described = config_card.describe(c)
    assert "use_amp True; cudnn_deterministic False, cudnn_benchmark True" in described


def test_comparison_flags_mismatches_and_stale_deviations():
    c = {"grad_clip": 0.0, "peak_lr": 0.001}
    rows = config_card.compare(c, {"grad_clip": {"value": ".inf", "source": "s"}})
    assert config_card.failures(rows)
    rows = config_card.compare(c, {"peak_lr": {"value": 0.001, "source": "s", "deviation": "why"}})
    assert "listed as a deviation" in config_card.failures(rows)[0]
    with pytest.raises(config_card.ConfigError, match="not a card key"):
        config_card.compare(c, {"batch": {"value": 1, "source": "s"}})


def test_cli_prints_the_card(capsys):
    config = EGS / "iwslt14/mt1/conf/train_mt_base.yaml"
    assert config_card.main([str(config)]) == 0
    out = capsys.readouterr().out
    for what in ("updates / epoch", "LR schedule", "grad clip", "lenpen 0.5", "paper:"):
        assert what in out


def test_unknown_config_names_the_table(tmp_path):
    path = tiny_recipe(tmp_path, {"batch_type": "unsorted"}, {"fixed_size": True}, task="cls")
    paper = config_card.Paper.load(path.parent / "card" / "paper.yaml")
    with pytest.raises(config_card.ConfigError, match="paper.yaml.*no entry"):
        paper.entry("other.yaml")


def test_bad_card_files_name_file_and_key(tmp_path):
    lengths = tmp_path / "lengths.json"
    lengths.write_text(json.dumps({"corpus": "c", "items": 1, "unit": "u", "source": "s"}))
    with pytest.raises(config_card.InputError, match="lengths.json: key 'derivation'"):
        config_card.Lengths.load(lengths)
    lengths.write_text(json.dumps({"corpus": "c", "items": 1, "unit": "u", "source": "s", "derivation": "d",
                                   "histogram": [[0, 10, 1]]}))  # fmt: skip
    with pytest.raises(config_card.InputError, match="lengths.json.*lo, hi, weight"):
        config_card.Lengths.load(lengths)
    paper = tmp_path / "paper.yaml"
    paper.write_text("pipeline: {task: speech}\n")
    with pytest.raises(config_card.InputError, match="paper.yaml: key 'pipeline.task'"):
        config_card.Paper.load(paper)
