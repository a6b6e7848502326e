"""LibriSpeech, CIFAR-100, MNIST sequences, Europarl-ST: real configs take two updates (real_configs.py)."""

from pathlib import Path

import pytest

from tests.configs.real_configs import EGS, GROUPS, RECIPES, check_two_updates, configs_of


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


@pytest.mark.parametrize("name", configs_of("others"))
def test_real_config_takes_two_updates(name, tmp_path):
    check_two_updates(name, tmp_path)
