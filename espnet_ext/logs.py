"""Library code reports through ``logging`` (``logging.getLogger(__name__)``); a command shows those reports.

A reader says what it wrote or left out with ``logger.info`` / ``logger.warning``, so a caller embedding it
(ESPnet's own processes, a test, another program) decides where that goes. Our commands
(``errors.reports_input_errors``) run under :func:`command_logging`: where nothing has configured logging,
every ``espnet_ext`` report from INFO up is one plain line on the current stderr, as a command's output.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

PACKAGE = "espnet_ext"


class _CurrentStderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of each report (a redirected or captured stderr too)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(
        self, _value
    ) -> None:  # StreamHandler.__init__ assigns one; ours is always sys.stderr
        pass


@contextlib.contextmanager
def command_logging() -> Iterator[None]:
    """While a command runs, show the package's INFO and higher reports on stderr, unless logging has been
    configured already (a handler on the root or the package logger): then that configuration decides."""
    logger = logging.getLogger(PACKAGE)
    if logging.getLogger().handlers or logger.handlers:
        yield
        return
    handler, level = _CurrentStderr(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
