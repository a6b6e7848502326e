"""The benchmark script runs end to end (its ratios are measured by running it in full, not here)."""

import subprocess
import sys
from pathlib import Path


def test_relaxed_attention_benchmark_smoke_run():
    script = Path(__file__).with_name("bench_relaxed_attention.py")
    out = subprocess.run(
        [sys.executable, str(script), "--quick", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if "ms" in line]
    assert len(rows) == 4 and rows[0].startswith("plain") and "1.000" in rows[0]
