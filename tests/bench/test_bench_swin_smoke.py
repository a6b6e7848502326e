"""The Swin relaxed-attention benchmark runs end to end (its ratios are measured by running it in full)."""

import subprocess
import sys
from pathlib import Path


def test_swin_relaxed_benchmark_smoke_run():
    script = Path(__file__).with_name("bench_swin_relaxed.py")
    out = subprocess.run(
        [sys.executable, str(script), "--quick", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if "ms" in line]
    assert len(rows) == 5 and rows[0].startswith("plain") and "1.000" in rows[0]
    assert rows[1].count("train <= 1.03x") == 1 and rows[2].count("train <= 1.03x") == 1
