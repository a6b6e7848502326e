"""The suite's spread over xdist workers (tests/conftest.py): modules sharing a session run stay together."""

import importlib.util
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def load_conftest():
    spec = importlib.util.spec_from_file_location("suite_conftest", TESTS / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_modules_sharing_a_session_recipe_run_form_one_unit():
    units = load_conftest().shared_run_units()
    assert units["test_librispeech_slurm.py"] == "test_librispeech_recipe.py"
    assert units["test_mustc_st_recipe.py"] == "test_mustc_asr_recipe.py"
    assert units["test_mtedx_st_recipe.py"] == "test_mtedx_asr_recipe.py"
    # Europarl's LegoNN ASR composes the WMT recipe's De-En decoder: one trained model for both modules
    assert units["test_wmt_lego_recipe.py"] == "test_europarl_asr_recipe.py"
    # the tiny LegoNN model trained once for the inventory and swap-matrix tests
    assert units["test_lego_swap.py"] == "test_inventory.py"
    # a module with a run of its own (module-scoped) is its own unit
    assert "test_iwslt14_recipe.py" not in units
    # the multilingual mode: free to run on the other worker
    assert "test_wmt_recipe.py" not in units


def test_every_user_of_each_session_run_lands_in_its_unit():
    conftest = load_conftest()
    units = conftest.shared_run_units()
    fixtures = conftest.SESSION_FIXTURE.findall((TESTS / "recipes" / "conftest.py").read_text())
    assert "librispeech_finished" in fixtures
    for shared in TESTS.rglob("*/conftest.py"):
        for fixture in conftest.SESSION_FIXTURE.findall(shared.read_text()):
            users = [p.name for p in shared.parent.rglob("test_*.py") if fixture in p.read_text()]
            assert len({units.get(name, name) for name in users}) <= 1, (fixture, users)


def test_recipe_units_start_longest_first_and_every_listed_module_exists():
    conftest = load_conftest()
    units = conftest.shared_run_units()
    recipes = TESTS / "recipes"
    assert all((recipes / name).is_file() for name in conftest.LONGEST_FIRST)
    # a module sharing a run starts with its unit, whichever of the unit's modules is listed
    assert conftest.schedule_rank("test_wmt_lego_recipe.py", units) == 0
    assert conftest.schedule_rank("test_librispeech_slurm.py", units) == 1
    assert conftest.schedule_rank("test_wmt_recipe.py", units) == len(conftest.LONGEST_FIRST) - 1
    assert conftest.schedule_rank("test_style.py", units) == len(conftest.LONGEST_FIRST)


def test_test_module_names_are_unique():
    """The scheduler keys work units by module file name (tests/conftest.py)."""
    names = [p.name for p in TESTS.rglob("test_*.py")]
    assert len(names) == len(set(names))
