"""The Swin relaxed-attention benchmark runs end to end (its ratios are measured by running it in full)."""


def test_swin_relaxed_benchmark_smoke_run(run_benchmark):
    stdout = run_benchmark("bench_swin_relaxed.py", "--batch_size", "2")
    assert ", batch 2, cpu" in stdout
    rows = [line for line in stdout.splitlines() if "ms" in line]
    assert len(rows) == 5 and rows[0].startswith("plain") and "1.000" in rows[0]
    assert rows[1].count("train <= 1.03x") == 1 and rows[2].count("train <= 1.03x") == 1
