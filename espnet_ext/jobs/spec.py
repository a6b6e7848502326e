"""What both job backends share: the Kaldi-style command line and the log header/footer.

    <runner> [--opt value ...] [JOB=a:b] <logfile> <command...>

``JOB`` (any ``NAME=a:b``, or ``NAME=a`` for one job) is replaced by the job number in the log path
and in every command argument, as plain text like Kaldi's run.pl does (``split/JOB/keys`` ->
``split/3/keys``; note that ``$SLURM_JOB_ID`` in a ``bash -c`` string would be hit too: then name
the range differently, ``N=1:4``). Arguments are passed to the program exactly as given: no shell
sees them, so ``|`` or ``>`` are plain arguments; run ``bash -c '...'`` for a pipeline.

Every log starts with the command line and the start time and ends with ``# Ended (code X) at ...``:
a log without that footer belongs to a job that was cut (killed, cancelled, requeued) or is still
running.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from espnet_ext.errors import ConfigError

# Shared by the Python (local) and bash (Slurm batch script) writers of the header and footer.
TIME_FORMAT = "%Y-%m-%d %H:%M:%S %Z"
ENDED_PREFIX = "# Ended (code "
STARTED_PREFIX = "# Started at "


def _nonnegative_int(value: str) -> int:
    if not re.fullmatch(r"\d+", value):
        raise ValueError("expected a whole number >= 0")
    return int(value)


def _positive_int(value: str) -> int:
    number = _nonnegative_int(value)
    if number < 1:
        raise ValueError("expected a whole number >= 1")
    return number


def _memory(value: str) -> str:
    if not re.fullmatch(r"\d+[KMGT]?", value, flags=re.IGNORECASE):
        raise ValueError("expected a size like 4G, 500M or 2000 (MB)")
    return value.upper()


def _duration(value: str) -> str:
    # Slurm's forms: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
    if not re.fullmatch(r"(\d+-)?\d+(:\d+){0,2}", value):
        raise ValueError("expected a duration like 120 (minutes), 2:00:00 or 1-12:00:00")
    return value


def _word(value: str) -> str:
    if not value or any(c.isspace() for c in value):
        raise ValueError("expected one word")
    return value


@dataclass(frozen=True)
class OptionSpec:
    parse: (
        Callable[[str], object] | None
    )  # str -> value, raising ValueError with a reason; None for flags
    help: str
    is_flag: bool = False


# The options every backend accepts (names as in Kaldi's run.pl/slurm.pl; a backend may ignore
# some).
OPTIONS: dict[str, OptionSpec] = {
    "gpu": OptionSpec(_nonnegative_int, "GPUs per job (per node)"),
    "mem": OptionSpec(_memory, "memory per job, e.g. 4G"),
    "time": OptionSpec(_duration, "time limit, e.g. 2:00:00"),
    "num_threads": OptionSpec(_positive_int, "CPU cores per job"),
    "num_nodes": OptionSpec(_positive_int, "nodes per job; the command runs once on each"),
    "max_jobs_run": OptionSpec(_positive_int, "at most this many jobs of the array at once"),
    "config": OptionSpec(
        _word, "backend configuration file (Slurm: ESPnet's conf/slurm.conf format)"
    ),
    "requeue": OptionSpec(
        None, "requeueable job (training that resumes from its checkpoint)", is_flag=True
    ),
    "requeue_progress": OptionSpec(
        _word,
        "with --requeue: a file the job rewrites as it saves its progress (a training's checkpoint); "
        "near its time limit the job requeues itself only when that file changed during the run",
    ),
    "dependency": OptionSpec(_word, "start only after other jobs, e.g. afterok:1234"),
}


@dataclass(frozen=True)
class JobRange:
    """``NAME=start:end`` (inclusive, as in Kaldi)."""

    name: str
    start: int
    end: int

    @property
    def ids(self) -> range:
        return range(self.start, self.end + 1)

    def __str__(self) -> str:
        return f"{self.name}={self.start}:{self.end}"


@dataclass(frozen=True)
class Job:
    """One job of a request: its number (None without a range), log file and final command."""

    id: int | None
    log: Path
    command: list[str]
    label: str  # "JOB=3", or "" for a single job without a range


@dataclass
class JobRequest:
    """A parsed runner command line. ``options`` holds only what was given, already validated."""

    options: dict[str, str | int | bool]
    job_range: JobRange | None
    log_template: str
    command: list[str]
    extra_options: dict[str, str] = field(
        default_factory=dict
    )  # names only a backend's config knows

    def jobs(self) -> list[Job]:
        if self.job_range is None:
            return [Job(None, Path(self.log_template), list(self.command), "")]
        name = self.job_range.name
        return [
            Job(
                i,
                Path(self.log_template.replace(name, str(i))),
                [arg.replace(name, str(i)) for arg in self.command],
                f"{name}={i}",
            )
            for i in self.job_range.ids
        ]


_RANGE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\d+)(?::(\d+))?")


def parse_command_line(argv: Sequence[str]) -> JobRequest:
    """Parse ``[--opt value ...] [JOB=a:b] <logfile> <command...>``; raise ConfigError naming the culprit.

    Options are written ``--name value`` or ``--name=value``; dashes and underscores are the same.
    Names outside OPTIONS are kept in ``extra_options`` for the backend to accept (from its
    configuration) or refuse with ``refuse_unknown_options``.
    """
    argv = list(argv)
    options: dict[str, str | int | bool] = {}
    extra: dict[str, str] = {}
    i = 0
    while i < len(argv) and argv[i].startswith("--"):
        token = argv[i]
        name, has_value, value = token[2:].partition("=")
        name = name.replace("-", "_")
        spec = OPTIONS.get(name)
        if spec is not None and spec.is_flag:
            if has_value:
                raise ConfigError(f"--{name} takes no value")
            options[name] = True
            i += 1
            continue
        if not has_value:
            if i + 1 >= len(argv):
                raise ConfigError(f"--{name} needs a value")
            value = argv[i + 1]
            i += 1
        i += 1
        if spec is None:
            extra[name] = value
            continue
        try:
            options[name] = spec.parse(value)
        except ValueError as e:
            raise ConfigError(f"--{name} {value!r}: {e}") from None

    job_range = None
    if i < len(argv):
        match = _RANGE.fullmatch(argv[i])
        if match:
            start = int(match.group(2))
            end = int(match.group(3)) if match.group(3) is not None else start
            if end < start:
                raise ConfigError(f"empty job range {argv[i]} (the end is before the start)")
            job_range = JobRange(match.group(1), start, end)
            i += 1
    if i >= len(argv):
        raise ConfigError("missing the log file and the command")
    log_template = argv[i]
    command = argv[i + 1 :]
    if not command:
        raise ConfigError(f"missing the command after the log file {log_template}")
    if "requeue_progress" in options and "requeue" not in options:
        raise ConfigError("--requeue_progress is for a requeueable job: it needs --requeue")
    if job_range is not None and len(job_range.ids) > 1 and job_range.name not in log_template:
        raise ConfigError(
            f"{job_range} runs {len(job_range.ids)} jobs but the log file {log_template} does not contain "
            f"{job_range.name}: they would all write the same log"
        )
    return JobRequest(options, job_range, log_template, command, extra)


def refuse_unknown_options(request: JobRequest, accepted: Sequence[str] = ()) -> None:
    """Raise ConfigError for the first extra option that is not in ``accepted``."""
    for name in request.extra_options:
        if name not in accepted:
            known = ", ".join("--" + n for n in sorted(set(OPTIONS) | set(accepted)))
            raise ConfigError(f"unknown option --{name} (known: {known})")


def now() -> str:
    return time.strftime(TIME_FORMAT)


def header(command: Sequence[str], where: str) -> str:
    """The first lines of a job's log: the command line (runnable as shown) and where/when it started."""
    return f"# {shlex.join(command)}\n{STARTED_PREFIX}{now()} {where}\n"


def footer(code: int, elapsed_seconds: float) -> str:
    return f"{ENDED_PREFIX}{code}) at {now()}, elapsed {elapsed_seconds:.0f} s\n"


def last_exit_code(log: str | Path, tail_bytes: int = 65536) -> int | None:
    """The exit code in the footer of the log's last run, or None when that run has no footer.

    A requeued job appends a new header for each run, so a footer only counts when no later run
    started. Only the tail is read: training logs can be large and the footer is at the end.
    """
    try:
        with open(log, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - tail_bytes))
            text = f.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None
    code = None
    for line in text.splitlines():
        if line.startswith(STARTED_PREFIX):
            code = None
        elif line.startswith(ENDED_PREFIX):
            match = re.match(r"# Ended \(code (-?\d+)\)", line)
            code = int(match.group(1)) if match else None
    return code


def log_tail(log: str | Path, lines: int = 10) -> list[str]:
    """The last output lines of the log's last run (no header, no footer), to show why a job failed."""
    try:
        with open(log, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return []
    output: list[str] = []
    for line in text.splitlines():
        if line.startswith(STARTED_PREFIX):
            output = []
        elif not line.startswith(ENDED_PREFIX):
            output.append(line)
    return output[-lines:]


@dataclass(frozen=True)
class JobOutcome:
    """How one job ended: its exit code from the log footer, or None and the reason when there is none."""

    job: Job
    code: int | None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.code == 0
