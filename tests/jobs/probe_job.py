"""A small program the job backend tests run as their jobs; each subcommand leaves evidence on disk.

probe_job.py write FILE TEXT              write TEXT to FILE
probe_job.py fail CODE                    print a line, exit with CODE
probe_job.py argv                         print the arguments it received, as a Python list
probe_job.py overlap DIR NAME SECONDS     mark itself running in DIR, record how many marks exist, sleep
probe_job.py meet DIR NAME OTHER SECONDS  mark itself running, wait until OTHER is running too (else exit 9)
probe_job.py count CHECKPOINT STEPS DELAY count to STEPS, one step per DELAY s, resuming from CHECKPOINT
probe_job.py hang PIDFILE                 write its pid to PIDFILE and sleep for a minute
probe_job.py where FILE                   append this task's Slurm node id and name to FILE
"""

import os
import sys
import time
from pathlib import Path


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def main(argv):
    command, args = argv[0], argv[1:]
    if command == "write":
        Path(args[0]).write_text(args[1])
    elif command == "fail":
        print(f"about to fail with code {args[0]}", flush=True)
        return int(args[0])
    elif command == "argv":
        print(repr(args))
    elif command == "overlap":
        directory, name, seconds = Path(args[0]), args[1], float(args[2])
        (directory / f"{name}.running").touch()
        (directory / f"{name}.seen").write_text(str(len(list(directory.glob("*.running")))))
        time.sleep(seconds)
        (directory / f"{name}.running").unlink()
    elif command == "meet":
        directory, name, other, seconds = Path(args[0]), args[1], args[2], float(args[3])
        (directory / f"{name}.running").touch()
        deadline = time.monotonic() + seconds
        while not (directory / f"{other}.running").exists():
            if time.monotonic() > deadline:
                print(f"{other} never ran at the same time as {name}", flush=True)
                return 9
            time.sleep(0.05)
        time.sleep(0.5)  # let the other one see this one too
    elif command == "count":
        checkpoint, steps, delay = Path(args[0]), int(args[1]), float(args[2])
        step = int(checkpoint.read_text()) if checkpoint.exists() else 0
        print(f"resuming at {step}", flush=True)
        while step < steps:
            time.sleep(delay)
            step += 1
            write_atomically(checkpoint, str(step))
            print(f"step {step}", flush=True)
    elif command == "hang":
        Path(args[0]).write_text(str(os.getpid()))
        time.sleep(60)
    elif command == "where":
        with open(args[0], "a") as f:
            f.write(f"{os.environ.get('SLURM_NODEID')} {os.environ.get('SLURMD_NODENAME')}\n")
    else:
        raise SystemExit(f"unknown probe command {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
