"""Step times of variants measured side by side, the way every benchmark here compares them.

``fastest({name: step}, rounds, device)`` runs the steps interleaved: one warm-up round (allocators,
kernels, lazy initialisation; not counted), then ``rounds`` rounds, each starting one variant later than
the last so that no variant always runs first on a loaded machine. A variant's time is its fastest round,
the least disturbed one. On CUDA the clock stops only after the device has finished the step.

``model_steps(models, inputs, train)`` gives those steps for models that map ``inputs`` to logits:
a training step (forward, backward, Adam) or an inference step (eval mode, no autograd).

``device_options(parser, cuda_batch, cpu_batch)`` adds every benchmark's ``--device`` and ``--batch_size``;
``pick_batch_size(args, ...)`` picks the batch: the option's, else on CUDA the batch of the GPU goals (the sizes a
real run trains at: at batch 1 a GPU only measures kernel launches) and elsewhere the CPU default.
"""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable, Hashable, Mapping

import torch


def device_options(parser: argparse.ArgumentParser, cuda_batch: int, cpu_batch: int) -> None:
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument(
        "--batch_size",
        type=int,
        default=None,
        help=f"default: {cuda_batch} on CUDA (the GPU goals' batch), {cpu_batch} on CPU",
    )


def is_cuda(device: torch.device | str) -> bool:
    return torch.device(device).type == "cuda"


def pick_batch_size(args: argparse.Namespace, cuda_batch: int, cpu_batch: int) -> int:
    """``--batch_size`` if given (>= 1), else ``cuda_batch`` on CUDA and ``cpu_batch`` elsewhere."""
    if args.batch_size is not None:
        if args.batch_size < 1:
            raise SystemExit(f"error: --batch_size must be >= 1, not {args.batch_size}")
        return args.batch_size
    return cuda_batch if is_cuda(args.device) else cpu_batch


def timed(step: Callable[[], object], device: torch.device | str) -> float:
    """Seconds that ``step()`` takes, including the device's queued work."""
    start = time.perf_counter()
    step()
    if is_cuda(device):
        torch.cuda.synchronize()
    return time.perf_counter() - start


def fastest(
    steps: Mapping[Hashable, Callable[[], object]], rounds: int, device: torch.device | str
) -> dict[Hashable, float]:
    """``{name: seconds}``: each step's fastest of ``rounds`` rotated rounds after a warm-up round."""
    names = list(steps)
    best = dict.fromkeys(names, float("inf"))
    for r in range(rounds + 1):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            elapsed = timed(steps[name], device)
            if r:
                best[name] = min(best[name], elapsed)
    return best


def _train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, inputs: tuple) -> None:
    model(*inputs).float().logsumexp(-1).mean().backward()  # a scalar that depends on every logit
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _inference_step(model: torch.nn.Module, inputs: tuple) -> None:
    # no_grad, as ESPnet's inference runs (Speech2Text.__call__): tensors made under inference_mode have no
    # version counter, so the per-mask caches (attention/mask_cache.py) would recompute in every layer
    with torch.no_grad():
        model(*inputs)


def model_steps(
    models: Mapping[str, torch.nn.Module], inputs: tuple, train: bool
) -> dict[str, Callable[[], None]]:
    """A step of each model on ``inputs`` (the models are put in training or eval mode here)."""
    steps = {}
    for name, model in models.items():
        model.train(train)
        if train:
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
            steps[name] = functools.partial(_train_step, model, optimizer, inputs)
        else:
            steps[name] = functools.partial(_inference_step, model, inputs)
    return steps


def print_ratios(
    train: Mapping[str, float],
    infer: Mapping[str, float],
    base: str,
    targets: Mapping[str, tuple[float | None, float | None]],
) -> list[str]:
    """Print a row per variant: training and inference step times, their ratios to ``base``'s and the
    verdict on the variant's ``(training, inference)`` targets (None: no target); returns the variants
    that missed a target."""
    width = max(map(len, train)) + 2
    print(
        f"{'variant':{width}s} {'train step':>11s} {'ratio':>6s} {'inference':>10s} {'ratio':>6s}  target"
    )
    missed = []
    for name in train:
        ratios = train[name] / train[base], infer[name] / infer[base]
        limits = targets.get(name, (None, None))
        checks = [
            (f"{what} <= {limit:.2f}x", ratio <= limit)
            for what, ratio, limit in zip(("train", "inference"), ratios, limits)
            if limit is not None
        ]
        verdict = ""
        if checks:
            ok = all(met for _, met in checks)
            verdict = ", ".join(text for text, _ in checks) + f": {'met' if ok else 'MISSED'}"
            if not ok:
                missed.append(name)
        print(
            f"{name:{width}s} {train[name] * 1e3:9.1f}ms {ratios[0]:6.3f} {infer[name] * 1e3:8.1f}ms "
            f"{ratios[1]:6.3f}  {verdict}"
        )
    return missed
