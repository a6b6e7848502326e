"""Errors that point at the offending input.

Every reader and stage helper raises these so a user sees ``path:line: what is wrong``
(or ``path: key 'utt1': ...``) instead of a traceback from deep inside torch.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from espnet_ext.logs import command_logging


class InputError(ValueError):
    """Bad input data or configuration, located as precisely as we can."""

    def __init__(
        self,
        message: str,
        path: str | Path | None = None,
        line: int | None = None,
        key: str | None = None,
    ):
        self.path = None if path is None else str(path)
        self.line = line
        self.key = key
        self.message = message
        where = ""
        if self.path is not None:
            where = self.path
            if line is not None:
                where += f":{line}"
            if key is not None:
                where += f": key '{key}'"
            where += ": "
        elif key is not None:
            where = f"key '{key}': "
        super().__init__(where + message)


class ConfigError(InputError):
    """A configuration value that cannot work, refused before any work starts."""


def reports_input_errors(
    main: Callable[[Sequence[str] | None], int | None],
) -> Callable[[Sequence[str] | None], int]:
    """Wrap a command's ``main(argv)``: an InputError becomes ``error: <where>: <what>`` on stderr and exit
    status 1 instead of a traceback (the message already names the file, line or key); success is 0. The
    library's ``logging`` reports show on stderr while it runs (``logs.command_logging``)."""

    @functools.wraps(main)
    def run(argv: Sequence[str] | None = None) -> int:
        try:
            with command_logging():
                return main(argv) or 0
        except InputError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1

    return run
