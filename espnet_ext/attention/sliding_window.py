"""Sliding-window attention (Longformer's local pattern) with a memory-lean, hand-written backward.

Query i sees the keys j with |i - j| ≤ w/2. Queries are cut into blocks of b = w/2; block n scores the 3b keys
of blocks n-1, n, n+1 (zeros beyond the ends) and the band mask keeps the visible ones:

    S = Q Kᵀ / √d_k (+ band and key mask),   P = exp(S - lse),   O = (P ∘ M / (1 - p)) V

with lse the row log-sum-exp and M the dropout mask (keep-probability 1 - p). Autograd of these products
would keep S's softmax output, the dropped weights and the window copies of K and V for every layer, O(T·w)
per head. Here backward recomputes P chunk by chunk from the saved lse (as flash attention does, Dao et al.
2022):

    dV = P̃ᵀ dO,   dP = (dO Vᵀ) ∘ M / (1 - p),   dS = P ∘ (dP - rowsum(P ∘ dP)),
    dQ = dS K / √d_k,   dK = dSᵀ Q / √d_k                                   (P̃ = P ∘ M / (1 - p))

so a layer keeps Q, K, V (its projections hold them anyway), lse (B, h, T) and the dropout mask (one byte per
weight) and both passes hold at most ``CHUNK_SCORES`` scores at a time. A query with no visible key (a
padded query far from its utterance) gets zero weights, ESPnet's convention for a fully masked row.

The same blocks serve the block form of a Local head (lucidrains' ``LocalAttention`` with
``look_backward=1, look_forward=1``, which the thesis' code uses): blocks of ``size`` queries, each seeing
every key of its block and the two neighbours (3·size keys, no band), ``block_window_attention``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

# Scores computed at once: bounds the transient memory of both passes (4 MiB in float32).
CHUNK_SCORES = 1 << 20


def _blocks(x: torch.Tensor, size: int) -> torch.Tensor:
    """(B, h, T, d) with T a multiple of ``size`` -> (B, h, T/size, size, d), a view."""
    return x.reshape(*x.shape[:2], x.size(2) // size, size, x.size(3))


def _windows(x: torch.Tensor, size: int) -> torch.Tensor:
    """(..., T, d) with T = nb·b -> (..., nb, d, 3b): block n's keys n-1, n, n+1 (zeros beyond the ends),
    a strided view of one padded copy."""
    return F.pad(x, (0, 0, size, size)).unfold(-2, 3 * size, size)


class _Band:
    """One sliding-window problem cut into blocks of ``size``: padded views shared by forward and backward.
    ``half`` is the band (|i - j| <= half); None: every key of the three blocks (the block form)."""

    def __init__(self, q, k, v, keep: torch.Tensor, half: int | None, size: int):
        self.size = size
        self.length = q.size(2)
        self.blocks = -(-self.length // size)
        self.extra = self.blocks * size - self.length
        self.q = self.blocked(q)  # (B, h, nb, b, d)
        self.k = _windows(self.padded(k), size)  # (B, h, nb, d, 3b)
        self.v = _windows(self.padded(v), size)
        key_keep = _windows(F.pad(keep, (0, self.extra))[:, None, :, None], size)[:, :, :, 0]
        # Query s of block n sits at n·b + s, key t of its window at (n-1)·b + t: offset t - s - b.
        offsets = (
            torch.arange(3 * size, device=q.device) - torch.arange(size, device=q.device)[:, None]
        )
        self.allowed = key_keep[:, :, :, None, :].expand(-1, -1, -1, size, -1)  # (B, 1, nb, b, 3b)
        if half is not None:  # keys beyond the ends are masked keys
            self.allowed = self.allowed & ((offsets - size).abs() <= half)
        self.scale = 1.0 / math.sqrt(q.size(-1))

    def padded(self, x: torch.Tensor) -> torch.Tensor:
        return F.pad(x, (0, 0, 0, self.extra)) if self.extra else x

    def blocked(self, x: torch.Tensor) -> torch.Tensor:
        return _blocks(self.padded(x), self.size)

    def chunks(self):
        """Slices of blocks holding at most CHUNK_SCORES scores each (at least one block)."""
        batch, heads = self.q.shape[:2]
        per_block = batch * heads * self.size * 3 * self.size
        step = max(1, CHUNK_SCORES // per_block)
        if self.blocks <= step:  # one chunk: under torch.compile a guard, not a graph per length
            return [slice(0, self.blocks)]
        return [slice(n, min(n + step, self.blocks)) for n in range(0, self.blocks, step)]

    def weights(self, part: slice, lse: torch.Tensor | None = None):
        """P (B, h, n, b, 3b) of the blocks ``part`` and their lse (computed when not given)."""
        scores = self.q[:, :, part] @ self.k[:, :, part]
        scores.mul_(self.scale)
        hidden = ~self.allowed[:, :, part]
        scores.masked_fill_(hidden, float("-inf"))
        if lse is None:
            lse = torch.logsumexp(scores, dim=-1)
        # exp(-inf - lse) = 0 for hidden keys; a row without visible keys has lse = -inf (NaN): zero it
        weights = torch.exp(scores - lse[..., None]).to(scores.dtype)
        return weights.masked_fill_(hidden, 0.0), lse


def _add_windows(total: torch.Tensor, windows: torch.Tensor, part: slice) -> None:
    """Scatter-add per-window key gradients (B, h, n, 3b, d) into padded key blocks (B, h, nb+2, b, d):
    window n covers padded blocks n, n+1, n+2."""
    split = windows.reshape(*windows.shape[:3], 3, total.size(3), total.size(4))
    for j in range(3):
        total[:, :, part.start + j : part.stop + j] += split[:, :, :, j]


class SlidingWindowAttention(torch.autograd.Function):
    """``apply(q, k, v, keep, half, drop, size)``: q, k (B, h, T, d_k), v (B, h, T, d_v); ``keep`` (B, T)
    bool key mask; ``half`` = w/2 keys each side (None: the whole three blocks); ``drop`` the dropout
    probability on the weights; ``size`` the block size."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda")
    def forward(ctx, q, k, v, keep, half: int | None, drop: float, size: int):
        band = _Band(q, k, v, keep, half, size)
        out = band.q.new_empty((*band.q.shape[:-1], v.size(-1)))
        # at least float32, also for half-precision inputs (autocast)
        lse = q.new_empty(band.q.shape[:-1], dtype=torch.promote_types(q.dtype, torch.float32))
        mask_shape = (*q.shape[:2], *band.allowed.shape[2:]) if drop > 0 else (0,)
        mask = torch.empty(mask_shape, dtype=torch.bool, device=q.device)  # dropout's keep mask
        for part in band.chunks():
            weights, lse[:, :, part] = band.weights(part)
            if drop > 0:
                mask[:, :, part] = torch.rand_like(weights) >= drop
                weights = weights * mask[:, :, part] * (1.0 / (1.0 - drop))
            out[:, :, part] = weights @ band.v[:, :, part].transpose(-2, -1)
        ctx.save_for_backward(q, k, v, keep, lse, mask)
        ctx.half, ctx.drop, ctx.size = half, drop, size
        return out.reshape(*q.shape[:2], band.blocks * band.size, v.size(-1))[:, :, : band.length]

    @staticmethod
    @once_differentiable
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad_out):
        q, k, v, keep, lse, mask = ctx.saved_tensors
        band = _Band(q, k, v, keep, ctx.half, ctx.size)
        grad = band.blocked(grad_out)
        grad_q = torch.empty_like(band.q)
        key_blocks = (*band.q.shape[:2], band.blocks + 2, band.size)
        grad_k, grad_v = (
            q.new_zeros((*key_blocks, k.size(-1))),
            q.new_zeros((*key_blocks, v.size(-1))),
        )
        for part in band.chunks():
            weights, _ = band.weights(part, lse[:, :, part])
            dropped, grad_weights = weights, grad[:, :, part] @ band.v[:, :, part]
            if ctx.drop > 0:
                # in the weights' dtype, as the forward scaled them (a float32 factor would promote
                # half-precision gradients, which only CUDA's autocast in the backward casts back)
                keep_scaled = mask[:, :, part].to(weights.dtype) * (1.0 / (1.0 - ctx.drop))
                dropped, grad_weights = weights * keep_scaled, grad_weights * keep_scaled
            _add_windows(grad_v, dropped.transpose(-2, -1) @ grad[:, :, part], part)
            row = (weights * grad_weights).sum(-1, keepdim=True)
            grad_scores = weights * (grad_weights - row) * band.scale
            grad_q[:, :, part] = grad_scores @ band.k[:, :, part].transpose(-2, -1)
            _add_windows(grad_k, grad_scores.transpose(-2, -1) @ band.q[:, :, part], part)
        size, length = band.size, band.length
        grad_q = grad_q.reshape(*q.shape[:2], -1, q.size(-1))[:, :, :length]
        grad_k, grad_v = (
            g.reshape(*q.shape[:2], -1, g.size(-1))[:, :, size : size + length]
            for g in (grad_k, grad_v)
        )
        return grad_q, grad_k, grad_v, None, None, None, None


def sliding_window_attention(q, k, v, keep: torch.Tensor, half: int, drop: float = 0.0):
    """Context (B, h, T, d_k) of the undilated sliding window, w/2 = ``half`` keys each side."""
    return SlidingWindowAttention.apply(q, k, v, keep, half, float(drop), max(half, 1))


def block_window_attention(q, k, v, keep: torch.Tensor, size: int, drop: float = 0.0):
    """Context (B, h, T, d_k) of the block form: query i sees every real key j whose block
    (⌊j/size⌋) is ⌊i/size⌋ - 1, ⌊i/size⌋ or ⌊i/size⌋ + 1, i.e. 3·size keys at offsets that depend on
    i's place in its block (from -size - i mod size to 2·size - 1 - i mod size)."""
    if size <= 0:
        raise ValueError(f"block size must be > 0, got {size}")
    return SlidingWindowAttention.apply(q, k, v, keep, None, float(drop), size)
