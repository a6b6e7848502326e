"""The suite's selections by marker, set from each test module's path (tests/conftest.py calls ``mark``).

- ``e2e``: runs something end to end through the shell pipelines: a recipe copy through its stages (the
  mini corpora, the real modes as smoke runs, the release-layout fixtures), or every real sweep planned
  through the recipes (a dry run).
- ``slow``: real-size work: each real training config for two updates, the benchmark scripts' smoke runs.
- ``unit``: everything else that needs no Slurm cluster (``slurm`` marks those): ``pytest -m unit``.

The patterns name modules, relative to tests/; tests/test_selection.py checks that every module that copies a
recipe or uses a recipe run of tests/recipes/conftest.py is ``e2e``.
"""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

E2E = (
    "recipes/test_*_recipe.py",
    "recipes/test_real_*.py",
    "recipes/test_librispeech_slurm.py",
    "recipes/test_lrs3_real_data.py",
    "recipes/test_mnist_seq_scene_text.py",
    "recipes/test_mtedx_domains.py",
    "recipes/test_lm_pipeline.py",
    "recipes/test_mt_splits.py",
    "recipes/test_ocr_splits.py",
    "configs/test_librispeech_960h.py",
    "analysis/test_sweep_dry_run.py",
)
SLOW = (
    "configs/test_real_configs_*.py",
    "bench/test_bench_*smoke.py",
)
NOT_UNIT = ("e2e", "slow", "slurm")


def kind(module: Path) -> str | None:
    """The test module at ``module`` is "e2e", "slow" or None (unit tests)."""
    path = module.resolve()
    if not path.is_relative_to(TESTS):
        return None
    rel = path.relative_to(TESTS).as_posix()
    for name, patterns in (("e2e", E2E), ("slow", SLOW)):
        if any(fnmatch(rel, pattern) for pattern in patterns):
            return name
    return None


def mark(item: pytest.Item) -> None:
    """Adds ``e2e`` / ``slow`` by the item's module, else ``unit`` unless the test is marked ``slurm``."""
    found = kind(item.path)
    if found:
        item.add_marker(found)
    if not any(item.get_closest_marker(name) for name in NOT_UNIT):
        item.add_marker("unit")
