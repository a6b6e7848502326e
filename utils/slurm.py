#!/usr/bin/env python3
"""Runs jobs through the slurm backend: utils/slurm.py [options] [JOB=a:b] <logfile> <command...> (see --help)."""

import sys
from pathlib import Path

try:
    import espnet_ext.jobs  # noqa: F401
except ImportError:  # not installed: use the checkout this script belongs to
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from espnet_ext.jobs.cli import main

if __name__ == "__main__":
    sys.exit(main(backend="slurm", prog="slurm.py"))
