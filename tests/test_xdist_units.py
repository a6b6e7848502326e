"""tests/xdist_groups.py, the suite's spread over xdist workers with `--dist loadgroup`: a module's tests on
one worker, modules sharing a session fixture in one xdist group, the recipe units longest first.

The check of the groups reads the test sources; the scheduling itself reads only the marks."""

import ast
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import xdist_groups

TESTS = Path(__file__).resolve().parent
MODULES = sorted(TESTS.rglob("test_*.py"))


def fixtures_in(path: Path) -> dict[str, tuple[str, set[str]]]:
    """The ``@pytest.fixture`` functions defined in ``path``: name -> (scope, the fixtures it requests).
    Fixtures imported into a conftest (tests/slurm_fixtures.py's Slurm cluster) are services each worker
    starts for itself, not results to share, and are not counted."""
    found = {}
    for node in ast.parse(path.read_text()).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            call = deco if isinstance(deco, ast.Call) else None
            target = call.func if call else deco
            if isinstance(target, ast.Attribute) and target.attr == "fixture":
                scope = next(
                    (k.value.value for k in (call.keywords if call else []) if k.arg == "scope"),
                    "function",
                )
                found[node.name] = (scope, {a.arg for a in node.args.args})
    return found


def requested(module: Path) -> set[str]:
    """The names a module's tests and fixtures request: their arguments and ``usefixtures`` marks."""
    names = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.FunctionDef):
            names |= {a.arg for a in node.args.args}
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "usefixtures":
            names |= {a.value for a in node.args if isinstance(a, ast.Constant)}
    return names


def declared_group(module: Path) -> str:
    """The module's group: its ``pytestmark``'s ``xdist_group``, else (tests/conftest.py) its file name."""
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            getattr(t, "id", None) == "pytestmark" for t in node.targets
        ):
            for call in ast.walk(node.value):
                if isinstance(call, ast.Call) and getattr(call.func, "attr", None) == "xdist_group":
                    return call.args[0].value
    return module.name


def session_fixture_users() -> dict[str, list[Path]]:
    """Each session fixture of a tests/**/conftest.py -> the test modules below it that use it, directly or
    through another fixture of that conftest."""
    users = {}
    for conftest in sorted(TESTS.rglob("*/conftest.py")):
        fixtures = fixtures_in(conftest)
        for name, (scope, _) in fixtures.items():
            if scope != "session":
                continue
            through = {name}
            while grown := {f for f, (_, needs) in fixtures.items() if needs & through} - through:
                through |= grown
            modules = [m for m in MODULES if conftest.parent in m.parents]
            users[name] = [m for m in modules if requested(m) & through]
    return users


def test_every_session_fixture_is_made_in_one_group():
    for fixture, modules in session_fixture_users().items():
        groups = {m.relative_to(TESTS).as_posix(): declared_group(m) for m in modules}
        assert len(set(groups.values())) <= 1, (
            f"session fixture {fixture} is used by modules of different xdist groups: {groups}; give them "
            f'one `pytestmark = pytest.mark.xdist_group("{fixture}")`'
        )


def test_the_shared_runs_are_found_with_their_modules():
    users = {f: {m.name for m in modules} for f, modules in session_fixture_users().items()}
    assert users["librispeech_finished"] == {
        "test_librispeech_recipe.py",
        "test_librispeech_slurm.py",
    }
    assert users["mustc_asr_finished"] == {"test_mustc_asr_recipe.py", "test_mustc_st_recipe.py"}
    assert users["mtedx_asr_finished"] == {"test_mtedx_asr_recipe.py", "test_mtedx_st_recipe.py"}
    # Europarl's LegoNN ASR composes the WMT recipe's De-En decoder: one trained model for both modules
    assert users["wmt_lego_deen"] == {"test_wmt_lego_recipe.py", "test_europarl_asr_recipe.py"}
    # the tiny LegoNN model trained once for the inventory, swap-matrix and training tests
    assert users["trained_experiment"] == {
        "test_inventory.py",
        "test_lego_swap.py",
        "test_model.py",
    }
    assert users["cifar100_finished"] == {"test_cifar100_recipe.py"}
    assert declared_group(TESTS / "recipes" / "test_librispeech_slurm.py") == "librispeech_finished"
    # a module with a run of its own (module-scoped) is its own unit
    assert declared_group(TESTS / "recipes" / "test_iwslt14_recipe.py") == "test_iwslt14_recipe.py"


class Item:
    """What tests/xdist_groups.py reads and writes of a pytest item."""

    def __init__(self, path: Path, group: str | None = None):
        self.path = path
        self.nodeid = f"{path.relative_to(TESTS.parent).as_posix()}::test"
        self.marks = [pytest.mark.xdist_group(group).mark] if group else []

    def get_closest_marker(self, name):
        return next((m for m in reversed(self.marks) if m.name == name), None)

    def add_marker(self, marker):
        self.marks.append(marker.mark)


def test_unmarked_tests_get_their_module_as_group_and_recipe_units_start_longest_first():
    recipes = TESTS / "recipes"
    items = [
        Item(TESTS / "text" / "test_a.py"),
        Item(recipes / "test_wmt_recipe.py"),
        Item(recipes / "test_librispeech_slurm.py", "librispeech_finished"),
        Item(recipes / "test_unlisted.py"),
        Item(recipes / "test_europarl_asr_recipe.py", "wmt_lego_deen"),
    ]
    for item in items:
        xdist_groups.mark(item)
    items.sort(key=xdist_groups.schedule_key)
    assert [(i.path.name, [m.args[0] for m in i.marks]) for i in items] == [
        ("test_europarl_asr_recipe.py", ["wmt_lego_deen"]),
        ("test_librispeech_slurm.py", ["librispeech_finished"]),
        ("test_wmt_recipe.py", ["test_wmt_recipe.py"]),
        ("test_unlisted.py", ["test_unlisted.py"]),
        ("test_a.py", ["test_a.py"]),
    ]


def test_the_scheduler_takes_the_groups_the_workers_wrote(tmp_path):
    items = [Item(TESTS / "test_a.py"), Item(TESTS / "recipes" / "test_b.py", "shared_run")]
    for item in items:
        xdist_groups.mark(item)
    xdist_groups.write(items, tmp_path, "gw0")
    xdist_groups.write(items, tmp_path, "gw1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gw0.json", "gw1.json"]
    two_workers = SimpleNamespace(
        getvalue=lambda name: ["popen", "popen"] if name == "tx" else None
    )
    scheduler = xdist_groups.ReportedGroupScheduling(two_workers, None, tmp_path)
    assert scheduler._split_scope("tests/test_a.py::test") == "test_a.py"
    assert scheduler._split_scope("tests/recipes/test_b.py::test") == "shared_run"
    # an id no worker wrote: xdist's own rule (the group suffix, else the id)
    assert scheduler._split_scope("tests/test_c.py::test@other") == "other"


def test_this_worker_wrote_the_groups_of_its_collection(request):
    here = [i for i in request.session.items if i.path == Path(__file__)]
    assert {xdist_groups.group_of(i) for i in here} == {"test_xdist_units.py"}
    workerinput = getattr(request.config, "workerinput", {})
    if xdist_groups.WORKERINPUT_KEY in workerinput:  # an xdist worker under --dist loadgroup
        table = json.loads(
            Path(
                workerinput[xdist_groups.WORKERINPUT_KEY], f"{workerinput['workerid']}.json"
            ).read_text()
        )
        assert table == {i.nodeid: xdist_groups.group_of(i) for i in request.session.items}
        assert table[request.node.nodeid] == "test_xdist_units.py"


def test_every_listed_unit_exists():
    declared = {declared_group(m) for m in MODULES}
    for group in xdist_groups.LONGEST_FIRST:
        assert group in declared, (
            f"LONGEST_FIRST names {group}: no module declares it or is named so"
        )


def test_test_module_names_are_unique():
    """An unmarked module's group is its file name (tests/xdist_groups.py)."""
    names = [p.name for p in MODULES]
    assert len(names) == len(set(names))
