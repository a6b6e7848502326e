"""Launch an ESPnet2 training on J nodes x K GPUs through a job backend (``utils/run.py`` or ``utils/slurm.py``).

    python -m espnet_ext.jobs.launch --cmd "utils/slurm.py --config conf/slurm.conf --requeue" \\
        --log exp/asr/train.log --ngpu K --num_nodes J [--threads T] [--master_port P] [--master_addr A] \\
        -- python -m espnet_ext.bin.asr_train <args>

- J = 1: ``<cmd> --gpu K <log> <train> --ngpu K``; with K > 1 also ``--multiprocessing_distributed
  true``, so ESPnet spawns one process per GPU.
- J > 1 (Slurm backend; the local one refuses): ``<cmd> --gpu K --num_nodes J <log> <node wrapper>
  <train> --ngpu K --multiprocessing_distributed true --dist_launcher slurm --dist_backend
  nccl|gloo`` (gloo when K = 0). The backend runs it under ``srun`` once per node; on each node the
  wrapper (``--on_node``) adds ``--dist_master_addr``: the first node of the job's node list, as
  Slurm's NodeAddr, so node names need not resolve (a name that does not resolve makes torch retry
  forever), and ``--dist_master_port``: the given one, or one derived from the job id so that jobs
  sharing a node do not collide. Then it becomes the training process.

The job asks for the CPUs its node runs on (``--num_threads``, Slurm's ``--cpus-per-task``): each training
process (one per GPU, or one on the CPU) with its ``--threads`` and its data loader processes (the
training's ``num_workers``, ``espnet_ext.argv``). A GPU training confined to one core would feed its GPUs
from loader processes that share it (Swin-T's 128 images an update loaded in 730 ms in the training
process against 151 ms by 8 loader processes on an H100, docs/gpu.md).

The previous log is kept as ``train.1.log`` (and older ones shifted up to
``train.<MAX_OLD_LOGS>.log``), so a resumed training does not erase the history of its earlier runs;
unless a Slurm job of an earlier pipeline still writes it: the backend then waits for that job
(``espnet_ext.jobs.slurm.running_earlier_job``).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from espnet_ext.argv import num_workers
from espnet_ext.errors import InputError
from espnet_ext.jobs.slurm import job_writing

MAX_OLD_LOGS = 5
PORT_BASE = 20000  # derived ports: PORT_BASE + job id % PORT_SPAN
PORT_SPAN = 10000


def training_command(
    cmd: Sequence[str],
    log: str,
    train: Sequence[str],
    ngpu: int,
    num_nodes: int,
    master_port: int | None = None,
    master_addr: str | None = None,
) -> list[str]:
    """The backend command line that runs ``train`` (an ESPnet2 ``*_train`` command) on the requested nodes."""
    if num_nodes <= 1:
        extra = ["--ngpu", str(ngpu)] + (
            ["--multiprocessing_distributed", "true"] if ngpu > 1 else []
        )
        return [*cmd, "--gpu", str(ngpu), log, *train, *extra]
    wrapper = [sys.executable, "-m", "espnet_ext.jobs.launch", "--on_node"]
    if master_port is not None:
        wrapper += ["--master_port", str(master_port)]
    if master_addr is not None:
        wrapper += ["--master_addr", master_addr]
    distributed = [
        "--ngpu",
        str(ngpu),
        "--multiprocessing_distributed",
        "true",
        "--dist_launcher",
        "slurm",
    ]
    if "--dist_backend" not in train:
        distributed += ["--dist_backend", "nccl" if ngpu > 0 else "gloo"]
    return [
        *cmd,
        "--gpu",
        str(ngpu),
        "--num_nodes",
        str(num_nodes),
        log,
        *wrapper,
        "--",
        *train,
        *distributed,
    ]


def job_cpus(train: Sequence[str], ngpu: int, threads: int) -> int:
    """CPUs a node of the training job uses: ``threads`` and the loader processes of each training
    process, one per GPU (ESPnet spawns them) or one on the CPU."""
    return max(ngpu, 1) * (threads + num_workers(train))


def first_node_address(nodelist: str) -> str:
    """Address of the first node of a Slurm node list (``n[1-2]`` -> n1 -> its NodeAddr, e.g. 10.0.0.5)."""
    names = subprocess.run(
        ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True
    )
    first = names.stdout.split()[0]
    node = subprocess.run(["scontrol", "show", "node", first, "-o"], capture_output=True, text=True)
    match = re.search(r"\bNodeAddr=(\S+)", node.stdout)
    return match.group(1) if node.returncode == 0 and match else first


def node_command(
    train: Sequence[str], master_port: int | None, master_addr: str | None
) -> list[str]:
    """On one node of a multi-node job: the training command with the rendezvous address and port filled in."""
    if master_addr is None:
        nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_STEP_NODELIST")
        if not nodelist:
            raise SystemExit(
                "launch --on_node: not inside a Slurm job (no SLURM_JOB_NODELIST); give --master_addr"
            )
        master_addr = first_node_address(nodelist)
    if master_port is None:
        job_id = os.environ.get("SLURM_JOB_ID")
        if not job_id:
            raise SystemExit(
                "launch --on_node: not inside a Slurm job (no SLURM_JOB_ID); give --master_port"
            )
        master_port = PORT_BASE + int(job_id) % PORT_SPAN
    return [*train, "--dist_master_addr", master_addr, "--dist_master_port", str(master_port)]


def rotate_logs(log: Path, keep: int = MAX_OLD_LOGS) -> None:
    """train.log -> train.1.log -> train.2.log ...; the oldest beyond ``keep`` is dropped."""

    def numbered(i: int) -> Path:
        return log.with_name(f"{log.stem}.{i}{log.suffix}")

    numbered(keep).unlink(missing_ok=True)
    for i in range(keep - 1, 0, -1):
        if numbered(i).exists():
            numbered(i).rename(numbered(i + 1))
    if log.exists():
        log.rename(numbered(1))


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m espnet_ext.jobs.launch",
        description="Run an ESPnet2 training on J nodes x K GPUs through a job backend.",
        usage="%(prog)s --cmd CMD --log LOG [--ngpu K] [--num_nodes J] [options] -- TRAIN_COMMAND...",
    )
    parser.add_argument("--cmd", help="the job backend command, e.g. 'utils/slurm.py --requeue'")
    parser.add_argument("--log", help="the training log")
    parser.add_argument("--ngpu", type=int, default=0, help="GPUs per node")
    parser.add_argument(
        "--num_nodes", type=int, default=1, help="nodes (> 1 needs the Slurm backend)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU threads of each training process; the job asks for them and its loader processes",
    )
    parser.add_argument(
        "--master_port", type=int, default=None, help="rendezvous port (default: from the job id)"
    )
    parser.add_argument(
        "--master_addr", default=None, help="rendezvous address (default: the first node's)"
    )
    parser.add_argument(
        "--on_node", action="store_true", help=argparse.SUPPRESS
    )  # inside the job, once per node
    parser.add_argument("train", nargs=argparse.REMAINDER, help="the training command, after --")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = get_parser()
    args = parser.parse_args(argv)
    train = args.train[1:] if args.train[:1] == ["--"] else args.train
    if not train:
        parser.error("missing the training command after --")
    if args.on_node:
        command = node_command(train, args.master_port, args.master_addr)
        sys.stdout.flush()
        os.execvp(command[0], command)
    if not args.cmd or not args.log:
        parser.error("--cmd and --log are required")
    if args.ngpu < 0 or args.num_nodes < 1 or args.threads < 1:
        parser.error("--ngpu must be >= 0, --num_nodes and --threads >= 1")
    log = Path(args.log)
    # Through the Slurm backend, a log an earlier run's job still writes stays in place: the backend waits for
    # that job (or refuses) instead of submitting.
    slurm = any(Path(word).name == "slurm.py" for word in shlex.split(args.cmd))
    try:
        if not (slurm and job_writing(log)):
            rotate_logs(log)
    except InputError as e:  # squeue did not answer: neither moving the log nor submitting is safe
        print(f"launch: {e}", file=sys.stderr)
        return 2
    cpus = job_cpus(train, args.ngpu, args.threads)
    command = training_command(
        [*shlex.split(args.cmd), "--num_threads", str(cpus)],
        str(log),
        train,
        args.ngpu,
        args.num_nodes,
        args.master_port,
        args.master_addr,
    )
    return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(main())
