"""The local backend: every job is a process on this machine, at most ``max_jobs_run`` at a time.

Ignored options (there is no scheduler to ask): ``--gpu`` (jobs see this machine's GPUs as they are;
ESPnet's ``--ngpu`` picks how many a job uses), ``--mem``, ``--time``, ``--num_threads``,
``--config``, ``--requeue``, ``--requeue_progress``, ``--dependency`` (jobs run synchronously, so
whatever came before has already finished). ``--num_nodes`` above 1 is refused: that needs Slurm.

Requests running side by side (a pipeline's test sets) share the machine through ``ESPNET_EXT_LOCAL_CPUS``:
each runner runs at most that many jobs at once (utils/pipeline.sh gives each set its share).

Jobs running side by side share the cores: each sees ``OMP_NUM_THREADS`` (and ``MKL_NUM_THREADS``) set
to its share, so a recipe started by a job asks ``nproc`` and gets that share rather than every core
(two trainings of two threads each on two cores spend much of their time waiting on each other).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from espnet_ext.errors import ConfigError
from espnet_ext.jobs.spec import Job, JobOutcome, JobRequest, footer, header, refuse_unknown_options

# After SIGTERM, how long interrupted jobs get to exit before SIGKILL.
KILL_GRACE_SECONDS = 5.0
POLL_SECONDS = 0.05


class Terminated(Exception):
    """SIGTERM arrived while jobs were running."""


@contextlib.contextmanager
def interrupts_handled(handler) -> Iterator[None]:
    """While jobs run: SIGTERM and SIGINT go to ``handler(signum, frame)``.

    SIGINT is set explicitly because a program inherits "ignore SIGINT" when started in the background
    by a non-interactive shell (``cmd &`` in a script, CI): an interrupt sent to the runner would
    otherwise leave it and its jobs running. The jobs run in their own sessions, so the runner is the
    only one that can pass an interrupt on.
    """
    try:
        previous_term = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    previous_int = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        signal.signal(signal.SIGINT, previous_int)


def raise_interrupt(signum: int, frame=None):
    """SIGTERM raises Terminated, SIGINT KeyboardInterrupt."""
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def interrupts_raise():
    """While a backend waits: an interrupt raises (raise_interrupt), so cleanup code ends the jobs."""
    return interrupts_handled(raise_interrupt)


# The CPUs a runner may use when other runners of the same pipeline run beside it (utils/pipeline.sh
# for_each_set: the test sets' requests side by side share the machine instead of each taking all of it).
CPU_SHARE_VARIABLE = "ESPNET_EXT_LOCAL_CPUS"


def available_cpus() -> int:
    """This process' usable CPUs, or fewer: the share ``ESPNET_EXT_LOCAL_CPUS`` gives it."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    share = os.environ.get(CPU_SHARE_VARIABLE, "")
    return min(cpus, int(share)) if share.isdigit() and int(share) > 0 else cpus


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def thread_share(jobs_at_once: int) -> dict[str, str]:
    """The environment of a job that runs beside ``jobs_at_once - 1`` others: its share of this runner's
    threads (the OMP_NUM_THREADS this runner was given, as GNU nproc reads it, else the usable CPUs)."""
    if jobs_at_once <= 1:
        return {}
    given = os.environ.get("OMP_NUM_THREADS", "")
    total = int(given) if given.isdigit() and int(given) > 0 else available_cpus()
    share = str(max(1, total // jobs_at_once))
    return dict.fromkeys(THREAD_VARIABLES, share)


@dataclass
class _Running:
    job: Job
    process: subprocess.Popen
    log: IO
    started: float


class LocalRunner:
    name = "local"

    def run(self, request: JobRequest) -> list[JobOutcome]:
        """Run every job of the request; refuse (ConfigError) before starting any when it cannot work here."""
        refuse_unknown_options(request)
        if request.options.get("num_nodes", 1) > 1:
            raise ConfigError(
                f"--num_nodes {request.options['num_nodes']}: the local backend runs on this machine only; "
                "use the Slurm backend (cmd_backend=slurm) for multi-node jobs"
            )
        max_jobs_run = request.options.get("max_jobs_run") or available_cpus()
        jobs = request.jobs()
        env = {**os.environ, **thread_share(min(max_jobs_run, len(jobs)))}
        waiting = list(jobs)
        running: list[_Running] = []
        outcomes: dict[int, JobOutcome] = {}
        # Recorded, not raised: an exception raised inside Popen.poll() can leave the child reaped
        # with its status lost, or Popen's wait lock held (every later wait then times out), and
        # one raised inside _start loses the job just started.
        received: list[int] = []
        with interrupts_handled(lambda signum, frame: received.append(signum)):
            while (waiting or running) and not received:
                while waiting and len(running) < max_jobs_run:
                    started = self._start(waiting.pop(0), env)
                    if isinstance(started, JobOutcome):
                        outcomes[id(started.job)] = started
                    else:
                        running.append(started)
                # Polling only our own children (not os.wait) keeps this usable inside other
                # programs.
                for done in [r for r in running if r.process.poll() is not None]:
                    running.remove(done)
                    code = _exit_code_of(done.process.returncode)
                    self._finish(done, code)
                    outcomes[id(done.job)] = JobOutcome(done.job, code)
                if running:
                    time.sleep(POLL_SECONDS)
            if received:
                self._kill(running)
                raise_interrupt(received[0])
        return [outcomes[id(job)] for job in jobs]

    @staticmethod
    def _start(job: Job, env: dict[str, str]):
        job.log.parent.mkdir(parents=True, exist_ok=True)
        # Stays open while the job runs: _finish (or the OSError branch below) closes it.
        log = open(job.log, "w", encoding="utf-8")  # noqa: SIM115
        log.write(header(job.command, f"on {socket.gethostname()}"))
        log.flush()
        started = time.monotonic()
        try:
            # Own session: Ctrl-C reaches only this runner, which then ends each job's whole process
            # group.
            process = subprocess.Popen(
                job.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        except OSError as e:
            code = 127 if isinstance(e, FileNotFoundError) else 126  # the shell's codes for these
            log.write(f"cannot run {job.command[0]}: {e.strerror}\n")
            log.write(footer(code, 0))
            log.close()
            return JobOutcome(job, code, f"cannot run {job.command[0]}: {e.strerror}")
        return _Running(job, process, log, started)

    @staticmethod
    def _finish(done: _Running, code: int) -> None:
        done.log.write(footer(code, time.monotonic() - done.started))
        done.log.close()

    def _kill(self, running: list[_Running]) -> None:
        for r in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(r.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + KILL_GRACE_SECONDS
        for r in running:
            try:
                r.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(r.process.pid, signal.SIGKILL)
                # Bounded: a job stuck in the kernel (uninterruptible sleep) must not hang the runner.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    r.process.wait(timeout=KILL_GRACE_SECONDS)
            killed = 128 + signal.SIGKILL
            self._finish(
                r, killed if r.process.returncode is None else _exit_code_of(r.process.returncode)
            )


def _exit_code_of(returncode: int) -> int:
    """Shell convention: a job killed by signal N exits with 128 + N."""
    return 128 - returncode if returncode < 0 else returncode
