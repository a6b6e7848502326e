"""The benchmarks' timing rule: a warm-up round, rotated interleaved rounds, the fastest round counts."""

import sys
from pathlib import Path

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
