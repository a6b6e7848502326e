"""Crash-safe file output: nothing half-written ever looks finished."""

from __future__ import annotations

import contextlib
import gzip
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str = "utf-8") -> Iterator:
    """Write to a temporary file beside ``path`` and rename it into place on success.

    On any exception the temporary file is removed and ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    # mkstemp creates 0600; prepared data is shared on clusters, so honour the umask like open()
    # would.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        kwargs = {} if "b" in mode else {"encoding": encoding}
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def read_utf8_lines(path: str | Path) -> Iterator[tuple]:
    """Yield ``(line_number, line)`` of a UTF-8 text file (gzip-compressed when its name ends in ``.gz``),
    refusing other encodings by line and a truncated or corrupt compressed file after its last good line."""
    from espnet_ext.errors import InputError

    path = Path(path)
    if not path.is_file():
        raise InputError("file does not exist or is not a regular file", path=path)
    opener = gzip.open if path.suffix == ".gz" else open
    number = 0
    try:
        with opener(path, "rb") as f:
            for number, raw in enumerate(f, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise InputError(
                        f"not valid UTF-8 ({e.reason} at byte {e.start})", path=path, line=number
                    ) from e
                yield number, line.rstrip("\n").rstrip("\r")
    except (OSError, EOFError) as e:  # a truncated or corrupt .gz
        raise InputError(f"cannot read beyond this line: {e}", path=path, line=number + 1) from e
