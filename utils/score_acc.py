#!/usr/bin/env python3
"""Sequence and character accuracy of a recognised Kaldi text file; see espnet_ext/scoring/accuracy.py."""

import sys
from pathlib import Path

# Works from a checkout (and through a recipe's utils link) even when espnet_ext is not installed.
sys.path.append(str(Path(__file__).resolve().parents[1]))

from espnet_ext.scoring.accuracy import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
