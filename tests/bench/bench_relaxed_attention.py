#!/usr/bin/env python
"""Cost of relaxed attention and smooth focus, side by side in one process.

    python tests/bench/bench_relaxed_attention.py [--quick] [--device cpu|cuda] [--batch_size B]

One ESPnet ASR model (CNN preprocessing + Transformer encoder-decoder) is built in four variants that share
the same weights and batch: plain ESPnet attention, relaxed encoder self-attention (γ=0.01, attention
dropout on, so the explicit weight path), relaxed cross attention (γ=0.25) and smooth focus in the cross
attention. Each measurement interleaves the variants round-robin, so machine load hits all of them alike,
and reports the fastest of the rounds (the least disturbed; tests/bench/timing.py). Training = forward +
backward + Adam step;
inference = encoder + teacher-forced decoder in eval mode with matched inference (the fused SDPA path).
Targets: relaxed self-attention training step <= 1.03x the plain model, fused inference <= 1.01x; on CUDA
the GPU goals, at batch 8 x 1000 frames: training step and matched inference <= 1.03x each.
"""

from __future__ import annotations

import argparse

import torch
from timing import device_options, fastest, is_cuda, model_steps, pick_batch_size, print_ratios

from espnet_ext.nets.relaxed_transformer import (
    RelaxedCNNTransformerEncoder,
    RelaxedTransformerDecoder,
)

VARIANTS = {
    "plain (ESPnet attention)": ({}, {}),
    "relaxed self-attention γ=0.01": (
        {"self_attn": {"gamma": 0.01, "matched_inference": True}},
        {},
    ),
    "relaxed cross attention γ=0.25": (
        {},
        {"src_attn": {"gamma": 0.25, "matched_inference": True}},
    ),
    "smooth focus (cross attention)": ({}, {"src_attn": {"smooth_focus": True}}),
}
TARGETS = {"relaxed self-attention γ=0.01": (1.03, 1.01)}
GPU_GOALS = {"relaxed self-attention γ=0.01": (1.03, 1.03)}
CUDA_BATCH = 8


class Seq2Seq(torch.nn.Module):
    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def forward(self, feats, feat_lengths, tokens, token_lengths):
        memory, memory_lengths, _ = self.encoder(feats, feat_lengths)
        logits, _ = self.decoder(memory, memory_lengths, tokens, token_lengths)
        return logits


def build(encoder_sites, decoder_sites, size, blocks, vocab):
    torch.manual_seed(0)  # the same weights for every variant: relaxation adds no parameters
    common = dict(attention_heads=4, linear_units=4 * size, use_flash_attn=False)
    encoder = RelaxedCNNTransformerEncoder(
        80,
        output_size=size,
        num_blocks=blocks,
        attention_dropout_rate=0.2,
        dropout_rate=0.2,
        attention_sites=encoder_sites,
        **common,
    )
    decoder = RelaxedTransformerDecoder(
        vocab,
        size,
        num_blocks=blocks // 2,
        src_attention_dropout_rate=0.2,
        self_attention_dropout_rate=0.2,
        attention_sites=decoder_sites,
        **common,
    )
    return Seq2Seq(encoder, decoder)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--quick", action="store_true", help="small model and batch (smoke run)")
    device_options(parser, CUDA_BATCH, 8)
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args()
    size, blocks, cpu_batch, frames, rounds = (
        (64, 2, 2, 200, 2) if args.quick else (256, 12, 8, 1000, 8)
    )
    rounds = args.rounds or rounds
    batch_size = pick_batch_size(args, CUDA_BATCH, cpu_batch)
    vocab = 500
    torch.manual_seed(1)
    feats = torch.randn(batch_size, frames, 80, device=args.device)
    feat_lengths = (
        torch.linspace(frames // 2, frames, batch_size).long().to(args.device)
    )  # padded batch
    tokens = torch.randint(1, vocab - 1, (batch_size, frames // 20), device=args.device)
    token_lengths = torch.full((batch_size,), frames // 20, device=args.device)
    batch = (feats, feat_lengths, tokens, token_lengths)
    models = {
        name: build(*sites, size, blocks, vocab).to(args.device) for name, sites in VARIANTS.items()
    }
    train = fastest(model_steps(models, batch, train=True), rounds, args.device)
    infer = fastest(model_steps(models, batch, train=False), rounds, args.device)

    base = "plain (ESPnet attention)"
    print(
        f"model d={size}, {blocks} encoder + {blocks // 2} decoder blocks, batch {batch_size} x {frames} frames, "
        f"{args.device}, best of {rounds} interleaved rounds"
    )
    failed = print_ratios(train, infer, base, GPU_GOALS if is_cuda(args.device) else TARGETS)
    return 1 if failed and not args.quick else 0


if __name__ == "__main__":
    raise SystemExit(main())
