#!/usr/bin/env python3
"""Score a hypothesis Kaldi text file against its reference (WER); see espnet_ext/scoring/wer.py."""

import sys
from pathlib import Path

# Works from a checkout (and through a recipe's utils link) even when espnet_ext is not installed.
sys.path.append(str(Path(__file__).resolve().parents[1]))

from espnet_ext.scoring.wer import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
