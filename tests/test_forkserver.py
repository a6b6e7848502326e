"""tests/forkserver.py: a job run through the fork server behaves as the same ``python -m`` in a fresh
interpreter (arguments, stdio, working directory, environment, exit codes, signals), and a job whose
environment changes what imports do runs in a fresh interpreter."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import forkserver

PROBE = """\
import json, os, sys, time
mode = sys.argv[1]
if mode == "report":
    print(json.dumps({"argv": sys.argv[1:], "path0": sys.path[0], "cwd": os.getcwd(), "name": __name__,
                      "probe": os.environ.get("PROBE"), "stdin": sys.stdin.read(),
                      "preloaded": "torch" in sys.modules}))
    print("on stderr", file=sys.stderr)
    sys.exit(3)
if mode == "read":
    print(open(sys.argv[2]).read(), end="")
    sys.exit(0)
if mode == "raise":
    raise ValueError("boom")
if mode == "exit_text":
    sys.exit("a message")
if mode == "sleep":
    print(os.getpid(), flush=True)
    time.sleep(60)
"""


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    """The session's fork server (conftest), or one of this module's own where it is off."""
    running = getattr(request.config, "forkserver", None)
    if running is not None:
        yield running[1] / "socket"
        return
    directory = tmp_path_factory.mktemp("forkserver")
    socket_path = directory / "socket"
    proc = subprocess.Popen([sys.executable, forkserver.__file__, str(socket_path)])
    yield socket_path
    proc.terminate()
    proc.wait()


@pytest.fixture
def probe(server, tmp_path):
    """(run, cwd): run(args, **kwargs) runs ``python -m forkprobe ARGS`` through a shim of ``server``."""
    deadline = time.time() + 120
    while not server.exists():  # the server binds its socket once its imports are done
        assert time.time() < deadline, "the fork server did not start"
        time.sleep(0.2)
    (tmp_path / "forkprobe.py").write_text(PROBE)
    shim = forkserver.shim(tmp_path / "bin", server, modules="forkprobe")
    env = {**os.environ, "PATH": os.pathsep.join([str(shim), os.environ["PATH"]])}

    def run(args, extra_env=None, **kwargs):
        return subprocess.run(
            ["python", "-m", "forkprobe", *args],
            cwd=tmp_path,
            env={**env, **(extra_env or {})},
            capture_output=True,
            text=True,
            timeout=120,
            **kwargs,
        )

    return run, tmp_path


def test_a_job_sees_its_arguments_stdio_directory_and_environment(probe):
    run, cwd = probe
    out = run(["report", "x y", "--z"], {"PROBE": "value"}, input="some input")
    assert out.returncode == 3
    report = json.loads(out.stdout)
    assert report == {
        "argv": ["report", "x y", "--z"],
        "path0": str(cwd),
        "cwd": str(cwd),
        "name": "__main__",
        "probe": "value",
        "stdin": "some input",
        "preloaded": True,  # forked from the server
    }
    assert out.stderr == "on stderr\n"


def test_exit_codes_are_pythons(probe):
    run, _ = probe
    raised = run(["raise"])
    assert raised.returncode == 1
    assert "ValueError: boom" in raised.stderr and "Traceback" in raised.stderr
    text = run(["exit_text"])
    assert (text.returncode, text.stderr) == (1, "a message\n")


def test_an_import_time_variable_gets_a_fresh_interpreter(probe, server):
    run, _ = probe
    out = run(["report"], {"ESPNET_EXT_TYPECHECK": "1"}, input="")
    assert out.returncode == 3
    assert json.loads(out.stdout)["preloaded"] is False
    noted = server.with_name("fresh_interpreters.log").read_text().splitlines()
    assert "forkprobe: ESPNET_EXT_TYPECHECK" in noted


def _sleeping_job(cwd: Path) -> tuple[subprocess.Popen, int]:
    """The client of a sleeping probe job, and the job's pid."""
    env = {**os.environ, "PATH": os.pathsep.join([str(cwd / "bin"), os.environ["PATH"]])}
    proc = subprocess.Popen(
        ["python", "-m", "forkprobe", "sleep"], cwd=cwd, env=env, stdout=subprocess.PIPE, text=True
    )
    job = int(proc.stdout.readline())
    assert job != proc.pid  # forked by the server, not the client itself
    return proc, job


def _ended(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except OSError:
        return True
    return state == "Z"


def test_signals_reach_the_job_and_its_death_is_reported(probe):
    proc, job = _sleeping_job(probe[1])
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM
    assert _ended(job)


def test_a_job_whose_client_is_killed_is_killed(probe):
    proc, job = _sleeping_job(probe[1])
    proc.kill()
    proc.wait()
    deadline = time.time() + 30
    while not _ended(job):
        assert time.time() < deadline, "the job outlived its client"
        time.sleep(0.1)


def test_a_job_reads_the_descriptors_its_client_inherited(probe):
    """bash's process substitution hands a command /dev/fd/N."""
    _, cwd = probe
    env = {**os.environ, "PATH": os.pathsep.join([str(cwd / "bin"), os.environ["PATH"]])}
    out = subprocess.run(
        ["bash", "-c", "python -m forkprobe read <(echo substituted)"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (out.returncode, out.stdout) == (0, "substituted\n"), out.stderr


def test_the_server_preloads_every_task_module_install_fills():
    """A job's ``install()`` then imports nothing of ESPnet's: it only adds our classes to the tables."""
    from espnet_ext.registry import ESPNET_TASKS

    assert set(ESPNET_TASKS) <= set(forkserver.PRELOAD)
