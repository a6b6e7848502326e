"""The Multiformer benchmark runs end to end (its ratios are measured by running it in full, not here)."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_multiformer import PeakMemory  # noqa: E402


def test_multiformer_benchmark_smoke_run(run_benchmark, tmp_path):
    stdout = run_benchmark("bench_multiformer.py", "--out_dir", str(tmp_path), "--batch_size", "2")
    assert "4 heads, batch 2, training mode" in stdout
    rows = [line for line in stdout.splitlines() if line.startswith("| ") and line[2].isdigit()]
    kinds = [
        r for r in rows if len(r.strip().strip("|").split("|")) == 9
    ]  # T + (ms, MiB) x 4 kinds
    dense = [r for r in rows if len(r.strip().strip("|").split("|")) == 4]  # T, blocked, dense, MiB
    assert [r.split("|")[1].strip() for r in kinds] == ["64", "128", "256"]
    assert [r.split("|")[1].strip() for r in dense] == ["64", "128", "256"]  # all <= the threshold
    assert len(rows) == 6 and "Local(64) dense / blocked up to T=256" in stdout
    assert (tmp_path / "multiformer_bench.png").stat().st_size > 0


def test_peak_memory_counts_each_live_storage_once():
    with PeakMemory() as memory:
        a = torch.ones(1000)  # 4,000 bytes
        b = a.view(10, 100)  # a view: no new storage
        c = a * 2  # 4,000 more
        del c
        d = b + 1  # takes c's place: the peak stays 8,000
    assert memory.peak == 8000 and d.numel() == 1000
