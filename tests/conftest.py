"""Test-wide environment: the project's tools on PATH, offline NLTK data, one thread per process."""

import os
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


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long-running; deselect with -m 'not slow'")
    config.addinivalue_line(
        "markers", "slurm: needs a real local Slurm (started by tools/slurm_start.sh)"
    )
    if not config.pluginmanager.hasplugin("xdist"):
        config.addinivalue_line("markers", "xdist_group(name): tests pytest-xdist keeps together")


# pytest-xdist (--dist loadgroup): the tests of one module stay on one worker, so its module-scoped
# fixtures (a recipe run) run once; modules that share session fixtures share one group: the
# librispeech recipe run with the Slurm tests (one local Slurm cluster per session), MuST-C's ASR run
# with the ST recipe that starts from it, likewise mTEDx's.
SHARED_GROUPS = {
    "test_librispeech_recipe.py": "librispeech+slurm",
    "test_librispeech_slurm.py": "librispeech+slurm",
    "test_mustc_asr_recipe.py": "mustc",
    "test_mustc_st_recipe.py": "mustc",
    "test_mtedx_asr_recipe.py": "mtedx",
    "test_mtedx_st_recipe.py": "mtedx",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.path.name
        if module in SHARED_GROUPS:
            group = SHARED_GROUPS[module]
        elif item.get_closest_marker("slurm") or "slurm_cluster" in item.fixturenames:
            group = "librispeech+slurm"
        else:
            group = str(item.path.relative_to(ROOT))
        item.add_marker(pytest.mark.xdist_group(group))
