"""Compiled layers against the eager model (``espnet_ext.nets.compiled_layers``): one module built twice
from one seed, once with ``compile_layers`` (the ``aot_eager`` backend: traced, run by PyTorch's own
kernels, so results and random draws match the eager model's), the same steps run through both.

    eager, compiled = eager_and_compiled(lambda **extra: Encoder(..., **extra))
    same_step(eager, compiled, lambda model: model(xs, lengths)[0])
    assert graph_breaks() == {} and graphs() == 3
"""

from __future__ import annotations

from collections.abc import Callable

import torch

COMPILED = dict(compile_layers=True, compile_backend="aot_eager")


def eager_and_compiled(build: Callable[..., torch.nn.Module], device="cpu", seed: int = 0):
    """``build()`` and ``build(**COMPILED)``, each after ``torch.manual_seed(seed)``, on ``device``; dynamo's
    caches and counters cleared, so ``graphs``/``graph_breaks`` count what the steps after trace."""
    models = []
    for extra in ({}, COMPILED):
        torch.manual_seed(seed)
        models.append(build(**extra).to(device))
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    return models


def same_step(eager, compiled, run: Callable[..., torch.Tensor], *inputs, seed: int | None = None):
    """``run(model, *inputs)`` on both (after ``torch.manual_seed(seed)`` when given), backward through a
    weighted sum of its output; outputs and every parameter's gradient (None included) must agree."""
    results = []
    for model in (eager, compiled):
        model.zero_grad()
        if seed is not None:
            torch.manual_seed(seed)
        out = run(model, *inputs)
        weights = 1.0 if out.dim() == 0 else torch.linspace(-1, 1, out.size(-1), device=out.device)
        (out * weights).sum().backward()
        results.append((out, [p.grad for p in model.parameters()]))
    torch.testing.assert_close(results[1], results[0])
    return results[1][0]


def graphs() -> int:
    """Graphs traced since ``eager_and_compiled``."""
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def graph_breaks() -> dict:
    return dict(torch._dynamo.utils.counters["graph_break"])
