"""How the suite is spread over pytest-xdist workers with ``--dist loadgroup`` (tests/conftest.py calls it;
docs/tests.md).

A test's work unit is its ``xdist_group`` mark. Modules that use one session-scoped fixture of a conftest.py
below tests/ declare the same group, named after the fixture (tests/test_xdist_units.py checks it), so one
worker makes the fixture once. Every other test gets its module's file name (unique), so a module's tests
stay on one worker as with ``--dist loadfile``: their module-scoped fixtures are recipe runs.

pytest-xdist 3.8 carries each test's group from the worker that collected it to the scheduler as a suffix
it writes into the node id, which pytest 9.2's structured node ids no longer take: the tests would silently
spread one by one (pytest-dev/pytest-xdist#1386). So each worker writes the groups of its collection to a
folder the controller hands it (xdist's ``pytest_configure_node``), and the scheduler, xdist's
``LoadGroupScheduling``, reads them there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from xdist.scheduler import LoadGroupScheduling

TESTS = Path(__file__).resolve().parent
RECIPE_TESTS = TESTS / "recipes"
WORKERINPUT_KEY = "xdist_groups_dir"  # the folder of the workers' group tables

# The recipe work units (xdist groups), longest first (measured on 2 cores; a unit not listed comes after
# them). Longest first keeps the last unit short, so neither worker ends the suite alone for minutes.
LONGEST_FIRST = [
    "wmt_lego_deen",  # test_europarl_asr_recipe.py + test_wmt_lego_recipe.py: De-En, Ro-En, compose, Europarl
    "librispeech_finished",  # test_librispeech_recipe.py + test_librispeech_slurm.py
    "test_real_wmt_europarl.py",  # real modes (--smoke true): WMT's seven, then Europarl's De-En path
    "test_real_mtedx.py",
    # Two units, free to run side by side: their runs reuse no stage of each other's (the data stage's
    # fingerprint holds the setup's sets, the later ones the recipe's absolute paths), and 433h_self and
    # 433h both train exp/vsr_train_vsr_large, so one recipe copy cannot hold both.
    "test_real_lrs3.py",
    "test_real_lrs3_modes.py",  # 433 h from an AV-HuBERT checkpoint, LM λ tuning (15 min under load ~10)
    "test_real_wmt_adapters.py",  # M2O shared -> adapter (6.5 min under load ~10)
    "test_real_librispeech.py",
    "test_real_mustc.py",
    "test_real_iwslt14.py",
    "test_real_cifar100.py",
    "test_real_mnist_seq.py",
    "mtedx_asr_finished",  # test_mtedx_asr_recipe.py + test_mtedx_st_recipe.py
    "test_mtedx_domains.py",
    "mustc_asr_finished",  # test_mustc_asr_recipe.py + test_mustc_st_recipe.py
    "test_lrs3_recipe.py",
    "test_iwslt14_recipe.py",
    "test_cifar100_recipe.py",
    "test_mnist_seq_recipe.py",
    "test_mnist_seq_scene_text.py",
    "test_wmt_recipe.py",
]


def group_of(item) -> str:
    """The test's work unit: its (module's) ``xdist_group`` mark, else its module's file name."""
    mark = item.get_closest_marker("xdist_group")
    return str(mark.args[0]) if mark else item.path.name


def mark(item) -> None:
    """Gives a test without an ``xdist_group`` mark its module's (xdist's own loadgroup reads the marks)."""
    if item.get_closest_marker("xdist_group") is None:
        item.add_marker(pytest.mark.xdist_group(item.path.name))


def schedule_key(item) -> tuple[bool, int]:
    """The end-to-end recipe units (minutes each) first, longest first: queued behind the unit tests, the
    last of them would finish alone on one worker while the other waits."""
    group = group_of(item)
    rank = LONGEST_FIRST.index(group) if group in LONGEST_FIRST else len(LONGEST_FIRST)
    return RECIPE_TESTS not in item.path.parents, rank


def write(items, directory: Path, worker: str) -> None:
    """A worker's table of its collection: node id -> group, as ``directory/<worker>.json``."""
    table = {item.nodeid: group_of(item) for item in items}
    partial = directory / f".{worker}.json"
    partial.write_text(json.dumps(table))
    partial.rename(directory / f"{worker}.json")


def read(directory: Path) -> dict[str, str]:
    """The workers' tables, merged."""
    table: dict[str, str] = {}
    for path in sorted(directory.glob("*.json")):
        table.update(json.loads(path.read_text()))
    return table


class ReportedGroupScheduling(LoadGroupScheduling):
    """xdist's loadgroup scheduling on the groups the workers wrote to ``directory``: the first scope is
    asked for once every worker has sent its collection, after it wrote its table."""

    def __init__(self, config, log, directory: Path):
        super().__init__(config, log)
        self.directory, self.groups = directory, None

    def _split_scope(self, nodeid: str) -> str:
        if self.groups is None:
            self.groups = read(self.directory)
        group = self.groups.get(nodeid)
        return group if group is not None else super()._split_scope(nodeid)
