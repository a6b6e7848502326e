"""``python -m espnet_ext.jobs.running DIR...``: fail, naming each one, if a Slurm job whose record lies under
DIR (``<logdir>/q/<name>.job``, written by the Slurm backend at each submission) is still pending or running.

A stage that clears its working directory before submitting again (statistics, image checks) asks this
first: removing the logs and records of a job an earlier (dead) run of the pipeline left running would make
the rerun submit the same work beside it, both writing the same files. Exit status 0: nothing runs there;
1: some job does (each named on stderr with its record and how to end it); 2: bad arguments, or squeue did not
answer (retried first).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from espnet_ext.errors import InputError
from espnet_ext.jobs.slurm import states_on_its_way


def running_jobs(directory: Path) -> list[tuple[Path, str, list[str]]]:
    """(record, job id, states) of every recorded job under ``directory`` that may still run."""
    found = []
    for record in sorted(directory.glob("**/q/*.job")):
        words = record.read_text(encoding="utf-8").split()
        if words:
            states = states_on_its_way(words[0])
            if states:
                found.append((record, words[0], states))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m espnet_ext.jobs.running", description=__doc__)
    parser.add_argument("directories", nargs="+", type=Path)
    args = parser.parse_args(argv)
    try:
        running = [job for directory in args.directories for job in running_jobs(directory)]
    except InputError as e:  # squeue did not answer: clearing the directory is not safe
        print(f"{parser.prog}: {e}", file=sys.stderr)
        return 2
    for record, job_id, states in running:
        print(
            f"{record}: Slurm job {job_id} of an earlier run is still {'/'.join(states)} here: "
            f"wait for it to end or 'scancel {job_id}', then rerun",
            file=sys.stderr,
        )
    return 1 if running else 0


if __name__ == "__main__":
    sys.exit(main())
