"""The Slurm backend's configuration file, in the format of Kaldi/ESPnet's ``conf/slurm.conf``.

    command sbatch --export=ALL          # the submit command; the backend adds its own options after it
    option mem=* --mem $0                # --mem 4G on the command line -> sbatch --mem 4G ($0 is the value)
    option gpu=0                         # an exact value wins over '*'; nothing after it adds nothing
    option gpu=* -p gpu --gres=gpu:$0    # partitions and extra sbatch options go here
    default gpu=0                        # the value used when the command line does not give the option

Every option given on the command line (or by a ``default``) must have a matching ``option`` line,
else the request is refused naming this file. Any name may be defined (e.g. ``option name=*
--job-name $0`` makes ``--name x`` a valid option). ``--max_jobs_run``, ``--requeue``,
``--requeue_progress``, ``--dependency`` and ``--config`` are handled by the backend itself and cannot be
redefined here.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from espnet_ext.errors import ConfigError
from espnet_ext.fileio import read_utf8_lines

# Used when no --config is given: resources map to the plain sbatch options, the cluster's default
# partition.
DEFAULT_CONFIG = """\
command sbatch --export=ALL
option mem=* --mem $0
option time=* --time $0
option num_threads=* --cpus-per-task $0
option num_nodes=* --nodes $0
default gpu=0
option gpu=0
option gpu=* --gres=gpu:$0
"""

BACKEND_OPTIONS = ("max_jobs_run", "requeue", "requeue_progress", "dependency", "config")


@dataclass
class SlurmConfig:
    source: str
    command: list[str] = field(default_factory=list)
    exact: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    wildcard: dict[str, list[str]] = field(default_factory=dict)
    defaults: dict[str, str] = field(default_factory=dict)
    where: dict[str, int] = field(
        default_factory=dict
    )  # option name -> line of its first rule, for errors

    @classmethod
    def load(cls, path: str | Path) -> SlurmConfig:
        return cls.parse(read_utf8_lines(path), str(path))

    @classmethod
    def default(cls) -> SlurmConfig:
        return cls.parse(
            enumerate(DEFAULT_CONFIG.splitlines(), start=1), "<built-in Slurm configuration>"
        )

    @classmethod
    def parse(cls, numbered_lines, source: str) -> SlurmConfig:
        config = cls(source)
        for number, line in numbered_lines:
            try:
                words = shlex.split(line, comments=True)
            except ValueError as e:
                raise ConfigError(
                    f"cannot split into words: {e}", path=source, line=number
                ) from None
            if not words:
                continue
            kind, rest = words[0], words[1:]
            if kind == "command":
                if not rest:
                    raise ConfigError(
                        "'command' needs the submit program, e.g. 'command sbatch'",
                        path=source,
                        line=number,
                    )
                config.command = rest
                continue
            if kind not in ("option", "default") or not rest or "=" not in rest[0]:
                raise ConfigError(
                    "expected 'command ...', 'option NAME=VALUE|* ARGS...' or "
                    f"'default NAME=VALUE', got {line.strip()!r}",
                    path=source,
                    line=number,
                )
            name, _, value = rest[0].partition("=")
            name = name.replace("-", "_")
            if not name or not value:
                raise ConfigError(f"expected NAME=VALUE, got {rest[0]!r}", path=source, line=number)
            if name in BACKEND_OPTIONS:
                raise ConfigError(
                    f"--{name} is handled by the Slurm backend itself; remove this line",
                    path=source,
                    line=number,
                )
            config.where.setdefault(name, number)
            if kind == "default":
                if len(rest) > 1:
                    raise ConfigError(
                        "'default NAME=VALUE' takes nothing after the value",
                        path=source,
                        line=number,
                    )
                config.defaults[name] = value
            elif value == "*":
                config.wildcard[name] = rest[1:]
            else:
                config.exact[(name, value)] = rest[1:]
        if not config.command:
            raise ConfigError("no 'command' line (e.g. 'command sbatch --export=ALL')", path=source)
        for name, value in config.defaults.items():
            if (name, value) not in config.exact and name not in config.wildcard:
                raise ConfigError(
                    f"'default {name}={value}' has no 'option {name}=...' line",
                    path=source,
                    line=config.where[name],
                )
        return config

    @property
    def option_names(self) -> list[str]:
        return sorted({name for name, _ in self.exact} | set(self.wildcard) | set(self.defaults))

    def option_args(self, options: Mapping[str, object]) -> list[str]:
        """The submit options that the given values (over the defaults) translate to."""
        values = dict(self.defaults)
        values.update(
            {name: str(value) for name, value in options.items() if name not in BACKEND_OPTIONS}
        )
        args: list[str] = []
        for name, value in values.items():
            if (name, value) in self.exact:
                args += self.exact[(name, value)]
            elif name in self.wildcard:
                args += [word.replace("$0", value) for word in self.wildcard[name]]
            else:
                raise ConfigError(
                    f"--{name} {value}: no 'option {name}=...' line matches this value",
                    path=self.source,
                )
        return args
