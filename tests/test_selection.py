"""tests/selection.py: the e2e / slow / unit markers, from each module's path."""

import ast
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

from tests import selection

TESTS = Path(__file__).resolve().parent
MODULES = sorted(TESTS.rglob("test_*.py"))
# What a module imports from tests/recipes' helpers to run a recipe copy (wmt_fixture and real_fixtures
# are recipe runs altogether).
RECIPE_RUNNERS = {"make_recipe_copy", "tiny_librispeech_recipe", "run", "run_until"}
RUN_MODULES = {"wmt_fixture", "real_fixtures"}


def session_fixtures(conftest: Path) -> set[str]:
    """Names of the ``@pytest.fixture(scope="session")`` functions of ``conftest``."""
    names = set()
    for node in ast.parse(conftest.read_text()).body:
        if isinstance(node, ast.FunctionDef):
            for deco in node.decorator_list:
                keywords = deco.keywords if isinstance(deco, ast.Call) else []
                scopes = {getattr(k.value, "value", None) for k in keywords if k.arg == "scope"}
                if "session" in scopes:
                    names.add(node.name)
    return names


RECIPE_RUNS = session_fixtures(TESTS / "recipes" / "conftest.py")


def runs_recipes(module: Path) -> bool:
    """Whether the module copies a recipe to run it, or takes a recipe run of tests/recipes/conftest.py."""
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            source = node.module.rsplit(".", 1)[-1]
            names = {alias.name for alias in node.names}
            if source in RUN_MODULES or (source == "recipe_fixture" and names & RECIPE_RUNNERS):
                return True
        if isinstance(node, ast.FunctionDef) and {a.arg for a in node.args.args} & RECIPE_RUNS:
            return True
    return False


def test_the_recipe_runs_are_found():
    assert {"librispeech_finished", "mustc_asr_finished"} <= RECIPE_RUNS
    assert runs_recipes(TESTS / "recipes" / "test_real_mustc.py")
    assert runs_recipes(TESTS / "recipes" / "test_librispeech_slurm.py")  # a session run only
    # recipe_fixture.ROOT only
    assert not runs_recipes(TESTS / "recipes" / "test_cifar100_protocol.py")


def test_every_module_that_runs_a_recipe_is_e2e():
    missed = [m.relative_to(TESTS).as_posix() for m in MODULES if runs_recipes(m)]
    assert [m for m in missed if selection.kind(TESTS / m) != "e2e"] == []


@pytest.mark.parametrize("pattern", [*selection.E2E, *selection.SLOW])
def test_every_pattern_names_a_module(pattern):
    assert any(fnmatch(m.relative_to(TESTS).as_posix(), pattern) for m in MODULES)


class Item:
    """What selection.mark reads and writes of a pytest item."""

    def __init__(self, path: Path, *markers: str):
        self.path, self.markers = path, list(markers)

    def get_closest_marker(self, name: str):
        return name if name in self.markers else None

    def add_marker(self, name: str) -> None:
        self.markers.append(name)


@pytest.mark.parametrize(
    "module, given, markers",
    [
        ("recipes/test_real_mustc.py", (), ["e2e"]),
        ("recipes/test_wmt_table1.py", (), ["unit"]),
        ("configs/test_real_configs_mustc.py", (), ["slow"]),
        ("jobs/test_slurm.py", ("slurm",), ["slurm"]),
    ],
)
def test_marks_by_path(module, given, markers):
    item = Item(TESTS / module, *given)
    selection.mark(item)
    assert item.markers == markers


def test_the_suite_marks_its_tests_and_registers_the_markers(request):
    """tests/conftest.py marks each collected test; pyproject.toml registers every marker it may add."""
    assert request.node.get_closest_marker("unit") is not None
    pytest_conf = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())["tool"]["pytest"]
    registered = {line.split(":", 1)[0] for line in pytest_conf["ini_options"]["markers"]}
    assert {"e2e", "slow", "unit", *selection.NOT_UNIT} <= registered
