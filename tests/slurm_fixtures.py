"""A real Slurm cluster for tests: two slurmd nodes (n1, n2) on this machine, started once per session.

Use it from any test directory by importing the fixture into that directory's conftest.py:

    from slurm_fixtures import slurm_cluster  # noqa: F401

A test that takes ``slurm_cluster`` runs with ``SLURM_CONF`` pointing at the cluster (sbatch,
squeue, srun and utils/slurm.py all use it), or is skipped saying why the daemons cannot run (not
root, packages missing, start failed). The cluster is brought up by tools/slurm_start.sh in a
private state directory on free ports, shared by every test of the session however many conftests
import the fixture, and stopped by tools/slurm_stop.sh at the end.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NODES = 2
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "srun")


@dataclass(frozen=True)
class SlurmCluster:
    conf: Path  # its slurm.conf (also exported as SLURM_CONF)
    state_dir: Path
    nodes: int


_cluster: SlurmCluster | None = None
_unavailable: str | None = None


def free_port_base(count: int) -> int:
    """A port P such that P .. P+count-1 are free now (slurmctld on P, slurmd i on P+i)."""
    for base in range(17817, 30000, 50):
        try:
            for port in range(base, base + count):
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                    s.bind(("0.0.0.0", port))
            return base
        except OSError:
            continue
    raise RuntimeError("no free ports for Slurm")


def unavailable_reason() -> str | None:
    """Why a Slurm cluster cannot run here, or None."""
    if os.geteuid() != 0:
        return "the local Slurm needs root (slurmd starts jobs as the submitting user)"
    missing = [d for d in DAEMONS if shutil.which(d) is None]
    if missing:
        return (
            f"Slurm/munge not installed ({', '.join(missing)} missing): see tools/apt-packages.txt"
        )
    return None


def _start(config) -> None:
    global _cluster, _unavailable
    _unavailable = unavailable_reason()
    if _unavailable:
        return
    # Not under pytest's tmp dirs: munged runs as user munge and must be able to enter its
    # directory.
    state_dir = Path(tempfile.mkdtemp(prefix="slurm-test-"))
    started = subprocess.run(
        [
            str(ROOT / "tools" / "slurm_start.sh"),
            "--nodes",
            str(NODES),
            "--state_dir",
            str(state_dir),
            "--port",
            str(free_port_base(NODES + 1)),
        ],
        capture_output=True,
        text=True,
    )
    previous_conf = os.environ.get("SLURM_CONF")

    def stop():
        subprocess.run(
            [str(ROOT / "tools" / "slurm_stop.sh"), "--state_dir", str(state_dir)],
            capture_output=True,
        )
        shutil.rmtree(state_dir, ignore_errors=True)
        if previous_conf is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = previous_conf

    config.add_cleanup(stop)
    if started.returncode != 0:
        _unavailable = f"tools/slurm_start.sh failed:\n{started.stderr}"
        return
    conf = state_dir / "slurm.conf"
    assert started.stdout.strip() == f"export SLURM_CONF={conf}", started.stdout
    os.environ["SLURM_CONF"] = str(conf)
    _cluster = SlurmCluster(conf, state_dir, NODES)


@pytest.fixture(scope="session")
def slurm_cluster(request) -> SlurmCluster:
    if _cluster is None and _unavailable is None:
        _start(request.config)
    if _unavailable:
        pytest.skip(_unavailable)
    return _cluster
