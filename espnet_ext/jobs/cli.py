"""The job runner command line shared by ``utils/run.py`` (local) and ``utils/slurm.py`` (Slurm).

Exit status: 0 when every job succeeded; 1 when some failed (each named on stderr with its log
path); 2 for a request that cannot work (unknown option, bad value, bad configuration); 130/143 when
interrupted.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from espnet_ext.errors import ConfigError, InputError
from espnet_ext.jobs.local import LocalRunner, Terminated
from espnet_ext.jobs.slurm import SlurmRunner
from espnet_ext.jobs.spec import OPTIONS, JobOutcome, log_tail, parse_command_line
from espnet_ext.logs import command_logging

RUNNERS = {"local": LocalRunner, "slurm": SlurmRunner}

BACKEND_NOTES = {
    "local": """\
Local backend: the jobs run as parallel processes on this machine, at most --max_jobs_run at once (default: the
number of CPUs). Ctrl-C or SIGTERM kills the running jobs. Accepted and ignored, as there is no scheduler:
--gpu (jobs see this machine's GPUs as they are; ESPnet's --ngpu picks how many a job uses), --mem, --time,
--num_threads, --config, --requeue, --requeue_progress, --dependency (jobs run one request at a time, so
whatever they depend on has already finished). --num_nodes above 1 is refused: that needs the Slurm backend.""",
    "slurm": """\
Slurm backend: one sbatch per call (an array --array=a-b%M for JOB=a:b), then it waits until every task ended
and checks each log's footer. Options map to sbatch through --config (ESPnet's conf/slurm.conf format; default:
--gpu N -> --gres=gpu:N, --mem, --time, --num_threads -> --cpus-per-task, --num_nodes -> --nodes, default
partition); options defined there (e.g. --name) are accepted too. --num_nodes J > 1 runs the command under srun
once on each of J nodes. --requeue makes the job requeueable (and requeue itself 2 min before its time limit);
the rerun appends to the same log. --requeue_progress FILE: it requeues itself only if FILE (the training's
checkpoint) changed during the run; a run that saved nothing says so in the log and ends at its time limit.
--dependency is passed to sbatch (--kill-on-invalid-dep=yes: a dependency that can never be satisfied cancels
the job). The batch script is written to <logdir>/q/. Ctrl-C cancels the job. A rerun of the same request whose
job (of a pipeline that died) is still pending or running waits for that job instead of submitting it again.""",
}


def make_runner(name: str):
    """The runner of a backend: an object whose ``run(request)`` returns one JobOutcome per job."""
    try:
        return RUNNERS[name]()
    except KeyError:
        raise ConfigError(
            f"unknown job backend {name!r} (choose from {', '.join(RUNNERS)})"
        ) from None


def usage(prog: str, backend: str) -> str:
    lines = [
        f"usage: {prog} [options] [JOB=a:b] <logfile> <command...>",
        "",
        "Runs <command> (as one job, or once per JOB=a..b with JOB replaced by the job number in the log path and",
        "in every argument), each with its own log that starts with the command line and ends with",
        "'# Ended (code X) at ...'. Arguments reach the program exactly as given (no shell: use bash -c '...' for",
        "pipes). Exit status 0 only if every job succeeded; else the failed jobs and their logs go to stderr, exit 1.",
        "",
        "options (--name value or --name=value; - and _ are the same):",
    ]
    for name, spec in OPTIONS.items():
        lines.append(f"  --{name + ('' if spec.is_flag else ' X'):<16} {spec.help}")
    return "\n".join(lines + ["", BACKEND_NOTES[backend]])


def failure_report(prog: str, outcomes: Sequence[JobOutcome]) -> list[str]:
    failed = [o for o in outcomes if not o.ok]
    total = len(outcomes)
    lines = [f"{prog}: {len(failed)} of {total} job{'s' if total > 1 else ''} failed:"]
    for outcome in failed:
        label = f"{outcome.job.label}: " if outcome.job.label else ""
        why = outcome.reason or f"exit code {outcome.code}"
        lines.append(f"  {label}{why}; log: {outcome.job.log}")
    ran = [o for o in failed if o.code is not None]  # the others' reason already says what happened
    tail = log_tail(ran[0].job.log) if ran else []
    if tail:
        lines.append(f"last lines of {ran[0].job.log}:")
        lines += ["  | " + line for line in tail]
    return lines


def main(argv: Sequence[str] | None = None, backend: str = "local", prog: str | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = prog or {"local": "run.py", "slurm": "slurm.py"}.get(backend, backend)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(prog, backend), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    try:
        with command_logging():  # the backends' reports (submitted, held, ...) on stderr
            outcomes = make_runner(backend).run(parse_command_line(argv))
    except InputError as e:  # a bad option or configuration file: nothing ran
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print(f"{prog}: terminated", file=sys.stderr)
        return 143
    if all(o.ok for o in outcomes):
        return 0
    print("\n".join(failure_report(prog, outcomes)), file=sys.stderr)
    return 1
