"""The Slurm backend against a real cluster, through its command utils/slurm.py (espnet_ext/jobs/slurm.py)."""

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from espnet_ext.jobs.slurm import batch_script, job_name
from espnet_ext.jobs.spec import last_exit_code, parse_command_line

ROOT = Path(__file__).resolve().parents[2]
SLURM = [sys.executable, str(ROOT / "utils" / "slurm.py")]
PROBE = [sys.executable, str(Path(__file__).with_name("probe_job.py"))]

pytestmark = pytest.mark.slurm


def slurm(args, cwd, timeout=90):
    return subprocess.run(
        SLURM + [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def job_id_of(log: Path) -> str:
    return re.search(r"\(Slurm job (\d+)", log.read_text()).group(1)


def squeue_state(job_id: str) -> str:
    listing = subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"], capture_output=True, text=True
    )
    return listing.stdout.strip()


def wait_for(condition, what: str, seconds: float = 60):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


# --- without a cluster
# ------------------------------------------------------------------------------------------


def test_job_name_drops_the_range_token():
    assert job_name("exp/log/fbank.JOB.log", "JOB") == "fbank"
    assert job_name("exp/train.log", None) == "train"


def test_batch_script_is_valid_bash_and_substitutes_the_task(tmp_path):
    request = parse_command_line(["--requeue", "JOB=1:2", "log/x.JOB.log", "echo", "it's JOB"])
    script = tmp_path / "x.sh"
    script.write_text(batch_script(request, str(tmp_path), per_node=False))
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    # Run it as Slurm would for task 2 (without Slurm: no srun, no scontrol needed on this path).
    ran = subprocess.run(
        ["bash", str(script)],
        capture_output=True,
        text=True,
        env={
            "PATH": "/usr/bin:/bin",
            "SLURM_ARRAY_TASK_ID": "2",
            "SLURM_JOB_ID": "77",
            "SLURM_RESTART_COUNT": "1",
        },
    )
    lines = ran.stdout.splitlines()
    assert ran.returncode == 0
    assert lines[0] == "# echo 'it'\"'\"'s 2'"
    assert re.fullmatch(r"# Started at .* \(Slurm job 77, task 2, restart 1\)", lines[1])
    assert lines[2] == "it's 2"
    assert lines[3].startswith("# Ended (code 0) at ")


@pytest.mark.parametrize("saved", [True, False])
def test_time_limit_warning_requeues_only_a_run_that_saved_its_progress(tmp_path, saved):
    """--requeue_progress: USR1 (Slurm's warning before the time limit) requeues the job when the file
    changed during the run; a run that saved nothing is left to end, saying why (scontrol faked)."""
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin/scontrol"
    fake.write_text('#!/bin/sh\necho "$@" >> scontrol.calls\n')
    fake.chmod(0o755)
    (tmp_path / "ckpt").write_text("0")  # a checkpoint from an earlier run
    save = "sleep 1.1; echo 1 > ckpt.new && mv ckpt.new ckpt; " if saved else ""  # a later mtime
    waiting = f"{save}touch ready; while [ ! -f stop ]; do sleep 0.05; done"
    request = parse_command_line(
        ["--requeue", "--requeue_progress", "ckpt", "log/t.log", "bash", "-c", waiting]
    )
    script = tmp_path / "t.sh"
    script.write_text(batch_script(request, str(tmp_path), per_node=False))
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "SLURM_JOB_ID": "77"}
    with open(tmp_path / "out", "w") as out:
        job = subprocess.Popen(["bash", str(script)], stdout=out, env=env)
        try:
            wait_for(lambda: (tmp_path / "ready").exists(), "the command to start")
            job.send_signal(signal.SIGUSR1)
            told = "requeueing job 77" if saved else "unchanged since this run started"
            wait_for(lambda: told in (tmp_path / "out").read_text(), "the trap", 10)
        finally:
            (tmp_path / "stop").touch()
            job.wait(timeout=30)
    assert job.returncode == 0
    calls = tmp_path / "scontrol.calls"
    assert (calls.read_text() == "requeue 77\n") if saved else not calls.exists()
    if not saved:
        assert (
            "a --time (conf/slurm.conf) longer than it takes between two saves"
            in (tmp_path / "out").read_text()
        )


def fake_slurm(tmp_path, squeue: str) -> dict:
    """An environment whose sbatch records its calls (job 101) and whose squeue runs the bash ``squeue``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(
        f'#!/bin/bash\necho "$@" >> {tmp_path}/sbatch.calls\necho 101\n'
    )
    (bin_dir / "squeue").write_text(f"#!/bin/bash\n{squeue}\n")
    for tool in ("sbatch", "squeue"):
        (bin_dir / tool).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_a_log_a_running_job_writes_is_not_taken_over_without_our_record(tmp_path):
    # job 100 (submitted before records existed, or its pipeline died right after sbatch) still runs
    env = fake_slurm(tmp_path, 'echo "N/A|RUNNING|None"')
    log = tmp_path / "exp" / "train.log"
    log.parent.mkdir()
    header = "# Started at 2026-01-01T00:00:00 on n1 (Slurm job 100)\n"
    log.write_text("# train\n" + header + "epoch 3\n")
    launch = subprocess.run(
        [
            sys.executable,
            "-m",
            "espnet_ext.jobs.launch",
            "--cmd",
            shlex.join(SLURM),
            "--log",
            str(log),
        ]
        + ["--", "true"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert launch.returncode == 2, launch.stderr
    assert "Slurm job 100 (named in this log's last header) is still RUNNING" in launch.stderr
    assert log.read_text().endswith(header + "epoch 3\n")  # kept in place, whole
    assert not (tmp_path / "exp" / "train.1.log").exists()
    assert not (tmp_path / "sbatch.calls").exists()


def test_squeue_failing_is_retried_and_never_taken_for_an_ended_job(tmp_path, monkeypatch):
    from espnet_ext.errors import ConfigError
    from espnet_ext.jobs import slurm as backend

    monkeypatch.setattr(backend, "SQUEUE_RETRY_SECONDS", 0.0)
    failures = tmp_path / "failures"
    failures.write_text("2")
    squeue = (
        f'n=$(cat {failures}); if [ "$n" -gt 0 ]; then echo $((n - 1)) > {failures}; '
        'echo "slurm_load_jobs error: Socket timed out on send/recv operation" >&2; exit 1; fi\n'
        'echo "N/A|RUNNING|None"'
    )
    monkeypatch.setenv("PATH", fake_slurm(tmp_path, squeue)["PATH"])
    assert backend.states_on_its_way("100") == ["RUNNING"]  # after two failures
    failures.write_text("99")
    with pytest.raises(ConfigError, match="cannot tell whether Slurm job 100 .* still runs"):
        backend.states_on_its_way("100")
    (tmp_path / "bin" / "squeue").write_text(
        "#!/bin/bash\necho 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1\n"
    )
    assert backend.states_on_its_way("100") == []  # purged after it ended


# --- against the cluster
# ----------------------------------------------------------------------------------------


def test_array_of_three_tasks_each_writes_its_own_output(slurm_cluster, tmp_path):
    result = slurm(["JOB=1:3", "log/w.JOB.log", *PROBE, "write", "out.JOB", "task JOB"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert re.search(r"submitted job \d+ \(3 tasks\)", result.stderr)
    job_ids = set()
    for i in (1, 2, 3):
        assert (tmp_path / f"out.{i}").read_text() == f"task {i}"
        log = tmp_path / f"log/w.{i}.log"
        lines = log.read_text().splitlines()
        assert lines[0] == f"# {' '.join(PROBE)} write out.{i} 'task {i}'"
        assert re.fullmatch(rf"# Started at .* \(Slurm job \d+, task {i}\)", lines[1])
        assert last_exit_code(log) == 0
        job_ids.add(job_id_of(log))
    assert len(job_ids) == 3  # array tasks have their own job ids
    assert (tmp_path / "log/q/w.sh").is_file()


def test_failing_task_exits_1_naming_its_log(slurm_cluster, tmp_path):
    result = slurm(
        [
            "JOB=1:3",
            "log/f.JOB.log",
            "bash",
            "-c",
            f"[ JOB != 2 ] || exec {' '.join(PROBE)} fail 3",
        ],
        tmp_path,
    )
    assert result.returncode == 1
    assert "1 of 3 jobs failed" in result.stderr
    assert "JOB=2: exit code 3; log: log/f.2.log" in result.stderr
    assert "about to fail with code 3" in result.stderr
    assert (
        last_exit_code(tmp_path / "log/f.1.log") == 0
        and last_exit_code(tmp_path / "log/f.3.log") == 0
    )


def test_dependency_on_a_failed_job_is_reported_not_waited_for(slurm_cluster, tmp_path):
    failed = slurm(["log/first.log", *PROBE, "fail", "4"], tmp_path)
    assert failed.returncode == 1 and "exit code 4" in failed.stderr
    first_id = job_id_of(tmp_path / "log/first.log")
    started = time.monotonic()
    result = slurm(
        [
            "--dependency",
            f"afterok:{first_id}",
            "log/second.log",
            *PROBE,
            "write",
            "second.out",
            "ran",
        ],
        tmp_path,
        timeout=60,
    )
    assert result.returncode == 1
    assert (
        f"never ran: its dependency afterok:{first_id} can never be satisfied; cancelled"
        in result.stderr
    )
    assert "log/second.log" in result.stderr
    assert not (tmp_path / "second.out").exists()
    assert time.monotonic() - started < 30


def test_dependency_on_a_successful_job_runs_after_it(slurm_cluster, tmp_path):
    first = slurm(["log/a.log", *PROBE, "write", "a.out", "a"], tmp_path)
    assert first.returncode == 0, first.stderr
    result = slurm(
        [
            "--dependency",
            f"afterok:{job_id_of(tmp_path / 'log/a.log')}",
            "log/b.log",
            *PROBE,
            "write",
            "b.out",
            "b",
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "b.out").read_text() == "b"


def test_gpu_request_refused_at_submission_is_surfaced_verbatim(slurm_cluster, tmp_path):
    result = slurm(["--gpu", "1", "log/gpu.log", *PROBE, "write", "gpu.out", "x"], tmp_path)
    assert result.returncode == 1
    assert "sbatch: error: Invalid generic resource (gres) specification" in result.stderr
    assert "log: log/gpu.log" in result.stderr
    assert (
        "sbatch: error: Invalid generic resource (gres) specification"
        in (tmp_path / "log/gpu.log").read_text()
    )
    assert not (tmp_path / "gpu.out").exists()


def test_max_jobs_run_throttles_the_array(slurm_cluster, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    result = slurm(
        ["--max_jobs_run", "1", "JOB=1:3", "log/o.JOB.log", *PROBE, "overlap", marks, "JOB", "0.3"],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert [int((marks / f"{i}.seen").read_text()) for i in (1, 2, 3)] == [1, 1, 1]


def test_multi_node_job_runs_the_command_on_every_node(slurm_cluster, tmp_path):
    result = slurm(["--num_nodes", "2", "log/mn.log", *PROBE, "where", "where.txt"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted((tmp_path / "where.txt").read_text().splitlines()) == ["0 n1", "1 n2"]


def test_configured_options_are_accepted_and_unknown_ones_refused(slurm_cluster, tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        "command sbatch --export=ALL\noption name=* --job-name $0\noption mem=* --mem $0\n"
    )
    result = slurm(
        [
            "--config",
            conf,
            "--name",
            "named",
            "--mem",
            "100M",
            "log/n.log",
            "bash",
            "-c",
            "echo $SLURM_JOB_NAME > name.txt",
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "name.txt").read_text().strip() == "named"
    refused = slurm(["--config", conf, "--gpu", "1", "log/g.log", "true"], tmp_path)
    assert refused.returncode == 2
    assert f"{conf}: --gpu 1: no 'option gpu=...' line" in refused.stderr
    refused = slurm(["--partition", "x", "log/p.log", "true"], tmp_path)
    assert refused.returncode == 2 and "unknown option --partition" in refused.stderr
    assert not (tmp_path / "log/g.log").exists() and not (tmp_path / "log/p.log").exists()


def test_interrupting_the_wait_cancels_the_job(slurm_cluster, tmp_path):
    waiting = subprocess.Popen(
        SLURM + ["log/h.log", *PROBE, "hang", "pid"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(
        lambda: (tmp_path / "pid").exists() and (tmp_path / "pid").read_text(), "the job to start"
    )
    job_id = job_id_of(tmp_path / "log/h.log")
    waiting.send_signal(signal.SIGTERM)
    _, stderr = waiting.communicate(timeout=30)
    assert waiting.returncode == 143
    assert f"cancelled job {job_id}" in stderr
    wait_for(lambda: squeue_state(job_id) in ("CANCELLED", ""), "the job to be cancelled", 30)


def _requeue_test(tmp_path, interrupt, options=()):
    """A counting job, interrupted once by ``interrupt(job_id)``, must finish by resuming from its checkpoint."""
    waiting = subprocess.Popen(
        SLURM
        + [
            "--requeue",
            *options,
            "--time",
            "10",
            "log/train.log",
            *PROBE,
            "count",
            "ckpt",
            "6",
            "0.3",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ckpt = tmp_path / "ckpt"
    wait_for(lambda: ckpt.exists() and int(ckpt.read_text()) >= 2, "the job to make progress")
    interrupt(job_id_of(tmp_path / "log/train.log"))
    _, stderr = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, stderr
    assert ckpt.read_text() == "6"
    log = (tmp_path / "log/train.log").read_text()
    runs = re.findall(r"^# Started at .*$", log, flags=re.MULTILINE)
    assert len(runs) == 2 and runs[1].endswith(", restart 1)"), log
    assert "DUE TO JOB REQUEUE" in log
    resumed_at = [int(n) for n in re.findall(r"^resuming at (\d+)$", log, flags=re.MULTILINE)]
    assert resumed_at[0] == 0 and resumed_at[1] >= 2, log  # the rerun continued, not restarted
    assert last_exit_code(tmp_path / "log/train.log") == 0


def test_requeued_job_resumes_from_its_checkpoint(slurm_cluster, tmp_path):
    _requeue_test(
        tmp_path, lambda job_id: subprocess.run(["scontrol", "requeue", job_id], check=True)
    )


def test_job_requeues_itself_on_the_time_limit_warning(slurm_cluster, tmp_path):
    # What Slurm sends REQUEUE_SIGNAL_SECONDS before the time limit (--signal=B:USR1@...): USR1 to
    # the batch shell.
    def warn(job_id):
        subprocess.run(["scancel", "--batch", "--signal=USR1", job_id], check=True)

    _requeue_test(tmp_path, warn, ["--requeue_progress", "ckpt"])  # as the pipelines' training
    assert "# Time limit near: requeueing job" in (tmp_path / "log/train.log").read_text()


def _launch_training(tmp_path, steps, **popen):
    """The pipelines' training launch (espnet_ext.jobs.launch through utils/slurm.py) of a counting job."""
    command = [
        sys.executable,
        "-m",
        "espnet_ext.jobs.launch",
        "--cmd",
        f"{sys.executable} {ROOT / 'utils/slurm.py'} --requeue",
        "--log",
        "exp/train.log",
        "--",
        *PROBE,
        "count",
        "ckpt",
        str(steps),
        "0.3",
    ]
    return subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen
    )


def test_a_rerun_waits_for_the_job_its_dead_pipeline_left_running(slurm_cluster, tmp_path):
    # The pipeline's shell and its slurm.py die at once (a login node's reboot): the job runs on.
    first = _launch_training(tmp_path, 10, start_new_session=True)
    ckpt = tmp_path / "ckpt"
    wait_for(lambda: ckpt.exists() and int(ckpt.read_text()) >= 2, "the job to make progress")
    job_id = job_id_of(tmp_path / "exp/train.log")
    os.killpg(first.pid, signal.SIGKILL)
    first.communicate(timeout=30)
    assert squeue_state(job_id) == "RUNNING"

    rerun = _launch_training(tmp_path, 10)
    _, stderr = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, stderr
    assert f"job {job_id}, submitted by an earlier run for this same request" in stderr
    assert ckpt.read_text() == "10"
    log = (tmp_path / "exp/train.log").read_text()
    assert len(re.findall(r"^# Started at ", log, flags=re.MULTILINE)) == 1, log  # not run twice
    assert last_exit_code(tmp_path / "exp/train.log") == 0
    assert not (tmp_path / "exp/train.1.log").exists()  # the running job's log stayed in place


def test_another_request_on_the_logs_of_a_running_job_is_refused(slurm_cluster, tmp_path):
    first = subprocess.Popen(
        SLURM + ["log/h.log", *PROBE, "hang", "pid"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    wait_for(
        lambda: (tmp_path / "pid").exists() and (tmp_path / "pid").read_text(), "the job to start"
    )
    job_id = job_id_of(tmp_path / "log/h.log")
    os.killpg(first.pid, signal.SIGKILL)
    first.communicate(timeout=30)
    try:
        other = slurm(["log/h.log", *PROBE, "write", "out", "x"], tmp_path)
        assert other.returncode == 2, other.stderr
        assert f"log/q/h.job: Slurm job {job_id}, submitted by an earlier run" in other.stderr
        assert f"'scancel {job_id}'" in other.stderr
        assert not (tmp_path / "out").exists()
        assert (tmp_path / "log/h.log").exists()  # the running job's log untouched
    finally:
        subprocess.run(["scancel", job_id])
    wait_for(lambda: squeue_state(job_id) in ("CANCELLED", ""), "the job to be cancelled", 30)
    again = slurm(["log/h.log", *PROBE, "write", "out", "x"], tmp_path)  # ended: submitted anew
    assert again.returncode == 0 and (tmp_path / "out").read_text() == "x", again.stderr


def test_without_an_answer_from_squeue_nothing_is_moved_or_cleared(tmp_path, monkeypatch):
    env = fake_slurm(tmp_path, "echo 'Socket timed out on send/recv operation' >&2; exit 1")
    env["ESPNET_EXT_SQUEUE_RETRY_SECONDS"] = "0"
    log = tmp_path / "exp" / "train.log"
    log.parent.mkdir()
    log.write_text("# Started at 2026-01-01T00:00:00 on n1 (Slurm job 100)\n")

    def launch(cmd):
        return subprocess.run(
            [sys.executable, "-m", "espnet_ext.jobs.launch", "--cmd", cmd, "--log", str(log), "--"]
            + ["true"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )

    through_slurm = launch(shlex.join(SLURM))
    assert through_slurm.returncode == 2 and "Traceback" not in through_slurm.stderr
    assert "cannot tell whether Slurm job 100" in through_slurm.stderr
    assert log.exists() and not (tmp_path / "sbatch.calls").exists()
    local = launch(f"{sys.executable} {ROOT / 'utils' / 'run.py'}")  # squeue not asked at all
    assert local.returncode == 0, local.stderr
    assert (tmp_path / "exp" / "train.1.log").read_text().startswith("# Started at 2026-01-01")
    (tmp_path / "exp" / "logdir" / "q").mkdir(parents=True)
    (tmp_path / "exp" / "logdir" / "q" / "stats.job").write_text("100 abc\n")
    cleared = subprocess.run(
        [sys.executable, "-m", "espnet_ext.jobs.running", str(tmp_path / "exp" / "logdir")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert cleared.returncode == 2 and "Traceback" not in cleared.stderr
