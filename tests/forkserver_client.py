"""The client of tests/forkserver.py, run for ``python -m MODULE ARGS...`` by its shim (``python -I -S``:
the standard library only, a start of a few milliseconds).

    python -I -S tests/forkserver_client.py SOCKET -m MODULE [ARGS...]

Hands this process's stdin / stdout / stderr, working directory, environment and arguments to the server,
forwards the signals it gets to the job's process group, and ends as the job ended (its exit code, or death by
the same signal).
"""

import contextlib
import json
import os
import signal
import socket
import struct
import sys

FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)


MAX_FDS = 250  # one SCM_RIGHTS message carries at most 253


def main() -> None:
    socket_path, args = sys.argv[1], sys.argv[2:]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(socket_path)
    fds = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:  # closed: the job reads EOF there / its output is lost
            fds.append(os.open(os.devnull, os.O_RDWR))
    # every other open descriptor too, at its number: a job may read /dev/fd/N (bash's <(...))
    for name in sorted(os.listdir("/proc/self/fd"), key=int):
        fd = int(name)
        if fd > 2 and fd != conn.fileno() and len(fds) < MAX_FDS:
            try:
                os.fstat(fd)
            except OSError:  # the listing's own descriptor, closed by now
                continue
            fds.append(fd)
    socket.send_fds(conn, [b"\0"], fds)
    request = {
        "args": args,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "socket": socket_path,
        "fd_numbers": [0, 1, 2, *fds[3:]],
    }
    request = json.dumps(request).encode()
    conn.sendall(struct.pack("!I", len(request)) + request)
    reader = conn.makefile("r")
    job = None
    for line in reader:
        kind, _, value = line.strip().partition(" ")
        if kind == "pid":
            job = int(value)

            def forward(signum, _frame, job=job):
                with contextlib.suppress(OSError):  # already ended
                    os.killpg(job, signum)

            for signum in FORWARDED:
                signal.signal(signum, forward)
        elif kind == "exit":
            sys.exit(int(value))
        elif kind == "signal":
            signum = int(value)
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            sys.exit(128 + signum)
    print(f"forkserver_client: the server closed before job {job} ended", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
    main()
