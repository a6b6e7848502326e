"""espnet_ext.jobs.running and utils/pipeline.sh clear_job_dir: a stage's job directory is not cleared while
a Slurm job an earlier run submitted there may still write it (a stand-in squeue tells the job's state)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def squeue(tmp_path, monkeypatch):
    """Set the stand-in squeue's answer: 'RUNNING', 'COMPLETED' or 'purged' (Slurm forgot the job)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")

    def answer(state):
        body = (
            "echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1"
            if state == "purged"
            else f'echo "N/A|{state}|None"'
        )
        (bin_dir / "squeue").write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / "squeue").chmod(0o755)

    return answer


def job_dir(tmp_path):
    logdir = tmp_path / "exp" / "stats" / "logdir"
    (logdir / "q").mkdir(parents=True)
    (logdir / "q" / "stats.job").write_text("4242 abc\n")
    (logdir / "stats.1.log").write_text("# Started at ... (Slurm job 4242, task 1)\n")
    return logdir


def clear(tmp_path, logdir):
    script = f'set -euo pipefail\nstage=1\nstop_stage=1\n. "{ROOT}/utils/pipeline.sh"\nclear_job_dir "{logdir}"\n'
    return subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_a_directory_a_running_job_writes_is_kept_and_the_job_named(tmp_path, squeue):
    logdir = job_dir(tmp_path)
    squeue("RUNNING")
    out = clear(tmp_path, logdir)
    assert out.returncode == 1
    assert (
        f"{logdir / 'q' / 'stats.job'}: Slurm job 4242 of an earlier run is still RUNNING"
        in out.stderr
    )
    assert "'scancel 4242'" in out.stderr
    assert (logdir / "stats.1.log").exists()


@pytest.mark.parametrize("state", ["COMPLETED", "purged"])
def test_a_directory_of_ended_jobs_is_cleared(tmp_path, squeue, state):
    logdir = job_dir(tmp_path)
    squeue(state)
    out = clear(tmp_path, logdir)
    assert out.returncode == 0, out.stderr
    assert not logdir.exists()


def test_the_command_lists_every_running_job(tmp_path, squeue):
    logdir = job_dir(tmp_path)
    (logdir / "train" / "q").mkdir(parents=True)
    (logdir / "train" / "q" / "x.job").write_text("4243 def\n")
    squeue("PENDING")
    out = subprocess.run(
        [sys.executable, "-m", "espnet_ext.jobs.running", str(tmp_path / "exp")],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1
    assert "job 4242" in out.stderr and "job 4243" in out.stderr and "still PENDING" in out.stderr
