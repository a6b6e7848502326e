#!/usr/bin/env python
"""Cost of head selection against the shared Transformer, side by side in one process.

    python tests/bench/bench_head_selection.py [--quick] [--rounds N] [--device cpu|cuda] [--batch_size B]

Two encoders of the paper's MT sizes (d 512, FFN 1024, H = 4 heads, 6 layers, on the inputs directly, dropout
0.1): ESPnet's TransformerEncoder (shared heads) and HeadSelectionTransformerEncoder with H' = 8 candidates
(group strategy; the same result holds for subset, which computes the same number of heads), 8 tasks. Measured
on one batch (B = 8 utterances of T = 256 frames; on CUDA B = 32, the GPU goals' batch; --batch_size B):

  train, one task     forward + backward, every utterance of task 3, one id for the batch: what our tasks'
                      collate gives a batch of one task (``tasks.task_conditioned.OneTaskBatches``)
  train, one task, per-row ids
                      the same with the id repeated per utterance (under ESPnet's DataParallel, which
                      keeps the ids per row)
  train, mixed tasks  the same with tasks 0..7 (utterance i has task i mod 8): the authors' setting (fairseq
                      examples/attention_head_selection, speech_to_text_head_selection.py ``train_step``
                      gives every sample its language's id)
  inference           forward without gradients, eval mode, every utterance of task 3 with its own id (ESPnet's
                      validation of a batch of several tasks; selection fixed)
  inference, one id   the same with one id for the batch (decoding: ESPnet's decoders give the encoder and
                      the beam's hypotheses one utterance's id, shape (1,); the authors' ``inference_step``
                      takes the batch's first id; validation of a one-task batch)

The variants are interleaved round-robin and the fastest round is kept (tests/bench/timing.py); a
head-selection step includes giving the layers the batch's task ids, as the model's forward does.
Goals (issue): train one task <= 1.10x the shared model, inference <= 1.02x (both inference settings); the
mixed batch is reported. On CUDA the GPU goals: train one task <= 1.10x, inference <= 1.05x, mixed tasks
<= 1.5x.
"""

from __future__ import annotations

import argparse

import torch
from espnet2.asr.encoder.transformer_encoder import TransformerEncoder
from timing import device_options, fastest, is_cuda, pick_batch_size

from espnet_ext.attention.head_selection import set_task_id
from espnet_ext.nets.head_selection_transformer import HeadSelectionTransformerEncoder

GOALS = {"train, one task": 1.10, "inference": 1.02, "inference, one id": 1.02}
GPU_GOALS = {
    "train, one task": 1.10,
    "train, mixed tasks": 1.5,
    "inference": 1.05,
    "inference, one id": 1.05,
}
CUDA_BATCH = 32


def encoders(size: int, ffn: int, layers: int, device):
    conf = dict(
        output_size=size,
        attention_heads=4,
        linear_units=ffn,
        num_blocks=layers,
        input_layer=None,
        dropout_rate=0.1,
        attention_dropout_rate=0.1,
        use_flash_attn=False,
    )
    torch.manual_seed(0)
    shared = TransformerEncoder(size, **conf).to(device)
    torch.manual_seed(0)
    selecting = HeadSelectionTransformerEncoder(
        size, num_tasks=8, head_candidates=8, selection_strategy="group", **conf
    ).to(device)
    return shared, selecting


def train_step(model, xs, lengths):
    model.train()
    out, _, _ = model(xs, lengths)
    out.sum().backward()
    model.zero_grad(set_to_none=True)


def inference_step(model, xs, lengths):
    model.eval()
    with torch.no_grad():
        model(xs, lengths)


def measure(args) -> dict[str, tuple[float, float]]:
    """{setting: (shared seconds, head-selection seconds)}, the fastest of ``rounds`` rounds each."""
    device = torch.device(args.device)
    shared, selecting = encoders(args.size, args.ffn, args.layers, device)
    xs = torch.randn(args.batch, args.frames, args.size, device=device)
    lengths = torch.full((args.batch,), args.frames, device=device)
    one_task = torch.full((args.batch,), 3, device=device)
    mixed = torch.arange(args.batch, device=device) % 8
    settings = {
        "train, one task": (train_step, one_task[:1]),
        "train, one task, per-row ids": (train_step, one_task),
        "train, mixed tasks": (train_step, mixed),
        "inference": (inference_step, one_task),
        "inference, one id": (inference_step, one_task[:1]),
    }

    def selecting_step(step, tasks):
        set_task_id(selecting, tasks)
        step(selecting, xs, lengths)

    steps = {}
    for name, (step, tasks) in settings.items():
        steps[name, "shared"] = lambda s=step: s(shared, xs, lengths)
        steps[name, "selecting"] = lambda s=step, t=tasks: selecting_step(s, t)
    best = fastest(steps, args.rounds, device)
    return {name: (best[name, "shared"], best[name, "selecting"]) for name in settings}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--rounds", type=int, default=10)
    device_options(parser, CUDA_BATCH, 8)
    args = parser.parse_args(argv)
    args.size, args.ffn, args.layers, args.frames = (
        (64, 128, 2, 32) if args.quick else (512, 1024, 6, 256)
    )
    args.batch = pick_batch_size(args, CUDA_BATCH, 8)
    goals = GPU_GOALS if is_cuda(args.device) else GOALS
    torch.set_num_threads(max(1, torch.get_num_threads()))
    results = measure(args)
    print(
        f"head selection (H'=8, H=4, group) vs shared 4-head encoder: d {args.size}, "
        f"{args.layers} layers, B {args.batch} x T {args.frames}, {args.device}, "
        f"{torch.get_num_threads()} threads, best of {args.rounds} rounds"
    )
    print("| setting | shared [ms] | head selection [ms] | ratio | goal | met |")
    print("|---|---|---|---|---|---|")
    for name, (shared, selecting) in results.items():
        ratio = selecting / shared
        goal, met = "reported", ""
        if name in goals:
            goal, met = f"<= {goals[name]:.2f}x", "yes" if ratio <= goals[name] else "NO"
        print(
            f"| {name} | {shared * 1e3:.1f} | {selecting * 1e3:.1f} | {ratio:.3f}x | {goal} | {met} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
