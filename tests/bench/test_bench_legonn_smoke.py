"""The LegoNN benchmark script runs end to end (its ratio is measured by running it in full, not here)."""

import subprocess
import sys
from pathlib import Path


def test_legonn_benchmark_smoke_run():
    script = Path(__file__).with_name("bench_legonn.py")
    out = subprocess.run(
        [sys.executable, str(script), "--quick", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [
        line
        for line in out.stdout.splitlines()
        if line.startswith(("plain encoder-decoder", "LegoNN ("))
    ]
    assert len(rows) == 2 and rows[0].split()[-1] == "1.000"
    assert "LegoNN / plain = " in out.stdout
    decoding = [
        line for line in out.stdout.splitlines() if line.startswith(("plain ASR", "LegoNN 3"))
    ]
    assert len(decoding) == 2 and decoding[0].split()[-1] == "1.000"
    assert "LegoNN ASR decoding / plain = " in out.stdout
