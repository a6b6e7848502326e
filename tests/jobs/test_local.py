"""The local backend through its command, utils/run.py (espnet_ext/jobs/local.py + cli.py)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from espnet_ext.jobs.spec import last_exit_code

ROOT = Path(__file__).resolve().parents[2]
RUN = [sys.executable, str(ROOT / "utils" / "run.py")]
PROBE = [sys.executable, str(Path(__file__).with_name("probe_job.py"))]


def has_ended(pid: int, within: float = 10.0) -> bool:
    """Whether the process has terminated: gone, or a zombie. A job whose runner was interrupted while
    polling it can outlive the runner as a zombie until the machine's init reaps it."""
    deadline = time.monotonic() + within
    while True:
        try:
            os.kill(pid, 0)
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (ProcessLookupError, FileNotFoundError):
            return True
        if state == "Z" or time.monotonic() > deadline:
            return state == "Z"
        time.sleep(0.1)


def run(args, cwd, timeout=60):
    return subprocess.run(
        RUN + [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def test_array_substitutes_job_in_log_and_command(tmp_path):
    result = run(
        ["JOB=1:3", "log/write.JOB.log", *PROBE, "write", "out.JOB.txt", "I am JOB"], tmp_path
    )
    assert result.returncode == 0, result.stderr
    for i in (1, 2, 3):
        assert (tmp_path / f"out.{i}.txt").read_text() == f"I am {i}"
        lines = (tmp_path / f"log/write.{i}.log").read_text().splitlines()
        # Header: the command line as run (JOB replaced, quoted so it can be pasted into a shell),
        # start time.
        assert lines[0] == f"# {' '.join(PROBE)} write out.{i}.txt 'I am {i}'"
        assert lines[1].startswith("# Started at ")
        assert lines[-1].startswith("# Ended (code 0) at ")
    assert result.stderr == ""


def test_arguments_reach_the_program_exactly(tmp_path):
    args = ["a b", "$HOME", "|", "it's", "*"]
    result = run(["log/argv.log", *PROBE, "argv", *args], tmp_path)
    assert result.returncode == 0, result.stderr
    assert repr(args) in (tmp_path / "log/argv.log").read_text()


def test_failed_job_exits_1_naming_it_and_its_log(tmp_path):
    result = run(
        [
            "JOB=1:3",
            "log/y.JOB.log",
            "bash",
            "-c",
            f"[ JOB != 2 ] || exec {' '.join(PROBE)} fail 3",
        ],
        tmp_path,
    )
    assert result.returncode == 1
    assert "1 of 3 jobs failed" in result.stderr
    assert "JOB=2: exit code 3; log: log/y.2.log" in result.stderr
    assert "about to fail with code 3" in result.stderr  # the tail of the failed log
    assert "log/y.1.log" not in result.stderr and "log/y.3.log" not in result.stderr
    assert last_exit_code(tmp_path / "log/y.2.log") == 3
    assert (
        last_exit_code(tmp_path / "log/y.1.log") == 0
        and last_exit_code(tmp_path / "log/y.3.log") == 0
    )


def test_missing_program_is_a_failed_job_with_the_reason_in_its_log(tmp_path):
    result = run(["log/nope.log", "no-such-program-xyz", "arg"], tmp_path)
    assert result.returncode == 1
    assert "cannot run no-such-program-xyz" in result.stderr and "log/nope.log" in result.stderr
    assert last_exit_code(tmp_path / "log/nope.log") == 127


def test_max_jobs_run_is_honoured(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    result = run(
        ["--max_jobs_run", "2", "JOB=1:5", "log/o.JOB.log", *PROBE, "overlap", marks, "JOB", "0.4"],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    seen = [int((marks / f"{i}.seen").read_text()) for i in range(1, 6)]
    assert max(seen) <= 2, seen


def test_jobs_run_in_parallel(tmp_path):
    # Each job waits until the other one runs too: only possible when they run at the same time.
    marks = tmp_path / "marks"
    marks.mkdir()
    result = run(
        [
            "--max-jobs-run",
            "2",
            "N=1:2",
            "log/m.N.log",
            "bash",
            "-c",
            f"exec {' '.join(PROBE)} meet {marks} N $((3 - N)) 30",
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr + (tmp_path / "log/m.1.log").read_text()


@pytest.mark.parametrize(
    "given, max_jobs, jobs, expected",
    [
        ("4", "2", "1:3", "2"),
        ("4", "3", "1:3", "1"),
        ("4", "8", "1:2", "2"),
        ("4", "2", "1:1", "4"),
    ],
)
def test_jobs_side_by_side_share_the_threads_they_were_given(
    tmp_path, given, max_jobs, jobs, expected
):
    # nproc is how recipes size their threads: it must see the share, not every core.
    result = subprocess.run(
        [*RUN, "--max_jobs_run", max_jobs, f"JOB={jobs}", "log/t.JOB.log", "bash", "-c",
         "echo $OMP_NUM_THREADS $MKL_NUM_THREADS $(nproc) > out.JOB"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={**os.environ, "OMP_NUM_THREADS": given, "MKL_NUM_THREADS": given},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    outputs = sorted(tmp_path.glob("out.*"))
    assert len(outputs) == int(jobs.split(":")[1])
    for out in outputs:
        assert out.read_text().split() == [expected] * 3


@pytest.mark.parametrize(
    "args, message",
    [
        (["--foo", "3", "l.log", "true"], "run.py: unknown option --foo (known: --config"),
        (["--mem", "lots", "l.log", "true"], "run.py: --mem 'lots'"),
        (["JOB=1:2", "l.log", "true"], "does not contain JOB"),
        (["--num_nodes", "2", "l.log", "true"], "the local backend runs on this machine only"),
        (["l.log"], "missing the command"),
    ],
)
def test_bad_requests_exit_2_before_running_anything(tmp_path, args, message):
    result = run(args, tmp_path)
    assert result.returncode == 2
    assert message in result.stderr
    assert not (tmp_path / "l.log").exists()


def test_ignored_options_are_accepted(tmp_path):
    result = run(
        [
            "--gpu",
            "1",
            "--mem",
            "2G",
            "--time",
            "1:00:00",
            "--num_threads",
            "2",
            "--config",
            "conf/slurm.conf",
            "--requeue",
            "--dependency",
            "afterok:1",
            "log/ok.log",
            "true",
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert last_exit_code(tmp_path / "log/ok.log") == 0


def test_help_lists_options_and_what_local_ignores(tmp_path):
    result = run(["--help"], tmp_path)
    assert result.returncode == 0
    assert "--max_jobs_run" in result.stdout and "Accepted and ignored" in result.stdout


@pytest.mark.parametrize(
    "sig, code, inherited",
    [
        (signal.SIGTERM, 143, signal.SIG_DFL),
        (signal.SIGINT, 130, signal.SIG_DFL),
        # A runner started in the background by a non-interactive shell (a script's "cmd &", CI)
        # inherits "ignore SIGINT"; an interrupt sent to it must still end it and its jobs.
        (signal.SIGINT, 130, signal.SIG_IGN),
    ],
    ids=["SIGTERM", "SIGINT", "SIGINT-inherited-ignored"],
)
def test_interrupt_kills_the_jobs(tmp_path, sig, code, inherited):
    runner = subprocess.Popen(
        RUN + ["JOB=1:2", "log/h.JOB.log", *PROBE, "hang", "pid.JOB"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, inherited),
    )
    pid_files = [tmp_path / "pid.1", tmp_path / "pid.2"]
    deadline = time.monotonic() + 90  # job start-up (python + imports) is slow on a loaded machine
    while not all(p.exists() and p.read_text() for p in pid_files):
        assert time.monotonic() < deadline, "jobs did not start"
        time.sleep(0.05)
    job_pids = [int(p.read_text()) for p in pid_files]
    runner.send_signal(sig)
    _, stderr = runner.communicate(timeout=20)  # ending takes at most KILL_GRACE_SECONDS
    assert runner.returncode == code, stderr
    for pid in job_pids:
        assert has_ended(pid), f"job {pid} still running"
    # The logs say how the jobs ended: killed by SIGTERM (128 + 15).
    assert last_exit_code(tmp_path / "log/h.1.log") == 143


# The runner's own process, with Popen.poll opening CPython's window: its poll() takes the child's
# wait lock, checks the child, releases the lock. A SIGTERM delivered inside that window (sent
# once both jobs have started) must still end them as SIGTERM does, within the grace period.
INTERRUPTED_INSIDE_POLL = """
import os, signal, subprocess, sys
from espnet_ext.jobs.cli import main
original_poll = subprocess.Popen.poll
sent = []
def poll(self):
    self._waitpid_lock.acquire()
    if not sent and all(os.path.exists(f"pid.{i}") and open(f"pid.{i}").read() for i in (1, 2)):
        sent.append(True)
        os.kill(os.getpid(), signal.SIGTERM)
    self._waitpid_lock.release()
    return original_poll(self)
subprocess.Popen.poll = poll
sys.exit(main(sys.argv[1:], backend="local", prog="run.py"))
"""


def test_interrupt_inside_a_poll_ends_the_jobs_as_sigterm(tmp_path):
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_INSIDE_POLL, "JOB=1:2", "log/h.JOB.log"]
        + [*PROBE, "hang", "pid.JOB"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 143, result.stderr
    for i in (1, 2):
        assert has_ended(int((tmp_path / f"pid.{i}").read_text()))
        # Not SIGKILL (137) after a wait that could not take the lock.
        assert last_exit_code(tmp_path / f"log/h.{i}.log") == 143
    assert time.monotonic() - started < 60  # the jobs hang for 60 s unless killed


def test_a_runner_takes_the_cpu_share_its_pipeline_gives_it(monkeypatch):
    from espnet_ext.jobs.local import available_cpus

    monkeypatch.delenv("ESPNET_EXT_LOCAL_CPUS", raising=False)
    cpus = available_cpus()
    monkeypatch.setenv("ESPNET_EXT_LOCAL_CPUS", "1")
    assert available_cpus() == 1
    monkeypatch.setenv("ESPNET_EXT_LOCAL_CPUS", str(cpus + 5))
    assert available_cpus() == cpus  # a share never adds CPUs
    monkeypatch.setenv("ESPNET_EXT_LOCAL_CPUS", "zero")
    assert available_cpus() == cpus
