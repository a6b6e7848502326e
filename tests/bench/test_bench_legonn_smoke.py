"""The LegoNN benchmark script runs end to end (its ratio is measured by running it in full, not here)."""


def test_legonn_benchmark_smoke_run(run_benchmark):
    stdout = run_benchmark("bench_legonn.py", "--batch_size", "2")
    assert "batch=2x8" in stdout
    rows = [
        line
        for line in stdout.splitlines()
        if line.startswith(("plain encoder-decoder", "LegoNN ("))
    ]
    assert len(rows) == 2 and rows[0].split()[-1] == "1.000"
    assert "LegoNN / plain = " in stdout
    decoding = [line for line in stdout.splitlines() if line.startswith(("plain ASR", "LegoNN 3"))]
    assert len(decoding) == 2 and decoding[0].split()[-1] == "1.000"
    assert "LegoNN ASR decoding / plain = " in stdout
