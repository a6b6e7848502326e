"""Test-wide environment: the project's tools on PATH, offline NLTK data, one thread per process; and how
the suite is spread over pytest-xdist workers (`-n 2 --dist loadgroup`: one work unit per xdist group)."""

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
# as tools/activate.sh and the recipes' path.sh set them for every job (the fork server compares them)
os.environ["PYTHONNOUSERSITE"] = "1"
os.environ["PYTHONIOENCODING"] = "UTF-8"

from tests import selection, xdist_groups  # noqa: E402 (after the checkout joins sys.path)


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
    import shutil

    server, directory = getattr(config, "forkserver", (None, None))
    if server is not None:
        server.terminate()
        server.wait()
        shutil.rmtree(directory, ignore_errors=True)
    if getattr(config, "xdist_groups_dir", None) is not None:
        shutil.rmtree(config.xdist_groups_dir, ignore_errors=True)


def pytest_configure(config):
    # As our entry points do before they import ESPnet: typeguard's checks off (ESPnet's @typechecked run at
    # import). Without it a test module importing ESPnet first would leave them on for the whole worker,
    # and a later test would run ESPnet's trainer under checks its entry points never see.
    from espnet_ext.registry import install

    install(tasks=())
    _start_forkserver(config)
    _start_xdist_groups(config)


def _start_xdist_groups(config) -> None:
    """On the controller of ``--dist loadgroup``: the folder of the workers' group tables (tests/xdist_groups.py),
    and the work units in collection order (xdist would start with the units holding most tests)."""
    if getattr(config.option, "dist", "no") != "loadgroup" or hasattr(config, "workerinput"):
        return
    import tempfile

    config.xdist_groups_dir = Path(tempfile.mkdtemp(prefix="xdist-groups-"))
    config.option.loadscopereorder = False


def pytest_itemcollected(item):
    selection.mark(item)  # e2e / slow / unit by the module's path (markers: pyproject.toml)


TESTS = ROOT / "tests"


# tryfirst: xdist's own loadgroup reads the marks in its hook of the same name on each worker.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        xdist_groups.mark(item)
    items.sort(key=xdist_groups.schedule_key)


# tryfirst: the table is written before xdist's worker hook sends the collection to the scheduler.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session):
    workerinput = getattr(session.config, "workerinput", {})
    if xdist_groups.WORKERINPUT_KEY in workerinput:
        directory = Path(workerinput[xdist_groups.WORKERINPUT_KEY])
        xdist_groups.write(session.items, directory, workerinput["workerid"])


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    directory = getattr(node.config, "xdist_groups_dir", None)
    if directory is not None:
        node.workerinput[xdist_groups.WORKERINPUT_KEY] = str(directory)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    directory = getattr(config, "xdist_groups_dir", None)
    return (
        None if directory is None else xdist_groups.ReportedGroupScheduling(config, log, directory)
    )
