"""Multi-node ESPnet2 training launch (espnet_ext/jobs/launch.py)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from lm_corpus import write_lm_corpus

from espnet_ext.jobs.launch import (
    first_node_address,
    job_cpus,
    node_command,
    rotate_logs,
    training_command,
)

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ["python", "-m", "espnet_ext.bin.asr_train", "--config", "c.yaml"]


def test_single_node_runs_the_training_as_one_job():
    command = training_command(
        ["utils/run.py", "--requeue"], "exp/train.log", TRAIN, ngpu=0, num_nodes=1
    )
    assert command == [
        "utils/run.py",
        "--requeue",
        "--gpu",
        "0",
        "exp/train.log",
        *TRAIN,
        "--ngpu",
        "0",
    ]
    # K GPUs on one node: ESPnet spawns one process per GPU itself.
    command = training_command(["utils/slurm.py"], "exp/train.log", TRAIN, ngpu=4, num_nodes=1)
    assert command == [
        "utils/slurm.py",
        "--gpu",
        "4",
        "exp/train.log",
        *TRAIN,
        "--ngpu",
        "4",
        "--multiprocessing_distributed",
        "true",
    ]


def test_multi_node_runs_espnet_slurm_launcher_on_each_node():
    command = training_command(
        ["utils/slurm.py"], "exp/train.log", TRAIN, ngpu=2, num_nodes=3, master_port=29123
    )
    assert command[:6] == ["utils/slurm.py", "--gpu", "2", "--num_nodes", "3", "exp/train.log"]
    wrapper_end = command.index("--")
    assert command[6:wrapper_end] == [
        sys.executable,
        "-m",
        "espnet_ext.jobs.launch",
        "--on_node",
        "--master_port",
        "29123",
    ]
    assert command[wrapper_end + 1 :] == [
        *TRAIN,
        "--ngpu",
        "2",
        "--multiprocessing_distributed",
        "true",
        "--dist_launcher",
        "slurm",
        "--dist_backend",
        "nccl",
    ]
    cpu = training_command(
        ["utils/slurm.py"], "l", TRAIN, ngpu=0, num_nodes=2, master_addr="10.0.0.1"
    )
    assert cpu[-2:] == ["--dist_backend", "gloo"] and cpu[
        cpu.index("--") - 2 : cpu.index("--")
    ] == ["--master_addr", "10.0.0.1"]
    chosen = training_command(
        ["utils/slurm.py"], "l", [*TRAIN, "--dist_backend", "mpi"], ngpu=0, num_nodes=2
    )
    assert chosen.count("--dist_backend") == 1 and chosen[-1] == "slurm"


def test_node_command_fills_in_the_rendezvous(monkeypatch):
    assert node_command(TRAIN, 1234, "10.1.1.1") == [
        *TRAIN,
        "--dist_master_addr",
        "10.1.1.1",
        "--dist_master_port",
        "1234",
    ]
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    monkeypatch.delenv("SLURM_STEP_NODELIST", raising=False)
    with pytest.raises(SystemExit, match="not inside a Slurm job"):
        node_command(TRAIN, 1234, None)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(SystemExit, match="give --master_port"):
        node_command(TRAIN, None, "10.1.1.1")
    # The port comes from the job id, so two jobs sharing a node do not collide.
    monkeypatch.setenv("SLURM_JOB_ID", "123457")
    assert node_command(TRAIN, None, "a")[-1] == str(20000 + 123457 % 10000)


def test_old_logs_are_kept_numbered(tmp_path):
    log = tmp_path / "train.log"
    for run in range(1, 8):
        rotate_logs(log, keep=3)
        log.write_text(f"run {run}")
    assert log.read_text() == "run 7"
    assert [(tmp_path / f"train.{i}.log").read_text() for i in (1, 2, 3)] == [
        "run 6",
        "run 5",
        "run 4",
    ]
    assert not (tmp_path / "train.4.log").exists()


def test_launch_through_the_local_backend(tmp_path):
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp/train.log").write_text("earlier run\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "espnet_ext.jobs.launch",
            "--cmd",
            f"{sys.executable} {ROOT / 'utils/run.py'}",
            "--log",
            "exp/train.log",
            "--ngpu",
            "0",
            "--num_nodes",
            "1",
            "--",
            sys.executable,
            "-c",
            "import sys; print(sys.argv[1:])",
            "--resume",
            "true",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "['--resume', 'true', '--ngpu', '0']" in (tmp_path / "exp/train.log").read_text()
    assert (tmp_path / "exp/train.1.log").read_text() == "earlier run\n"
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "espnet_ext.jobs.launch",
            "--cmd",
            f"{sys.executable} {ROOT / 'utils/run.py'}",
            "--log",
            "exp/train.log",
            "--ngpu",
            "0",
            "--num_nodes",
            "2",
            "--",
            "true",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        refused.returncode == 2 and "the local backend runs on this machine only" in refused.stderr
    )


@pytest.mark.slurm
def test_first_node_address_uses_slurms_node_address(slurm_cluster):
    # The nodes are named n1, n2 (names that do not resolve); Slurm knows their address.
    assert first_node_address("n[1-2]") == "127.0.0.1"


# --- a real 2-node ESPnet2 training
# -----------------------------------------------------------------------------


@pytest.mark.slurm
def test_two_node_espnet_training_takes_the_single_process_steps(slurm_cluster, tmp_path):
    torch = pytest.importorskip("torch")
    args = write_lm_corpus(tmp_path)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    train = [sys.executable, "-m", "espnet2.bin.lm_train", *args]
    # The single-process reference runs beside the cluster job (both mostly wait on imports).
    with open(tmp_path / "reference.log", "w") as reference_log:
        reference = subprocess.Popen(
            [*train, "--ngpu", "0", "--output_dir", "reference"],
            cwd=tmp_path,
            env=env,
            stdout=reference_log,
            stderr=subprocess.STDOUT,
        )
        launched = subprocess.run(
            [
                sys.executable,
                "-m",
                "espnet_ext.jobs.launch",
                "--cmd",
                f"{sys.executable} {ROOT / 'utils/slurm.py'}",
                "--log",
                "exp/train.log",
                "--ngpu",
                "0",
                "--num_nodes",
                "2",
                "--",
                *train,
                "--output_dir",
                "exp",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert reference.wait(timeout=300) == 0, (tmp_path / "reference.log").read_text()[-3000:]
    log = (tmp_path / "exp/train.log").read_text()
    assert launched.returncode == 0, launched.stderr + log[-3000:]
    # ESPnet prefixes its log lines with [host:rank/world_size]; srun --label prefixes each node's
    # output.
    assert re.search(r"^0: \[\S+:0/2\] .*1epoch results", log, flags=re.MULTILINE), log[-3000:]
    assert re.search(r"^1: ", log, flags=re.MULTILINE), "no output from the second node"
    distributed = torch.load(
        tmp_path / "exp/checkpoint.pth", map_location="cpu", weights_only=False
    )
    single = torch.load(
        tmp_path / "reference/checkpoint.pth", map_location="cpu", weights_only=False
    )
    assert distributed["model"].keys() == single["model"].keys()
    for name, weight in single["model"].items():
        torch.testing.assert_close(
            distributed["model"][name], weight, rtol=1e-5, atol=1e-6, msg=name
        )
    for phase in ("train", "valid"):
        assert distributed["reporter"]["stats"][1][phase]["loss"] == pytest.approx(
            single["reporter"]["stats"][1][phase]["loss"], rel=1e-5
        )


def test_the_job_asks_for_each_training_process_threads_and_loader_processes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text("num_workers: 4\nbatch_size: 8\n")
    assert job_cpus(TRAIN, ngpu=2, threads=1) == 2 * (1 + 4)  # the config's loaders, per GPU
    assert job_cpus(TRAIN, ngpu=0, threads=3) == 3 + 4  # one process on the CPU
    assert job_cpus([*TRAIN, "--num_workers", "0"], ngpu=4, threads=1) == 4  # the command line wins
    assert job_cpus([*TRAIN, "--num_workers=2"], ngpu=1, threads=2) == 4
    (tmp_path / "c.yaml").write_text("batch_size: 8\n")
    assert job_cpus(TRAIN, ngpu=1, threads=1) == 2  # ESPnet's default: one loader process
    # the backend gets it after the pipeline's own options (the last value wins there)
    backend = f"{sys.executable} -c 'import sys; print(sys.argv[1:])' --requeue --num_threads 1"
    done = subprocess.run(
        [sys.executable, "-m", "espnet_ext.jobs.launch", "--cmd", backend, "--log", "train.log",
         "--ngpu", "2", "--threads", "2", "--", *TRAIN],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    argv = eval(done.stdout)  # the backend's arguments, as it printed them
    assert argv[:6] == [
        "--requeue",
        "--num_threads",
        "1",
        "--num_threads",
        str(2 * (2 + 1)),
        "--gpu",
    ]
