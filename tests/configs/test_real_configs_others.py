"""LibriSpeech, CIFAR-100, MNIST sequences, Europarl-ST: real configs take two updates (real_configs.py)."""

import shlex
from pathlib import Path

import pytest

from espnet_ext.analysis.sweep import load_sweep
from tests.configs.real_configs import (
    EGS,
    GROUPS,
    RECIPES,
    check_two_updates,
    config_params,
    configs_of,
)
from tests.recipes.recipe_fixture import echo_recipe, echoed_args


def test_every_real_training_config_is_listed():
    """A new recipe or config directory must be known to the harness, and every config is run."""
    recipes = {str(p.parent.relative_to(EGS)) for p in EGS.glob("*/*/conf")}
    assert recipes - {"TEMPLATE/asr1"} == set(RECIPES)
    assert sorted(r for group in GROUPS.values() for r in group) == sorted(RECIPES)
    modules = {
        p.stem.removeprefix("test_real_configs_")
        for p in Path(__file__).parent.glob("test_real_configs_*.py")
    }
    assert modules == set(GROUPS)
    assert sum(len(configs_of(group)) for group in GROUPS) >= 80


@pytest.mark.parametrize("name", config_params("others"))
def test_real_config_takes_two_updates(name, tmp_path):
    check_two_updates(name, tmp_path)


# CIFAR-100's Table 4 rows are run.sh variants of one config (--variant: stochastic depth off, L_drloc, smooth
# focus, relaxed, fuzzy; --batch 128 or 1024): each row of conf/sweeps/table4.yaml from scratch (the ImageNet
# checkpoint only initialises), with the training options run.sh gives cls.sh for it. The baseline at batch
# 128 is the config itself (test_real_config_takes_two_updates). Batch 1024 changes numbers of the optimizer
# and schedule and, with L_drloc, the batches per epoch of its weight schedule: the drloc row runs it for all
# (each row ~10 s on 2 cores).
CIFAR = EGS / "cifar100" / "cls1"
CIFAR_BASELINE = "--variant baseline --batch 128"
CIFAR_ROWS = sorted(
    {
        " ".join(options[: options.index("--imagenet_checkpoint")] if "--imagenet_checkpoint" in options
                 else options)
        for options in map(shlex.split, load_sweep(CIFAR / "conf/sweeps/table4.yaml").runs.values())
    }
)  # fmt: skip


@pytest.fixture(scope="module")
def cifar_echo(tmp_path_factory):
    return echo_recipe("cifar100", "cls1", "cls.sh", tmp_path_factory.mktemp("cifar_echo"))


def cifar_training(echo, row: str) -> tuple[str, list[str]]:
    """(config, training options) run.sh gives cls.sh for a Table 4 row in the real mode."""
    args = echoed_args(echo, shlex.split(row), {"CIFAR100": "/corpora/cifar100"})
    return args["--cls_config"], shlex.split(args["--cls_args"])


def test_cifar100_table4_baseline_at_batch_128_is_the_config_itself(cifar_echo):
    assert CIFAR_BASELINE in CIFAR_ROWS and len(CIFAR_ROWS) == 16  # 8 rows x 2 batch sizes
    assert "--variant drloc --batch 1024" in CIFAR_ROWS
    assert cifar_training(cifar_echo, CIFAR_BASELINE) == ("conf/train_swin_t.yaml", [])


@pytest.mark.parametrize(
    "row",
    [r for r in CIFAR_ROWS if r.endswith(" 128") and r != CIFAR_BASELINE]
    + ["--variant drloc --batch 1024"],
)
def test_cifar100_table4_row_takes_two_updates(row, cifar_echo, tmp_path):
    config, options = cifar_training(cifar_echo, row)
    assert config == "conf/train_swin_t.yaml" and options
    check_two_updates("cifar100/cls1/train_swin_t.yaml", tmp_path, options=options)
