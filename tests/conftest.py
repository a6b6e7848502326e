"""Test-wide environment: the project's tools on PATH, offline NLTK data, one thread per process; and how
the suite is spread over pytest-xdist workers (`-n 2 --dist loadfile`)."""

import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

os.environ["PATH"] = os.pathsep.join(
    [str(Path(sys.executable).parent), str(ROOT / "utils"), os.environ.get("PATH", "")]
)
# Subprocesses (recipes, jobs) import this checkout's package, whichever checkout installed the venv.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("NLTK_DATA", str(ROOT / "tools" / "nltk_data"))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ["LC_ALL"] = "C"
# as tools/activate.sh and the recipes' path.sh set them for every job (the fork server compares them)
os.environ["PYTHONNOUSERSITE"] = "1"
os.environ["PYTHONIOENCODING"] = "UTF-8"

from tests import selection  # noqa: E402 (after the checkout joins sys.path)


def _start_forkserver(config) -> None:
    """One fork server per test process (tests/forkserver.py): the ``python -m espnet_ext.*`` processes that
    recipes start skip the torch / ESPnet imports. ESPNET_EXT_FORKSERVER=0 turns it off."""
    if os.environ.get("ESPNET_EXT_FORKSERVER", "1") == "0":
        return
    if (
        not hasattr(config, "workerinput")
        and (getattr(config.option, "numprocesses", None) or 0) > 0
    ):
        return  # the pytest-xdist controller runs no test
    import subprocess
    import tempfile

    from tests import forkserver

    directory = Path(tempfile.mkdtemp(prefix="forkserver-"))
    socket_path = directory / "socket"
    server = subprocess.Popen(
        [sys.executable, str(TESTS / "forkserver.py"), str(socket_path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    config.forkserver = (server, directory)
    shim = str(forkserver.shim(directory / "bin", socket_path))
    os.environ["PATH"] = os.pathsep.join([shim, os.environ["PATH"]])
    os.environ["ESPNET_EXT_PATH_PREFIX"] = shim  # tools/activate.sh keeps it before the virtualenv


def pytest_unconfigure(config):
    server, directory = getattr(config, "forkserver", (None, None))
    if server is not None:
        server.terminate()
        server.wait()
        import shutil

        shutil.rmtree(directory, ignore_errors=True)


def pytest_configure(config):
    # As our entry points do before they import ESPnet: typeguard's checks off (ESPnet's @typechecked run at
    # import). Without it a test module importing ESPnet first would leave them on for the whole worker,
    # and a later test would run ESPnet's trainer under checks its entry points never see.
    from espnet_ext.registry import install

    install(tasks=())
    _start_forkserver(config)


def pytest_itemcollected(item):
    selection.mark(item)  # e2e / slow / unit by the module's path (markers: pyproject.toml)


TESTS = ROOT / "tests"
RECIPE_TESTS = TESTS / "recipes"
SESSION_FIXTURE = re.compile(r'@pytest\.fixture\(scope="session"\)\s*def (\w+)')


def shared_run_units() -> dict[str, str]:
    """Test module name -> the name of the work unit it joins: modules that use the same session-scoped
    fixture of a conftest.py below tests/ (a recipe run of tests/recipes/conftest.py, a trained model of
    tests/nets/lego/conftest.py) form one unit, so one worker makes it once. Module names are unique."""
    unit: dict[str, str] = {}
    for conftest in sorted(TESTS.rglob("*/conftest.py")):
        modules = {p.name: p.read_text() for p in sorted(conftest.parent.rglob("test_*.py"))}
        unit.update({name: unit.get(name, name) for name in modules})
        for fixture in SESSION_FIXTURE.findall(conftest.read_text()):
            joined = {unit[n] for n, text in modules.items() if re.search(rf"\b{fixture}\b", text)}
            if joined:
                first = min(joined)
                unit = {n: first if u in joined else u for n, u in unit.items()}
    return {name: u for name, u in unit.items() if u != name}


# The recipe modules' work units, longest first (measured on 2 cores; a module not listed comes after
# them). Longest first keeps the last unit short, so neither worker ends the suite alone for minutes.
LONGEST_FIRST = [
    "test_europarl_asr_recipe.py",  # with test_wmt_lego_recipe.py: WMT De-En, Ro-En, compose, Europarl
    "test_librispeech_recipe.py",  # with test_librispeech_slurm.py
    "test_real_wmt_europarl.py",  # real modes (--smoke true): WMT's seven, then Europarl's De-En path
    "test_real_mtedx.py",
    "test_real_lrs3.py",
    "test_real_lrs3_modes.py",  # 433 h from an AV-HuBERT checkpoint, LM λ tuning (15 min under load ~10)
    "test_real_wmt_adapters.py",  # M2O shared -> adapter (6.5 min under load ~10)
    "test_real_librispeech.py",
    "test_real_mustc.py",
    "test_real_iwslt14.py",
    "test_real_cifar100.py",
    "test_real_mnist_seq.py",
    "test_mtedx_asr_recipe.py",  # with test_mtedx_st_recipe.py
    "test_mtedx_domains.py",
    "test_mustc_asr_recipe.py",  # with test_mustc_st_recipe.py
    "test_lrs3_recipe.py",
    "test_iwslt14_recipe.py",
    "test_cifar100_recipe.py",
    "test_mnist_seq_recipe.py",
    "test_mnist_seq_scene_text.py",
    "test_wmt_recipe.py",
]


def schedule_rank(module: str, units: dict[str, str]) -> int:
    """Where a test module's unit starts: recipe units longest first, then the rest (unit tests)."""
    unit = units.get(module, module)
    return LONGEST_FIRST.index(unit) if unit in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(config, items):
    # The end-to-end recipe modules (minutes each) start first: queued behind the unit tests, the last of
    # them would finish alone on one worker while the other waits.
    units = shared_run_units()
    items.sort(
        key=lambda item: (
            RECIPE_TESTS not in item.path.parents,
            schedule_rank(item.path.name, units),
        )
    )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    units = shared_run_units()

    class SharedRunScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]  # test module names are unique
            return units.get(module, module)

    # Keep the collection order above (xdist would otherwise start with the modules holding most tests).
    config.option.loadscopereorder = False
    return SharedRunScheduling(config, log)
