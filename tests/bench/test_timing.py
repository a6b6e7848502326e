"""The benchmarks' timing rule: a warm-up round, rotated interleaved rounds, the fastest round counts."""

import argparse
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import timing  # noqa: E402


def test_rounds_rotate_and_the_fastest_counts(monkeypatch):
    clock, order = [0.0], []
    durations = {"a": [9.0, 3.0, 2.0, 4.0], "b": [9.0, 5.0, 6.0, 1.0], "c": [9.0, 7.0, 7.0, 7.0]}

    def step(name):
        order.append(name)
        clock[0] += durations[name].pop(0)

    monkeypatch.setattr(timing.time, "perf_counter", lambda: clock[0])
    best = timing.fastest({n: lambda n=n: step(n) for n in "abc"}, rounds=3, device="cpu")
    # warm-up (not counted), then each round starts one variant later
    assert order == list("abcbcacababc")
    assert best == {"a": 2.0, "b": 1.0, "c": 7.0}  # the warm-up's 9.0 never counts


def test_model_steps_train_with_adam_and_infer_without_autograd():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 4)
    before = model.weight.detach().clone()
    inputs = (torch.randn(2, 3),)
    timing.model_steps({"m": model}, inputs, train=True)["m"]()
    assert model.training and model.weight.grad is None  # stepped, gradients cleared
    assert not torch.equal(model.weight, before)
    after = model.weight.detach().clone()
    timing.model_steps({"m": model}, inputs, train=False)["m"]()
    assert not model.training and torch.equal(model.weight, after)


def test_ratio_rows_and_missed_targets(capsys):
    train, infer = {"plain": 0.100, "relaxed": 0.102}, {"plain": 0.200, "relaxed": 0.210}
    missed = timing.print_ratios(train, infer, "plain", {"relaxed": (1.03, 1.01)})
    rows = capsys.readouterr().out.splitlines()
    assert missed == ["relaxed"]  # train 1.02x met, inference 1.05x not
    assert rows[1].split() == ["plain", "100.0ms", "1.000", "200.0ms", "1.000"]
    assert rows[2].split()[1:5] == ["102.0ms", "1.020", "210.0ms", "1.050"]
    assert rows[2].endswith("train <= 1.03x, inference <= 1.01x: MISSED")
    assert timing.print_ratios(train, infer, "plain", {"relaxed": (1.03, None)}) == []
    assert capsys.readouterr().out.splitlines()[2].endswith("train <= 1.03x: met")


def test_batch_size_defaults_to_the_gpu_goals_batch_on_cuda_only():
    parser = argparse.ArgumentParser()
    timing.device_options(parser, cuda_batch=16, cpu_batch=1)
    pick = timing.pick_batch_size
    assert pick(parser.parse_args([]), 16, 1) == 1
    assert pick(parser.parse_args(["--device", "cuda"]), 16, 1) == 16
    assert pick(parser.parse_args(["--device", "cuda:1"]), 16, 1) == 16
    assert pick(parser.parse_args(["--device", "cuda", "--batch_size", "4"]), 16, 1) == 4
    with pytest.raises(SystemExit, match="--batch_size must be >= 1, not 0"):
        pick(parser.parse_args(["--batch_size", "0"]), 16, 1)


def test_multiformer_goals_on_cuda_are_the_gpu_goals():
    import bench_multiformer

    lengths = [1024, 2048, 4096]
    times = {
        t: {"Full": 1.0 * t, "Local(64)": 0.2 * t, "Conv(5,2)": 0.4 * t, "Fast": 0.3 * t}
        for t in lengths
    }
    peaks = {
        t: {"Full": 10.0 * t, "Local(64)": 1.0 * t, "Conv(5,2)": 5.0 * t, "Fast": 1.0 * t}
        for t in lengths
    }
    cpu = {name: ok for name, _, ok in bench_multiformer.goals(lengths, times, peaks, 1.0)}
    gpu = {
        name: ok for name, _, ok in bench_multiformer.goals(lengths, times, peaks, 1.0, gpu=True)
    }
    # Conv is 2.5x faster: the GPU goal (>= 2x) is met, the CPU one (>= 3x) is not; Fast (3.33x) only on GPU
    assert cpu["Conv(5,2) speed-up at T=2048 (>= 3x)"] is False
    assert gpu["Conv(5,2) speed-up at T=2048 (>= 2x)"] is True
    assert gpu["Fast speed-up at T=4096 (>= 3x)"] is True and not any(
        "Fast speed-up" in n for n in cpu
    )
    assert gpu["Local speed-up at T=4096, blocked path (>= 4x)"]
    assert gpu["Local memory saving at T=4096, blocked path (>= 8x)"]


def test_multiformer_local_goals_take_the_path_the_device_runs():
    """On a device in LOCAL_CHUNK_DEVICES the Local goals and the dense threshold are judged on the chunked
    column, not the blocked one."""
    import bench_multiformer

    lengths = [1024, 2048, 4096]
    times = {
        t: {
            "Full": 1.0 * t,
            "Local(64)": 0.5 * t,
            "Local(64) chunked": 0.2 * t,
            "Conv(5,2)": t,
            "Fast": t,
        }
        for t in lengths
    }
    times[1024]["Local(64) dense"] = 0.3 * 1024  # faster than blocked, slower than chunked
    peaks = {t: {name: 1.0 * t for name in times[t]} for t in lengths}
    judged = {
        local: {
            name: (value, ok)
            for name, value, ok in bench_multiformer.goals(
                lengths, times, peaks, 1.0, gpu=True, local=local, threshold=1024
            )
        }
        for local in ("Local(64)", "Local(64) chunked")
    }
    assert judged["Local(64)"]["Local speed-up at T=4096, blocked path (>= 4x)"] == ("2.00x", False)
    assert judged["Local(64) chunked"]["Local speed-up at T=4096, chunked path (>= 4x)"] == (
        "5.00x",
        True,
    )
    assert judged["Local(64)"][
        "Local(64) dense / blocked up to T=1024 (<= 1.0x: the dense threshold)"
    ][1]
    dense = judged["Local(64) chunked"][
        "Local(64) dense / chunked up to T=1024 (<= 1.0x: the dense threshold)"
    ]
    assert dense == ("1.50x", False)
    # a lower threshold is judged from both sides: dense up to it, the device's path at the first T past it
    # slower than the chunks at 2048: right to stop at 1024
    times[2048]["Local(64) dense"] = 0.3 * 2048
    rows = {
        name: (value, ok)
        for name, value, ok in bench_multiformer.goals(
            lengths, times, peaks, 1.0, gpu=True, local="Local(64) chunked", threshold=1024
        )
    }
    assert rows["Local(64) chunked / dense at T=2048 (<= 1.0x: no higher dense threshold)"] == (
        "0.67x",
        True,
    )
    assert "Local(64) dense / chunked up to T=1024 (<= 1.0x: the dense threshold)" in rows
    assert (
        "Local(64) chunked time ~ T^k over T=1024..4096 (linear: k <= 1.2)"
        in judged["Local(64) chunked"]
    )
