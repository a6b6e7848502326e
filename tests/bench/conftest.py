"""Smoke runs of the benchmark scripts: each runs end to end with ``--quick --rounds 1`` (the ratios come
from full runs, not from here)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def run_benchmark():
    """``run_benchmark("bench_x.py", *args)`` -> the script's stdout; a failing script fails the test."""

    def run(script: str, *args: str) -> str:
        command = [
            sys.executable,
            str(Path(__file__).with_name(script)),
            "--quick",
            "--rounds",
            "1",
        ]
        # as a user runs it from a shell: without the test session's PYTHONPATH
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        out = subprocess.run(
            [*command, *args], capture_output=True, text=True, timeout=300, env=env
        )
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout

    return run
