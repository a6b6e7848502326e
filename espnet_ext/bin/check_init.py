"""Refuse an adapter training that would start from an untrained model, before any stage runs.

    python -m espnet_ext.bin.check_init --config conf/train_st_adapter.yaml -- <training options>

An adapter model (``model_conf.train_adapters_only: true``) trains its adapters only, everything else frozen,
so it must start from a trained model: ``init_param`` in the config, or ``--init_param`` among the training
options (the pipelines' ``--asr_args`` / ``--st_args`` / ``--mt_args``). asr.sh, st.sh and mt.sh run this
check first; a config without ``train_adapters_only`` passes whatever it starts from, and a config that does not
exist yet is left to the stage that reads it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from espnet_ext.errors import ConfigError, reports_input_errors


def has_init(config: dict, train_args: Sequence[str]) -> bool:
    """Whether a training of ``config`` with ``train_args`` initialises from a model file."""
    words = list(train_args)
    if "--init_param" in words:  # ESPnet: the command line's value replaces the config's
        i = words.index("--init_param")
        return i + 1 < len(words) and not words[i + 1].startswith("--")
    return bool(config.get("init_param"))


def check_init(path: Path, train_args: Sequence[str]) -> None:
    if not path.is_file():  # the stage that reads it says so: the data stages need no config yet
        return
    config = yaml.safe_load(path.read_text()) or {}
    if not isinstance(config, dict):
        raise ConfigError("expected a mapping", path=path)
    model_conf = config.get("model_conf") or {}
    if model_conf.get("train_adapters_only") and not has_init(config, train_args):
        raise ConfigError(
            "trains adapters on a frozen trained model, but names none: give it init_param in the config "
            "or --init_param MODEL in the training options (--asr_args / --st_args / --mt_args)",
            path=path,
            key="model_conf.train_adapters_only",
        )


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, required=True, help="the training config (YAML)")
    parser.add_argument("train_args", nargs="*", help="the training options (after --)")
    args = parser.parse_args(argv)
    check_init(args.config, args.train_args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
