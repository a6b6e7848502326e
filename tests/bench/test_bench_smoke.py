"""The benchmark script runs end to end (its ratios are measured by running it in full, not here)."""


def test_relaxed_attention_benchmark_smoke_run(run_benchmark):
    stdout = run_benchmark("bench_relaxed_attention.py", "--batch_size", "3")
    assert "batch 3 x 200 frames" in stdout
    rows = [line for line in stdout.splitlines() if "ms" in line]
    assert len(rows) == 4 and rows[0].startswith("plain") and "1.000" in rows[0]
