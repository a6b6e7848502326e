"""A fork server for the suite's ``python -m espnet_ext.*`` processes: the recipe tests' pipelines start
hundreds of them, and each pays ~5 s of CPU importing torch and ESPnet before doing a tiny job.

    python tests/forkserver.py SOCKET        # serve; exits with the process that started it

The server imports those libraries once (``PRELOAD``, after ``espnet_ext.registry.install(tasks=())`` as every
entry point does, so that ESPnet's typeguard decorators are off as in a real job) and forks one child per request.
A request comes from ``tests/forkserver_client.py``, which the ``python`` of ``shim()`` runs for ``python -m
espnet_ext.*`` and ``python -m espnet2.*`` outside Slurm jobs; every other ``python`` is the real one. The child
becomes the job as a fresh interpreter would be: the client's stdin / stdout / stderr, working directory,
environment, ``sys.argv`` and ``sys.path[0]``, the module run as ``__main__`` with ``runpy``, Python's exit codes
(an uncaught exception: traceback and 1; ``KeyboardInterrupt``: death by SIGINT). Where the environment differs
from the server's in a variable read at import time (``IMPORT_TIME``, e.g. ``ESPNET_EXT_TYPECHECK=1``), the child
execs the real interpreter instead. The job runs in its own process group: the client forwards the signals it gets
to that group and the server reports how the job ended; a job whose client is gone is killed. Our own modules are
not preloaded: each job imports ``espnet_ext``'s submodules itself."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import gc
import io
import json
import os
import re
import runpy
import select
import signal
import socket
import struct
import sys
import threading
import traceback
from pathlib import Path

PRELOAD = (
    "torch",
    "espnet2.tasks.abs_task",
    "espnet2.text.phoneme_tokenizer",
    "sentencepiece",
    "kaldiio",
    "soundfile",
    "sacrebleu",
    # the task modules our entry points' install() fills (another ~0.5 s a job: SciPy's signal module,
    # Hydra); their tables stay ESPnet's own until a job's install() adds our classes
    "espnet2.tasks.asr",
    "espnet2.tasks.mt",
    "espnet2.tasks.st",
    "espnet2.tasks.lm",
    # timm (with torchvision and huggingface_hub) for the Swin models of our image classification task:
    # ~1.4 s of every CIFAR-100 job's statistics, training, evaluation and checkpoint conversion
    "timm.models.swin_transformer",
)
# Environment variables a process reads while it imports (interpreter, torch, ESPnet, NLTK, our typeguard
# switch): a job that sets one of them differently runs in a real interpreter. Thread counts
# (OMP_NUM_THREADS / MKL_NUM_THREADS, which jobs set per job) are applied with torch.set_num_threads instead,
# and the stdio settings (PYTHONIOENCODING, PYTHONUNBUFFERED) when the job's streams are made.
IMPORT_TIME = re.compile(
    r"PYTHON(?!IOENCODING|UNBUFFERED)\w*|ESPNET_EXT_TYPECHECK|NLTK_DATA|CUDA_\w+|NUMBA_\w+|LC_\w+|LANG"
)
HEADER = struct.Struct("!I")
ENV = "ESPNET_EXT_FORKSERVER"
HERE = Path(__file__).resolve().parent


def shim(directory: Path, socket_path: Path, modules: str = "espnet_ext.*|espnet2.*") -> Path:
    """Write ``directory/python``: the fork server's client for ``python -m MODULE`` where MODULE matches the
    shell pattern ``modules``, outside Slurm jobs; the real interpreter for everything else. Returns
    ``directory`` (to prepend to PATH)."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "python"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = -m ] && [ -z "${{SLURM_JOB_ID:-}}" ] && [ -S "{socket_path}" ]; then\n'
        f'    case "$2" in {modules})\n'
        f'        exec "{sys.executable}" -I -S "{HERE / "forkserver_client.py"}" "{socket_path}" "$@" ;;\n'
        "    esac\n"
        "fi\n"
        f'exec "{sys.executable}" "$@"\n'
    )
    script.chmod(0o755)
    return directory


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise EOFError("client closed the connection")
        data += chunk
    return data


def _stdio(env: dict[str, str]) -> None:
    """sys.stdin / stdout / stderr on fds 0-2 as a fresh interpreter makes them."""
    encoding = env.get("PYTHONIOENCODING", "utf-8").split(":")[0] or "utf-8"
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))

    def stream(fd: int, mode: str, errors: str, line_buffering: bool):
        raw = io.FileIO(fd, mode, closefd=False)
        buffered = (io.BufferedReader if mode == "r" else io.BufferedWriter)(raw)
        return io.TextIOWrapper(
            buffered,
            encoding=encoding,
            errors=errors,
            line_buffering=line_buffering or (mode == "w" and raw.isatty()),
            write_through=unbuffered and mode == "w",
        )

    sys.stdin = sys.__stdin__ = stream(0, "r", "strict", False)
    sys.stdout = sys.__stdout__ = stream(1, "w", "strict", False)
    sys.stderr = sys.__stderr__ = stream(2, "w", "backslashreplace", True)


def _watch_client(conn: socket.socket) -> None:
    """Kill the job's process group when its client is gone (killed by a test's timeout, say)."""
    try:
        while conn.recv(4096):
            pass
    except OSError:
        pass
    os.killpg(0, signal.SIGKILL)


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def _become_job(conn: socket.socket, fds: list[int], listener: socket.socket, wakeup: int) -> None:
    """In the forked child: read the client's request and run it with the client's descriptors ``fds``
    (stdin, stdout, stderr, then any other it had open); never returns."""
    code = 1
    try:
        listener.close()
        os.close(wakeup)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        (size,) = HEADER.unpack(_read_exactly(conn, HEADER.size))
        request = json.loads(_read_exactly(conn, size))
        os.setpgid(0, 0)
        conn.sendall(f"pid {os.getpid()}\n".encode())
        env, args = request["env"], request["args"]
        # the client's descriptors at their numbers: out of the way first (ours, the connection included)
        numbers = request["fd_numbers"]
        base = max([*numbers, *fds, conn.fileno()]) + 1
        conn = socket.socket(fileno=fcntl.fcntl(conn.detach(), fcntl.F_DUPFD, base))
        staged = [fcntl.fcntl(fd, fcntl.F_DUPFD, base) for fd in fds]
        for fd in fds:
            os.close(fd)
        for target, fd in zip(numbers, staged, strict=True):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        differs = [
            key
            for key in set(env) | set(os.environ)
            if IMPORT_TIME.fullmatch(key) and env.get(key) != os.environ.get(key)
        ]
        if differs:  # noted beside the socket: a suite that stops using the server shows why
            with open(Path(request["socket"]).with_name("fresh_interpreters.log"), "a") as log:
                log.write(f"{args[1]}: {' '.join(sorted(differs))}\n")
            os.execve(sys.executable, [sys.executable, *args], env)
        os.environ.clear()
        os.environ.update(env)
        _stdio(env)
        threading.Thread(target=_watch_client, args=(conn,), daemon=True).start()
        threads = env.get("OMP_NUM_THREADS") or env.get("MKL_NUM_THREADS") or ""
        if threads.isdigit():
            import torch

            torch.set_num_threads(max(1, int(threads)))
        module = args[1]
        sys.argv = [module, *args[2:]]
        sys.path[0] = os.getcwd()  # `python -m` puts the working directory first
        sys.modules.pop(module, None)
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc)
        except KeyboardInterrupt:
            traceback.print_exc()
            sys.stderr.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        except BaseException:
            traceback.print_exc()
            code = 1
        threading._shutdown()  # noqa: SLF001  (a fresh interpreter waits for its threads too)
        atexit._run_exitfuncs()  # noqa: SLF001
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                code = code or 120  # as Python does when flushing stdout fails at exit
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def serve(socket_path: Path) -> None:
    owner = os.getppid()
    from espnet_ext.registry import install

    install(tasks=())
    for name in PRELOAD:
        __import__(name)
    # The preloaded objects out of the collector's sight (a permanent generation): a job's collections
    # would otherwise walk them all, writing their GC headers, and so copy every page of the server's heap
    # into the job (copy-on-write), ~0.3-0.6 s of a job's CPU each full collection.
    gc.collect()
    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(socket_path))
    listener.listen(64)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    jobs: dict[int, socket.socket] = {}
    while os.getppid() == owner:
        ready, _, _ = select.select([listener, wake_read], [], [], 1.0)
        if wake_read in ready:
            os.read(wake_read, 4096)
        if listener in ready:
            conn, _ = listener.accept()
            _, fds, _, _ = socket.recv_fds(conn, 1, 253)  # the client's open descriptors
            pid = os.fork()
            if pid == 0:
                _become_job(conn, fds, listener, wake_read)
            for fd in fds:
                os.close(fd)
            jobs[pid] = conn
        while jobs:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = jobs.pop(pid, None)
            if conn is None:
                continue
            if os.WIFSIGNALED(status):
                message = f"signal {os.WTERMSIG(status)}\n"
            else:
                message = f"exit {os.waitstatus_to_exitcode(status)}\n"
            with contextlib.suppress(OSError):  # the client is gone
                conn.sendall(message.encode())
            conn.close()
    for pid in jobs:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
