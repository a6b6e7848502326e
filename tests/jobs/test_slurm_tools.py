"""tools/slurm_start.sh and tools/slurm_stop.sh: bring-up, idempotency, stop by pid."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from slurm_fixtures import free_port_base, unavailable_reason

ROOT = Path(__file__).resolve().parents[2]
START = str(ROOT / "tools" / "slurm_start.sh")
STOP = str(ROOT / "tools" / "slurm_stop.sh")


def tool(*args, env=None):
    return subprocess.run([*args], capture_output=True, text=True, timeout=120, env=env)


def test_bad_options_are_refused():
    for args in (
        ["--nodes", "two"],
        ["--port", "x"],
        ["--frobnicate"],
        ["--state_dir", "/tmp/with space"],
    ):
        result = tool(START, *args)
        assert result.returncode == 2, result.stderr
        assert result.stdout == ""
    assert tool(STOP, "--frobnicate").returncode == 2


def test_help_describes_the_options():
    result = tool(START, "--help")
    assert (
        result.returncode == 0
        and "--state_dir DIR" in result.stdout
        and "export SLURM_CONF" in result.stdout
    )


@pytest.mark.slurm
def test_starting_a_running_cluster_again_is_harmless(slurm_cluster):
    again = tool(
        START, "--nodes", str(slurm_cluster.nodes), "--state_dir", str(slurm_cluster.state_dir)
    )
    assert again.returncode == 0, again.stderr
    assert "already running" in again.stderr
    assert again.stdout == f"export SLURM_CONF={slurm_cluster.conf}\n"
    other = tool(START, "--nodes", "1", "--state_dir", str(slurm_cluster.state_dir))
    assert other.returncode == 1
    assert "a cluster with 2 node(s) is running" in other.stderr and "slurm_stop.sh" in other.stderr


@pytest.mark.slurm
def test_one_node_cluster_runs_a_job_and_stops_by_pid(slurm_cluster, tmp_path):
    # A second, independent cluster next to the session's: its own state, munge and ports.
    state_dir = Path(tempfile.mkdtemp(prefix="slurm-one-"))
    try:
        started = tool(START, "--state_dir", str(state_dir), "--port", str(free_port_base(2)))
        assert started.returncode == 0, started.stderr
        conf = state_dir / "slurm.conf"
        assert started.stdout == f"export SLURM_CONF={conf}\n"
        env = dict(os.environ, SLURM_CONF=str(conf))
        nodes = tool("sinfo", "-h", "-N", "-o", "%N %T", env=env)
        assert nodes.stdout.split() == ["n1", "idle"]
        ran = subprocess.run(
            [
                sys.executable,
                str(ROOT / "utils/slurm.py"),
                "log/x.log",
                "bash",
                "-c",
                "echo $SLURMD_NODENAME > node",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert ran.returncode == 0, ran.stderr
        assert (tmp_path / "node").read_text() == "n1\n"
        pids = [
            int(p.read_text())
            for p in [*state_dir.glob("run/*.pid"), state_dir / "munge/munged.pid"]
        ]
        assert len(pids) == 3  # slurmctld, slurmd n1, munged
    finally:
        stopped = tool(STOP, "--state_dir", str(state_dir))
    assert stopped.returncode == 0, stopped.stderr
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    # The session's cluster is untouched.
    assert tool("sinfo", "-h", "-o", "%D").stdout.strip() == str(slurm_cluster.nodes)
    again = tool(STOP, "--state_dir", str(state_dir))
    assert again.returncode == 0 and "stopping" not in again.stderr
    shutil.rmtree(state_dir, ignore_errors=True)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("runuser") is None, reason="needs root to act as another user"
)
def test_refuses_to_start_without_root(tmp_path):
    if unavailable_reason():
        pytest.skip(unavailable_reason())
    result = tool("runuser", "-u", "nobody", "--", START, "--state_dir", str(tmp_path / "state"))
    assert result.returncode == 1
    assert "must run as root" in result.stderr and result.stdout == ""


def test_tests_say_why_they_skip_without_slurm(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm programs here
    if os.geteuid() == 0:
        assert "Slurm/munge not installed (munged, slurmctld" in unavailable_reason()
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "needs root" in unavailable_reason()
