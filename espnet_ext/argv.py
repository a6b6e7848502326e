"""An ESPnet2 command line read as ESPnet's argparse reads it: the last value of an option wins, and an
option given on the command line wins over the ``--config`` file's value. Also the ``--shard K/N`` option
of the data commands that run as backend jobs (``JOB=1:N ... --shard JOB/N``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

from espnet_ext.errors import ConfigError

ESPNET_NUM_WORKERS = 1  # ESPnet's --num_workers default


def option_value(argv: Sequence[str], name: str) -> str | None:
    """The value of ``--name value`` or ``--name=value`` in an argument list (the last one wins, as argparse)."""
    value = None
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def num_workers(argv: Sequence[str]) -> int:
    """The data loader processes each training process of an ESPnet training command starts: its
    ``--num_workers``, else its ``--config`` file's ``num_workers``, else ESPnet's default. A config that
    does not read is left to ESPnet to refuse."""
    given = option_value(argv, "--num_workers")
    if given is None:
        config = option_value(argv, "--config")
        try:
            settings = yaml.safe_load(Path(config).read_text(encoding="utf-8")) if config else {}
        except (OSError, yaml.YAMLError):
            settings = {}
        given = (settings if isinstance(settings, dict) else {}).get("num_workers")
    return ESPNET_NUM_WORKERS if given is None else int(given)


def parse_shard(text: str) -> tuple[int, int]:
    """``--shard K/N`` as (K, N), 1 <= K <= N; anything else is a ConfigError quoting it."""
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ConfigError(f"--shard must be K/N (e.g. 3/8), got {text!r}") from None
    if not 1 <= k <= n:
        raise ConfigError(f"--shard {text}: K must be 1..N")
    return k, n
