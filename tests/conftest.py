"""Test-wide environment: the project's tools on PATH, offline NLTK data, one thread per process."""

import os
import sys
from pathlib import Path

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
