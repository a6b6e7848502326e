#!/usr/bin/env python
"""Cost of relaxed and fuzzy relaxed window attention in Swin-T, side by side in one process.

    python tests/bench/bench_swin_relaxed.py [--quick] [--device cpu|cuda] [--batch_size B] [--rounds N]

Swin-T (224 x 224, 100 classes) is built in four variants with the same weights and batch: plain window
attention, relaxed self-attention (γ = 0.1, eq. 3), fuzzy relaxation (γ ~ N(0.1, 0.03²) drawn per forward
call) and smooth focus (the explicit weight path; no target), plus a second copy of the plain model: its
ratio shows how far the machine's noise alone moves a ratio. The variants run interleaved, the order
rotated every round so none is always first (a shared, loaded machine favours no position); the fastest
round of each counts (tests/bench/timing.py). Training = forward + backward + Adam step;
inference = eval mode with matched inference (relaxation at test time, the fused path).
Target: relaxed and fuzzy training step <= 1.03x the plain model; on CUDA the same goal at batch 32 (the
default batch there).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from timing import device_options, fastest, model_steps, pick_batch_size, print_ratios

from espnet_ext.nets.swin.classifier import SwinClassifier

# Run as a script, Python puts only tests/bench on the path: tests.* needs the repo root too.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.nets.swin.small_swin import SMALL_SWIN  # noqa: E402

VARIANTS = {
    "plain window attention": {},
    "relaxed self-attention γ=0.1": {"gamma": 0.1, "matched_inference": True},
    "fuzzy relaxation γ0=0.1 σ=0.03": {"gamma": 0.1, "fuzzy_std": 0.03, "matched_inference": True},
    "smooth focus": {"smooth_focus": True},
    "plain again (noise control)": {},
}
TARGETS = {  # (training step, inference) ratio to the plain model; inference has no target
    "relaxed self-attention γ=0.1": (1.03, None),
    "fuzzy relaxation γ0=0.1 σ=0.03": (1.03, None),
}
CUDA_BATCH = 32


class Logits(torch.nn.Module):
    def __init__(self, model: SwinClassifier):
        super().__init__()
        self.model = model

    def forward(self, images):
        return self.model.classify(images)


def build(options: dict, config: dict) -> Logits:
    torch.manual_seed(0)  # the same weights for every variant: relaxation adds no parameters
    return Logits(SwinClassifier(num_classes=100, **config, **options))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small Swin on 32x32 (smoke run)")
    device_options(parser, CUDA_BATCH, 4)
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args()
    config, size, cpu_batch, rounds = (SMALL_SWIN, 32, 4, 2) if args.quick else ({}, 224, 4, 10)
    rounds = args.rounds or rounds
    batch_size = pick_batch_size(args, CUDA_BATCH, cpu_batch)
    torch.manual_seed(1)
    batch = (torch.rand(batch_size, size, size, 3, device=args.device),)
    models = {name: build(opts, config).to(args.device) for name, opts in VARIANTS.items()}
    train = fastest(model_steps(models, batch, train=True), rounds, args.device)
    infer = fastest(model_steps(models, batch, train=False), rounds, args.device)

    base = "plain window attention"
    print(
        f"Swin {'small 32x32' if args.quick else 'T 224x224'}, batch {batch_size}, {args.device}, "
        f"{torch.get_num_threads()} threads, best of {rounds} interleaved rounds"
    )
    failed = print_ratios(train, infer, base, TARGETS)
    return 1 if failed and not args.quick else 0


if __name__ == "__main__":
    raise SystemExit(main())
