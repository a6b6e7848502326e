"""The head-selection benchmark runs end to end (its ratios are measured by running it in full, not here)."""

import pytest


def test_head_selection_benchmark_smoke_run(run_benchmark):
    stdout = run_benchmark("bench_head_selection.py", "--batch_size", "4")
    assert "B 4 x T 32" in stdout
    rows = [line.split("|")[1:-1] for line in stdout.splitlines() if line.startswith("| ")]
    assert [r[0].strip() for r in rows[1:]] == [
        "train, one task",
        "train, one task, per-row ids",
        "train, mixed tasks",
        "inference",
        "inference, one id",
    ]
    for row in rows[1:]:
        shared, selecting, ratio = (float(c.strip().rstrip("x")) for c in row[1:4])
        # times are printed to 0.1 ms: the ratio (of the unrounded times) agrees to that precision
        assert shared > 0 and selecting > 0
        assert ratio == pytest.approx(selecting / shared, abs=0.1 * ratio / shared + 1e-3)
    # the CPU goals beside the ratios, with their verdict
    assert [(r[4].strip(), r[5].strip() in ("yes", "NO")) for r in rows[1:]] == [
        ("<= 1.10x", True),
        ("reported", False),
        ("reported", False),
        ("<= 1.02x", True),
        ("<= 1.02x", True),
    ]
