#!/usr/bin/env python
"""Cost of the Multiformer head kinds against sequence length, side by side in one process.

    python tests/bench/bench_multiformer.py [--quick] [--device cpu|cuda] [--batch_size B]
        [--attention_dropout P] [--flex] [--out_dir DIR]

For T = 512, 768, 1024, 2048, 4096 frames, one encoder (s2t_transformer_s layer sizes: d 256, FFN 2048, 4 heads,
dropout 0.1, training mode; 2 layers on the frames directly, no front end) per head kind -- 4 x Full,
4 x Local(64), 4 x Conv(5, 2), 4 x Fast -- runs forward + backward on a batch of B utterances (B = 1 on
CPU; on CUDA B = 16, the GPU goals' batch: at batch 1 a GPU measures kernel launches; --batch_size B).
Time: the variants are interleaved round-robin and the fastest round is kept (tests/bench/timing.py). Peak memory: every
tensor the step allocates (activations, saved tensors, gradients; parameters excluded), tracked through
PyTorch's dispatcher on CPU and by the CUDA allocator's counters on CUDA (allocated bytes, not its cache).
Also a single 4 x Full MHMA layer against ESPnet's MultiHeadedAttention (the same weights) at T = 1024.
The Local(64) column is the O(T·w) blocked path at every T (the algorithm whose growth is fitted);
utterances of at most ``head_kinds.LOCAL_DENSE_MAX_FRAMES`` frames take a band mask over one fused dense
attention on CUDA instead, measured beside it at those T and the first T past them on any device (the dense
threshold is checked from both sides: dense no slower up to it, slower past it). Beside the blocked path, at
every T, the chunked one (``head_kinds.chunked_local_attention``: the band in chunks of ``LOCAL_CHUNK_FRAMES``
queries through one fused call), which Local heads take past the dense threshold on the devices in
``LOCAL_CHUNK_DEVICES`` (CUDA); the Local goals and the dense threshold are
judged on the path the device takes there (chunked on CUDA, blocked on the CPU).
--attention_dropout (default 0.1, the real configs'); --flex: Local heads past the dense threshold through
FlexAttention on CUDA (``head_kinds.FLEX_ON_CUDA``; it has no dropout on the weights: with --attention_dropout 0).

Goals: at T=4096 Local >= 8x less peak memory and >= 4x faster than Full; Conv(5,2) >= 3x faster than
Full at T=2048; Fast and Local grow linearly (time and memory ~ T^k, k <= 1.2 fitted over all T: 1 is
linear, 2 quadratic; Full's k is printed for reference); the Full MHMA layer <= 1.05x ESPnet's attention
(one layer, T = 1024, 4x the rounds). On CUDA the GPU goals replace the speed-ups: Local >= 4x faster and
>= 8x less memory at T=4096, Conv(5,2) >= 2x faster at T=2048, Fast >= 3x faster at T=4096.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from espnet.nets.pytorch_backend.transformer.attention import MultiHeadedAttention
from timing import device_options, fastest, is_cuda, pick_batch_size
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from espnet_ext.attention import head_kinds
from espnet_ext.attention.multi_attention import MultiHeadMultiAttention
from espnet_ext.nets.multiformer_encoder import MultiformerEncoder

CUDA_BATCH = 16
KINDS = {
    "Full": "4 x Full",
    "Local(64)": "4 x Local(64)",
    "Conv(5,2)": "4 x Conv(5, 2)",
    "Fast": "4 x Fast",
}


class PeakMemory(TorchDispatchMode):
    """Peak bytes of the tensors allocated while active (storages counted once, until freed)."""

    def __init__(self):
        super().__init__()
        self.live: dict[int, tuple[StorageWeakRef, int]] = {}
        self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_flatten(out)[0]:
            if isinstance(tensor, torch.Tensor):
                storage = tensor.untyped_storage()
                ref = StorageWeakRef(storage)
                self.live.setdefault(ref.cdata, (ref, storage.nbytes()))
        self.live = {k: v for k, v in self.live.items() if not v[0].expired()}
        self.peak = max(self.peak, sum(n for _, n in self.live.values()))
        return out


def build(
    heads: str,
    size: int,
    ffn: int,
    layers: int,
    window: int,
    device,
    attention_dropout: float = 0.1,
) -> MultiformerEncoder:
    torch.manual_seed(0)
    return MultiformerEncoder(
        size,
        layers=[f"{layers} x ({heads.replace('Local(64)', f'Local({window})')})"],
        output_size=size,
        attention_heads=4,
        linear_units=ffn,
        input_layer=None,
        dropout_rate=0.1,
        attention_dropout_rate=attention_dropout,
        use_flash_attn=False,
    ).to(device)


class LocalPath(torch.nn.Module):
    """Runs ``model`` with Local heads dense up to ``max_frames`` frames on any device (0: the blocked
    path always) and, with ``chunk``, past them in chunks of ``chunk`` queries (the chunked path)."""

    def __init__(self, model: torch.nn.Module, max_frames: int, chunk: int | None = None):
        super().__init__()
        self.model, self.max_frames, self.chunk = model, max_frames, chunk

    def forward(self, *args, **kwargs):
        chunked = {"cpu", "cuda"} if self.chunk else set()
        settings = {
            "LOCAL_DENSE_MAX_FRAMES": self.max_frames,
            "LOCAL_DENSE_DEVICES": {"cpu", "cuda"},
            "LOCAL_CHUNK_DEVICES": chunked,
            "LOCAL_CHUNK_FRAMES": self.chunk or head_kinds.LOCAL_CHUNK_FRAMES,
        }
        saved = {name: getattr(head_kinds, name) for name in settings}
        for name, value in settings.items():
            setattr(head_kinds, name, value)
        try:
            return self.model(*args, **kwargs)
        finally:
            for name, value in saved.items():
                setattr(head_kinds, name, value)


class NoAttention(torch.nn.Module):
    """Stands in for self-attention (returns its input) to measure what the rest of the encoder costs."""

    def forward(self, query, key, value, mask, expand_kv=False):
        return query


class ProjectionsOnly(torch.nn.Module):
    """Stands in for self-attention with its Q, K, V and output projections only: what any attention kind
    keeps for its backward beyond the weights (q, k, v and the context the output projection reads), with
    the heads' mixing reduced to ``(q · k) v`` per frame. The encoder with it bounds what a cheaper
    attention can save: only the weights' share of Full's cost is left to win."""

    def __init__(self, attention: MultiHeadedAttention):
        super().__init__()
        self.attention = attention

    def forward(self, query, key, value, mask, expand_kv=False):
        q, k, v = self.attention.forward_qkv(query, key, value)  # (B, h, T, d_k)
        context = (q * k).sum(-1, keepdim=True) * v
        batch, heads, length, d_k = context.shape
        return self.attention.linear_out(
            context.transpose(1, 2).reshape(batch, length, heads * d_k)
        )


def without_attention(model: MultiformerEncoder, projections: bool = False) -> MultiformerEncoder:
    """``model`` with self-attention replaced by ``NoAttention`` (the floor) or, with ``projections``,
    by ``ProjectionsOnly`` (the floor plus the projections every attention kind pays)."""
    for layer in model.encoders:
        layer.self_attn = ProjectionsOnly(layer.self_attn) if projections else NoAttention()
    return model


def step(model, xs, lengths):
    out, _, _ = model(xs, lengths)
    out.sum().backward()
    model.zero_grad(set_to_none=True)


def measure(models: dict, batch: int, length: int, size: int, rounds: int, device):
    xs = torch.randn(batch, length, size, device=device)
    lengths = torch.full((batch,), length, device=device)
    best = fastest(
        {name: lambda m=m: step(m, xs, lengths) for name, m in models.items()}, rounds, device
    )
    return best, {name: step_peak_bytes(model, xs, lengths) for name, model in models.items()}


def step_peak_bytes(model, xs, lengths) -> int:
    """Peak bytes a step allocates beyond what is allocated before it. On CUDA from the allocator's counters:
    FlexAttention is a higher-order operator, which a dispatch mode does not see through."""
    if xs.device.type == "cuda":
        torch.cuda.synchronize(xs.device)
        before = torch.cuda.memory_allocated(xs.device)
        torch.cuda.reset_peak_memory_stats(xs.device)
        step(model, xs, lengths)
        return torch.cuda.max_memory_allocated(xs.device) - before
    with PeakMemory() as memory:
        step(model, xs, lengths)
    return memory.peak


def layer_against_espnet(
    size: int, batch: int, length: int, rounds: int, device
) -> tuple[float, float]:
    torch.manual_seed(0)
    espnet = MultiHeadedAttention(4, size, 0.1).to(device).train()
    mhma = MultiHeadMultiAttention.from_attention(MultiHeadedAttention(4, size, 0.1), ["4 x Full"])
    mhma.load_state_dict(espnet.state_dict())
    mhma.to(device).train()
    x = torch.randn(batch, length, size, device=device, requires_grad=True)

    def run(module):
        module(x, x, x, None).sum().backward()

    best = fastest({"espnet": lambda: run(espnet), "mhma": lambda: run(mhma)}, rounds, device)
    return best["espnet"], best["mhma"]


def plot(lengths, times, peaks, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for name in KINDS:
        axes[0].plot(lengths, [times[t][name] * 1e3 for t in lengths], marker="o", label=name)
        axes[1].plot(lengths, [peaks[t][name] / 2**20 for t in lengths], marker="o", label=name)
    for ax, label in zip(axes, ("forward + backward (ms)", "peak tensor memory (MiB)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("T (frames)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle("Multiformer encoder (2 layers, d 256, 4 heads) by head kind")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def goals(
    lengths,
    times,
    peaks,
    layer_ratio,
    gpu: bool = False,
    local: str = "Local(64)",
    threshold: int | None = None,
) -> list[tuple[str, str, bool]]:
    """(goal, measured, met) rows; ``gpu``: the GPU goals' speed-ups (Conv >= 2x, Fast >= 3x); ``local``:
    the column of the path Local heads take at the longest T on the device (the blocked one by default,
    ``Local(64) chunked`` on the devices in ``head_kinds.LOCAL_CHUNK_DEVICES``); ``threshold``: the dense
    band's (default ``head_kinds.LOCAL_DENSE_MAX_FRAMES``), judged from both sides where the dense column
    has a T past it."""
    threshold = head_kinds.LOCAL_DENSE_MAX_FRAMES if threshold is None else threshold
    big = lengths[-1]
    path = "chunked" if local.endswith("chunked") else "blocked"
    conv_t = 2048 if 2048 in lengths else lengths[-2]
    conv_goal = 2 if gpu else 3
    ratios = [
        (
            f"Local memory saving at T={big}, {path} path (>= 8x)",
            peaks[big]["Full"] / peaks[big][local],
            8,
        ),
        (
            f"Local speed-up at T={big}, {path} path (>= 4x)",
            times[big]["Full"] / times[big][local],
            4,
        ),
        (
            f"Conv(5,2) speed-up at T={conv_t} (>= {conv_goal}x)",
            times[conv_t]["Full"] / times[conv_t]["Conv(5,2)"],
            conv_goal,
        ),
    ]
    if gpu:
        ratios.append(
            (f"Fast speed-up at T={big} (>= 3x)", times[big]["Full"] / times[big]["Fast"], 3)
        )
    checked = [(name, f"{value:.2f}x", value >= target) for name, value, target in ratios]
    for kind in ("Fast", *dict.fromkeys(("Local(64)", local)), "Full"):
        for what, table in (("time", times), ("memory", peaks)):
            k = growth_exponent(lengths, [table[t][kind] for t in lengths])
            name = f"{kind} {what} ~ T^k over T={lengths[0]}..{big}"
            if kind == "Full":
                checked.append((f"{name} (reference)", f"k = {k:.2f}", True))
            else:
                checked.append((f"{name} (linear: k <= 1.2)", f"k = {k:.2f}", k <= 1.2))
    dense = [t for t in lengths if "Local(64) dense" in times[t]]
    short, past = [t for t in dense if t <= threshold], [t for t in dense if t > threshold]
    if short:
        worst = max(times[t]["Local(64) dense"] / times[t][local] for t in short)
        checked.append(
            (
                f"Local(64) dense / {path} up to T={short[-1]} (<= 1.0x: the dense threshold)",
                f"{worst:.2f}x",
                worst <= 1.0,
            )
        )
    # the first T past the threshold: the other path must win there, or the threshold is too low
    if past:
        ratio = times[past[0]][local] / times[past[0]]["Local(64) dense"]
        checked.append(
            (
                f"{local} / dense at T={past[0]} (<= 1.0x: no higher dense threshold)",
                f"{ratio:.2f}x",
                ratio <= 1.0,
            )
        )
    checked.append(
        (
            "Full MHMA layer / ESPnet attention (<= 1.05x)",
            f"{layer_ratio:.3f}x",
            layer_ratio <= 1.05,
        )
    )
    return checked


def growth_exponent(lengths, values) -> float:
    """Least-squares k of values ~ c·T^k (1 = linear, 2 = quadratic), on log-log axes."""
    x = torch.log(torch.tensor(lengths, dtype=torch.float64))
    y = torch.log(torch.tensor(values, dtype=torch.float64))
    x = x - x.mean()
    return float((x * (y - y.mean())).sum() / (x * x).sum())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke run)")
    device_options(parser, CUDA_BATCH, 1)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--attention_dropout", type=float, default=0.1)
    parser.add_argument(
        "--flex", action="store_true", help="long Local heads through FlexAttention"
    )
    parser.add_argument("--out_dir", type=Path, default=None, help="where the PNG goes")
    args = parser.parse_args()
    device = torch.device(args.device)
    head_kinds.FLEX_ON_CUDA = args.flex
    if args.quick:
        lengths, size, ffn, layers, window, rounds = [64, 128, 256], 32, 64, 1, 8, 1
    else:
        # 768: between the dense band (faster at 512 on an H100 and an H200) and its chunks (faster at 1024)
        lengths = [512, 768, 1024, 2048, 4096]
        size, ffn, layers, window, rounds = 256, 2048, 2, 64, 3
    rounds = args.rounds or rounds
    batch = pick_batch_size(args, CUDA_BATCH, 1)
    models = {
        name: build(heads, size, ffn, layers, window, device, args.attention_dropout).train()
        for name, heads in KINDS.items()
    }
    local = models["Local(64)"]
    models["Local(64)"] = LocalPath(local, 0)
    # the dense band up to its threshold and at the first T past it (where the other path must win)
    past = [t for t in lengths if t > head_kinds.LOCAL_DENSE_MAX_FRAMES]
    dense_up_to = past[0] if past else lengths[-1]
    dense = {"Local(64) dense": LocalPath(local, dense_up_to)}
    chunk = head_kinds.LOCAL_CHUNK_FRAMES
    models["Local(64) chunked"] = LocalPath(local, 0, chunk)
    # other chunk sizes at the longest T only: which one the chunked path should take
    other_chunks = {f"chunks of {c}": LocalPath(local, 0, c) for c in (chunk // 2, 2 * chunk)}
    times, peaks = {}, {}
    for length in lengths:
        measured = models | (dense if length <= dense_up_to else {})
        measured |= other_chunks if length == lengths[-1] else {}
        times[length], peaks[length] = measure(measured, batch, length, size, rounds, device)
    floors = {
        name: without_attention(
            build("4 x Full", size, ffn, layers, window, device, args.attention_dropout),
            projections=name == "projections",
        ).train()
        for name in ("floor", "projections")
    }
    floor_t, floor_peak = measure(floors, batch, lengths[-1], size, rounds, device)
    espnet_t, mhma_t = layer_against_espnet(
        size, batch, 1024 if not args.quick else 128, 4 * rounds, device
    )

    print(
        f"encoder: {layers} layers, d {size}, FFN {ffn}, 4 heads, batch {batch}, training mode, "
        f"attention dropout {args.attention_dropout}{', FlexAttention' if args.flex else ''}, {device}, "
        f"{torch.get_num_threads()} threads, best of {rounds} interleaved rounds"
    )
    print("| T | " + " | ".join(f"{k} ms | {k} MiB" for k in KINDS) + " |")
    print("|---:|" + "---:|---:|" * len(KINDS))
    for t in lengths:
        cells = " | ".join(f"{times[t][k] * 1e3:.1f} | {peaks[t][k] / 2**20:.1f}" for k in KINDS)
        print(f"| {t} | {cells} |")
    short = [t for t in lengths if "Local(64) dense" in times[t]]
    if short:
        print("| T | Local(64) blocked ms | Local(64) dense ms | dense MiB |")
        print("|---:|---:|---:|---:|")
        for t in short:
            print(
                f"| {t} | {times[t]['Local(64)'] * 1e3:.1f} | {times[t]['Local(64) dense'] * 1e3:.1f} "
                f"| {peaks[t]['Local(64) dense'] / 2**20:.1f} |"
            )
    print(f"| T | Local(64) blocked ms | chunked ({chunk}) ms | blocked MiB | chunked MiB |")
    print("|---:|---:|---:|---:|---:|")
    for t in lengths:
        print(
            f"| {t} | {times[t]['Local(64)'] * 1e3:.1f} | {times[t]['Local(64) chunked'] * 1e3:.1f} "
            f"| {peaks[t]['Local(64)'] / 2**20:.1f} | {peaks[t]['Local(64) chunked'] / 2**20:.1f} |"
        )
    print(
        f"Local(64) chunked vs Full at T={lengths[-1]}: "
        f"{times[lengths[-1]]['Full'] / times[lengths[-1]]['Local(64) chunked']:.2f}x time, "
        f"{peaks[lengths[-1]]['Full'] / peaks[lengths[-1]]['Local(64) chunked']:.2f}x memory "
        f"(the path past T={head_kinds.LOCAL_DENSE_MAX_FRAMES} on devices in "
        f"head_kinds.LOCAL_CHUNK_DEVICES: {sorted(head_kinds.LOCAL_CHUNK_DEVICES) or 'none'})"
    )
    sizes = {f"chunks of {chunk}": times[lengths[-1]]["Local(64) chunked"]}
    sizes |= {name: times[lengths[-1]][name] for name in other_chunks}
    print(
        f"Local(64) chunked at T={lengths[-1]}: "
        + ", ".join(
            f"{name} {t * 1e3:.1f} ms" for name, t in sorted(sizes.items(), key=lambda x: x[1])
        )
    )
    print(f"Full MHMA layer {mhma_t * 1e3:.2f} ms, ESPnet attention {espnet_t * 1e3:.2f} ms")
    big = lengths[-1]
    print(
        f"floor: the encoder without attention at T={big}: {floor_t['floor'] * 1e3:.1f} ms, "
        f"{floor_peak['floor'] / 2**20:.1f} MiB (bounds any saving: "
        f"{times[big]['Full'] / floor_t['floor']:.1f}x time, "
        f"{peaks[big]['Full'] / floor_peak['floor']:.1f}x memory)"
    )
    print(
        f"with the attention's projections (q, k, v, context; no weights): "
        f"{floor_t['projections'] * 1e3:.1f} ms, {floor_peak['projections'] / 2**20:.1f} MiB (bounds "
        f"any attention kind: {times[big]['Full'] / floor_t['projections']:.1f}x time, "
        f"{peaks[big]['Full'] / floor_peak['projections']:.1f}x memory)"
    )
    failed = False
    print("| goal | measured | met |")
    print("|---|---:|---|")
    local_path = (
        "Local(64) chunked" if device.type in head_kinds.LOCAL_CHUNK_DEVICES else "Local(64)"
    )
    ratio = mhma_t / espnet_t
    for name, value, ok in goals(lengths, times, peaks, ratio, is_cuda(device), local_path):
        print(f"| {name} | {value} | {'yes' if ok else 'NO'} |")
        failed |= not ok
    if args.out_dir:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        plot(lengths, times, peaks, args.out_dir / "multiformer_bench.png")
        print(f"plot: {args.out_dir / 'multiformer_bench.png'}")
    return 1 if failed and not args.quick else 0


if __name__ == "__main__":
    raise SystemExit(main())
