"""The Slurm backend: one ``sbatch`` per request (an array for ``JOB=a:b``), then wait and check every task.

The batch script is written next to the logs (``<logdir>/q/<name>.sh``). It runs the command in the
submitting directory (with the submitting environment: ``--export=ALL`` in the default
configuration) and writes the same log header and footer as the local backend; Slurm's own messages
(``CANCELLED AT ...``) land in the same log. Options map to sbatch through the configuration
(slurm_config.py); ``--max_jobs_run M`` throttles the array (``%M``); ``--num_nodes J`` > 1 runs the
command under ``srun`` once on each node (``--label``: each output line starts with the node's task
number).

``--requeue`` (training): the job may be requeued (preemption, ``scontrol requeue``, or by itself
when Slurm sends USR1 two minutes before the time limit) and then reruns the same command, which
resumes from its checkpoint (ESPnet: ``--resume true``). Each run appends its own header to the log;
waiting goes on until the job really ends, and only the last run's footer counts. With
``--requeue_progress FILE`` (the training's checkpoint) the job requeues itself only when FILE changed
during the run: a run that saved nothing (an ESPnet epoch longer than the time limit) would be rerun
from the same checkpoint for ever; it says so in the log instead and ends at its time limit (TIMEOUT).

A pipeline that died while its jobs ran on (the login node's reboot) is rerun as it was: a request
whose earlier job is still on its way (``<logdir>/q/<name>.job``: its id and a digest of the sbatch
command line and script) waits for that job instead of submitting it again; another request on the
logs of a running job is refused (:func:`running_earlier_job`).

A request sbatch refuses (e.g. ``--gpu 1`` where there are no GPUs) fails at once with sbatch's
message. A job whose dependency can never be satisfied is cancelled and reported instead of waiting
forever. Ctrl-C / SIGTERM while waiting cancels the job.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shlex
import subprocess
import time
from pathlib import Path

from espnet_ext.errors import ConfigError
from espnet_ext.fileio import atomic_write
from espnet_ext.jobs.local import Terminated, interrupts_raise
from espnet_ext.jobs.slurm_config import SlurmConfig
from espnet_ext.jobs.spec import (
    ENDED_PREFIX,
    STARTED_PREFIX,
    TIME_FORMAT,
    Job,
    JobOutcome,
    JobRequest,
    footer,
    last_exit_code,
    now,
    refuse_unknown_options,
)

logger = logging.getLogger(__name__)

# A requeueable job gets USR1 this long before its time limit and requeues itself (ESPnet
# checkpoints every epoch, so the rerun resumes from the last finished epoch).
REQUEUE_SIGNAL_SECONDS = 120
# States after which a job (array task) never runs again; anything else (PENDING, RUNNING,
# COMPLETING, REQUEUED, ...) is still on its way, including a requeued job waiting to restart.
FINAL_STATES = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "PREEMPTED",
}
# squeue failing (other than for a purged job) while a rerun asks whether an earlier job still runs
SQUEUE_TRIES = 6
# (ESPNET_EXT_SQUEUE_RETRY_SECONDS: longer for a controller slow to come back; 0 in tests)
SQUEUE_RETRY_SECONDS = float(os.environ.get("ESPNET_EXT_SQUEUE_RETRY_SECONDS", "5"))
SLURM_HEADER = re.compile(r"\(Slurm job (\d+)")
POLL_FIRST_SECONDS = 0.2
POLL_MAX_SECONDS = 10.0
# A network file system may show the end of a log a little after Slurm reports the job done.
FOOTER_WAIT_SECONDS = 10.0

TaskStates = dict[int | None, tuple[str, str]]  # task id (None: no array) -> (state, reason)


def job_name(log_template: str, range_name: str | None) -> str:
    """``exp/log/fbank.JOB.log`` -> ``fbank``: what squeue shows."""
    name = Path(log_template).name
    if name.endswith(".log"):
        name = name[: -len(".log")]
    if range_name:
        name = re.sub(rf"[._-]?{range_name}", "", name)
    return name or "job"


def batch_script(request: JobRequest, workdir: str, per_node: bool) -> str:
    """The bash script every task runs: header, command (JOB -> task id), footer with the exit code."""
    range_name = request.job_range.name if request.job_range else None
    substitute = (
        f'[ -n "${{task}}" ] && command_line=${{command_line//{range_name}/${{task}}}}\n'
        if range_name
        else ""
    )
    launcher = "srun --ntasks-per-node=1 --kill-on-bad-exit=1 --label " if per_node else ""
    requeue = ""
    if request.options.get("requeue"):
        requeue = (
            f"# Slurm sends USR1 {REQUEUE_SIGNAL_SECONDS} s before the time limit: requeue, the rerun resumes.\n"
            "requeue() {\n"
            '    echo "# Time limit near: requeueing job ${SLURM_JOB_ID}"\n'
            '    scontrol requeue "${SLURM_JOB_ID}"\n'
            "}\n"
        )
        progress = request.options.get("requeue_progress")
        if progress:  # only when the run saved progress: else its rerun would redo the same work
            requeue += (
                f"progress={shlex.quote(str(progress))}\n"
                'saved_at_start=$(stat -c %y "${progress}" 2>/dev/null)\n'
                "requeue_if_progress() {\n"
                '    if [ "$(stat -c %y "${progress}" 2>/dev/null)" != "${saved_at_start}" ]; then requeue; else\n'
                '        echo "# Time limit near, and ${progress} unchanged since this run started: a rerun would'
                " start again from the same point. Not requeued: give the job a --time (conf/slurm.conf) longer"
                ' than it takes between two saves (ESPnet saves at the end of each epoch)"\n'
                "    fi\n"
                "}\n"
                "trap requeue_if_progress USR1\n"
            )
        else:
            requeue += "trap requeue USR1\n"
    return f"""#!/usr/bin/env bash
# Written by the Slurm job backend for {request.log_template}; Slurm appends its output to that log.
command_line={shlex.quote(shlex.join(request.command))}
task=${{SLURM_ARRAY_TASK_ID:-}}
{substitute}cd {shlex.quote(workdir)} || exit 1
run="job ${{SLURM_JOB_ID}}${{task:+, task ${{task}}}}"
[ "${{SLURM_RESTART_COUNT:-0}}" -gt 0 ] && run+=", restart ${{SLURM_RESTART_COUNT}}"
printf '# %s\\n{STARTED_PREFIX}%s on %s (Slurm %s)\\n' \\
    "${{command_line}}" "$(date '+{TIME_FORMAT}')" "$(hostname)" "${{run}}"
{requeue}start=${{SECONDS}}
# In the background so that a trapped signal is handled at once, not after the command ends.
eval "{launcher}${{command_line}}" &
child=$!
while true; do
    wait "${{child}}"
    code=$?
    kill -0 "${{child}}" 2>/dev/null || break
done
printf '{ENDED_PREFIX}%d) at %s, elapsed %d s\\n' "${{code}}" "$(date '+{TIME_FORMAT}')" $((SECONDS - start))
exit "${{code}}"
"""


class SlurmRunner:
    name = "slurm"

    def run(self, request: JobRequest) -> list[JobOutcome]:
        """Submit, wait until every task ended for good, and read each task's exit code from its log."""
        config_path = request.options.get("config")
        config = SlurmConfig.load(config_path) if config_path else SlurmConfig.default()
        refuse_unknown_options(request, config.option_names)
        jobs = request.jobs()
        submit = self._submit_command(request, config)  # may refuse a value the config does not map
        script = batch_script(request, os.getcwd(), request.options.get("num_nodes", 1) > 1)
        script_path = (
            jobs[0].log.parent
            / "q"
            / (job_name(request.log_template, _range_name(request)) + ".sh")
        )
        record = script_path.with_suffix(".job")
        digest = hashlib.sha256(json.dumps([submit, script]).encode()).hexdigest()
        job_id = running_earlier_job(record, digest)
        if job_id is None:
            refuse_logs_still_written(jobs)
            job_id, refusal = self._submit(request, jobs, submit, script, script_path)
            if job_id is None:  # every job's log says why too
                return [JobOutcome(job, None, refusal) for job in jobs]
            with atomic_write(record) as f:
                f.write(f"{job_id} {digest}\n")
        else:
            logger.warning(
                f"slurm: job {job_id}, submitted by an earlier run for this same request "
                f"({record}), is still on its way: waiting for it instead of submitting again"
            )
        with interrupts_raise():
            try:
                states, cancelled_because = self._wait(
                    job_id, jobs, request.options.get("dependency")
                )
            except (KeyboardInterrupt, Terminated):
                subprocess.run(["scancel", job_id], capture_output=True)
                logger.warning(f"slurm: interrupted; cancelled job {job_id}")
                raise
        return [self._outcome(job, states.get(job.id), cancelled_because) for job in jobs]

    def _submit(
        self,
        request: JobRequest,
        jobs: list[Job],
        submit: list[str],
        script: str,
        script_path: Path,
    ) -> tuple[str | None, str]:
        """sbatch the script: (its job id, ""), or (None, why) when sbatch refused it."""
        for job in jobs:
            job.log.parent.mkdir(parents=True, exist_ok=True)
            job.log.unlink(missing_ok=True)  # a stale footer must not pass for this run's
        with atomic_write(script_path) as f:
            f.write(script)
        script_path.chmod(0o755)

        submitted = subprocess.run(submit + [str(script_path)], capture_output=True, text=True)
        if submitted.returncode != 0:
            message = (
                submitted.stderr + submitted.stdout
            ).strip() or f"{submit[0]} exited with {submitted.returncode}"
            for job in jobs:
                with open(job.log, "w", encoding="utf-8") as log:
                    log.write(
                        f"# {shlex.join(job.command)}\n# Not started: refused at {now()} by: {shlex.join(submit)}\n"
                    )
                    log.write(message + "\n" + footer(submitted.returncode, 0))
            return None, f"refused at submission: {message}"
        if submitted.stderr.strip():  # accepted, with warnings worth seeing
            logger.warning(submitted.stderr.strip())
        job_id = submitted.stdout.strip().split(";")[0]
        tasks = f"{len(jobs)} tasks" if request.job_range else "1 job"
        logger.info(f"slurm: submitted job {job_id} ({tasks}), log: {request.log_template}")
        return job_id, ""

    @staticmethod
    def _submit_command(request: JobRequest, config: SlurmConfig) -> list[str]:
        options = dict(request.options)
        options.update(request.extra_options)
        output = request.log_template.replace("%", "%%")  # Slurm reads % as a pattern
        args = config.command + [
            "--parsable",
            f"--job-name={job_name(request.log_template, _range_name(request))}",
            f"--chdir={os.getcwd()}",
            # a requeued run appends to its log instead of erasing the first run
            "--open-mode=append",
        ]
        if request.job_range is not None:
            throttle = f"%{options['max_jobs_run']}" if "max_jobs_run" in options else ""
            args.append(f"--array={request.job_range.start}-{request.job_range.end}{throttle}")
            output = output.replace(request.job_range.name, "%a")
        args.append(f"--output={os.path.abspath(output)}")
        if options.get("num_nodes", 1) > 1:
            args.append("--ntasks-per-node=1")  # srun then starts the command once per node
        if options.get("requeue"):
            args += ["--requeue", f"--signal=B:USR1@{REQUEUE_SIGNAL_SECONDS}"]
        if "dependency" in options:
            args += [f"--dependency={options['dependency']}", "--kill-on-invalid-dep=yes"]
        # Last, so that a configured option (e.g. --job-name through 'option name=*') wins.
        return args + config.option_args(options)

    def _wait(
        self, job_id: str, jobs: list[Job], dependency: str | None
    ) -> tuple[TaskStates, str | None]:
        """Poll squeue until every task is in a final state (or Slurm forgot the job). Returns the last state
        seen per task, and why the job was cancelled when it could never run."""
        last_seen: TaskStates = {}
        cancelled_because: str | None = None
        delay = POLL_FIRST_SECONDS
        reported = ""  # the last squeue error or hold reason shown, to show each once
        while True:
            listing = squeue(job_id)
            if listing.returncode != 0:
                if (
                    "Invalid job id" in listing.stderr
                ):  # purged MinJobAge after it ended: the logs tell the rest
                    return last_seen, cancelled_because
                if listing.stderr.strip() != reported:  # slurmctld busy or restarting: keep waiting
                    reported = listing.stderr.strip()
                    logger.warning(f"slurm: squeue failed (will retry): {reported}")
                time.sleep(POLL_MAX_SECONDS)
                continue
            states = _parse_squeue(listing.stdout)
            for state, reason in states.values():
                # Reasons that never clear; the dependency one stays on the job once Slurm cancelled
                # it itself.
                if reason == "DependencyNeverSatisfied" and cancelled_because is None:
                    cancelled_because = (
                        f"never ran: its dependency {dependency} can never be satisfied; cancelled"
                    )
                elif reason.lower().startswith("launch failed") and cancelled_because is None:
                    cancelled_because = f"Slurm could not launch it ({reason}); cancelled"
                elif state not in FINAL_STATES and "held" in reason.lower() and reason != reported:
                    reported = reason
                    logger.warning(
                        f"slurm: job {job_id} is held ({reason}): waiting; "
                        f"'scontrol release {job_id}' or 'scancel {job_id}'"
                    )
            if cancelled_because and any(state not in FINAL_STATES for state, _ in states.values()):
                subprocess.run(["scancel", job_id], capture_output=True)
            if any(last_seen.get(task) != seen for task, seen in states.items()):
                delay = POLL_FIRST_SECONDS  # something moved: look again soon
            last_seen.update(states)
            # A task missing from the listing was purged long after it ended.
            if all(states[job.id][0] in FINAL_STATES for job in jobs if job.id in states):
                return last_seen, cancelled_because
            time.sleep(delay)
            delay = min(delay * 1.5, POLL_MAX_SECONDS)

    @staticmethod
    def _outcome(
        job: Job, state: tuple[str, str] | None, cancelled_because: str | None
    ) -> JobOutcome:
        code = last_exit_code(job.log)
        if code is None and (state is None or state[0] in ("COMPLETED", "FAILED")):
            deadline = time.monotonic() + FOOTER_WAIT_SECONDS
            while code is None and time.monotonic() < deadline:
                time.sleep(0.5)
                code = last_exit_code(job.log)
        if code is not None:
            return JobOutcome(job, code)
        if cancelled_because:
            return JobOutcome(job, None, cancelled_because)
        if state is None:
            return JobOutcome(
                job, None, "ended (Slurm no longer knows the job) without a footer in its log"
            )
        reason = f" ({state[1]})" if state[1] not in ("", "None") else ""
        return JobOutcome(job, None, f"Slurm state {state[0]}{reason}, no footer in its log")


def running_earlier_job(record: Path, digest: str) -> str | None:
    """The job id in ``record`` (``<job id> <request digest>``, written at each submission) when Slurm
    still has a task of that job on its way and it was submitted for the same request (``digest``:
    the sbatch command line and the batch script): a pipeline that died (a login node's reboot, a
    closed terminal) leaves its jobs running, and its rerun waits for them instead of starting the
    same work twice in the same files. A job still running for these logs with another command or
    options is refused: the two would write the same outputs."""
    try:
        job_id, earlier_digest = record.read_text(encoding="utf-8").split()
    except (FileNotFoundError, ValueError):
        return None
    on_its_way = states_on_its_way(job_id)
    if not on_its_way:
        return None
    if earlier_digest != digest:
        raise ConfigError(
            f"Slurm job {job_id}, submitted by an earlier run for these logs with another command "
            f"or options, is still {'/'.join(on_its_way)}: wait for it to end or 'scancel {job_id}'",
            path=record,
        )
    return job_id


def refuse_logs_still_written(jobs: list[Job]) -> None:
    """Refuse a request one of whose logs a job still writes that no record of ours names (submitted by an
    earlier version, or whose pipeline died between sbatch and the record): submitting would remove that
    log and run the same work twice beside it."""
    known: dict[str, list[str]] = {}
    for job in jobs:
        writing = job_writing(job.log, known)
        if writing is not None:
            raise ConfigError(
                f"Slurm job {writing} (named in this log's last header) is still "
                f"{'/'.join(known[writing])} and may write it: wait for it to end or "
                f"'scancel {writing}'; nothing submitted",
                path=job.log,
            )


def states_on_its_way(job_id: str) -> list[str]:
    """The states of the job's tasks that may still run (none: ended, or purged by Slurm). squeue failing
    otherwise (slurmctld busy or restarting, as after the reboot that ended a pipeline) is retried, then
    refused: taking it for "ended" would submit the same work twice."""
    problem = ""
    for _ in range(SQUEUE_TRIES):
        try:
            listing = squeue(job_id)
        except FileNotFoundError:  # no Slurm here: nothing of it runs
            return []
        if listing.returncode == 0:
            states = _parse_squeue(listing.stdout)
            return sorted({state for state, _ in states.values() if state not in FINAL_STATES})
        if "Invalid job id" in listing.stderr:  # purged MinJobAge after it ended
            return []
        problem = (listing.stderr + listing.stdout).strip() or f"exit code {listing.returncode}"
        time.sleep(SQUEUE_RETRY_SECONDS)
    raise ConfigError(
        f"cannot tell whether Slurm job {job_id} of an earlier run still runs: squeue failed "
        f"{SQUEUE_TRIES} times ({problem}); nothing submitted, rerun once Slurm answers"
    )


def job_writing(log: Path, known: dict[str, list[str]] | None = None) -> str | None:
    """The Slurm job that the last run in ``log`` names in its header, if it may still write there: a
    rerun must then neither move the log aside (launch.py) nor submit the work again (``run``).
    ``known``: job id -> states already asked for, shared across the logs of one request."""
    job_id = None
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            for line in f:  # the last run's header: a log may be long, so line by line
                if line.startswith(STARTED_PREFIX):
                    found = SLURM_HEADER.search(line)
                    job_id = found.group(1) if found else None
    except FileNotFoundError:
        return None
    if job_id is None:
        return None
    known = {} if known is None else known
    if job_id not in known:
        known[job_id] = states_on_its_way(job_id)
    return job_id if known[job_id] else None


def _range_name(request: JobRequest) -> str | None:
    return request.job_range.name if request.job_range else None


def squeue(job_id: str) -> subprocess.CompletedProcess:
    """squeue's listing of every task of the job, in any state: ``%K|%T|%r`` lines (see _parse_squeue)."""
    return subprocess.run(
        ["squeue", "-h", "-r", "-t", "all", "-j", job_id, "-o", "%K|%T|%r"],
        capture_output=True,
        text=True,
    )


def _parse_squeue(text: str) -> TaskStates:
    """Lines of ``%K|%T|%r`` (with ``-r`` every array task has its own line): task id or N/A, state, reason."""
    states: TaskStates = {}
    for line in text.splitlines():
        parts = [part.strip() for part in line.split("|", 2)]
        if len(parts) == 3 and (parts[0].isdigit() or parts[0] == "N/A") and parts[1]:
            task = int(parts[0]) if parts[0].isdigit() else None
            states[task] = (parts[1].split()[0], parts[2])
    return states
