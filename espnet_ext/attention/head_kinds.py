"""The attention kinds a head of the Multi-Head Multi-Attention can compute (thesis §3.2.1, §4.1).

Every function takes one group of heads' projections ``q`` (B, h, L, d_k), ``k``/``v`` (B, h, T, d_k) and
ESPnet's key mask ``mask`` (B, 1, T), 1 = real frame, and returns the heads' context (B, h, L, d_k).

- **Full**: softmax(q kᵀ / √d_k) v (Vaswani et al.), exactly ESPnet's ``forward_attention``.
- **Local** (Longformer sliding window): query i sees keys j with |i - j| ≤ w/2 (or, dilated by δ, keys
  i + δ·t for |t| ≤ w/2). Computed in blocks of w/2 queries against their block and the two neighbours, so
  time and memory are O(n·w) instead of O(n²).
- **Conv** (Speechformer ConvAttention): keys and values compressed along time by a 1-D convolution
  (kernel κ, stride χ, padding ⌊κ/2⌋), then Full attention of the uncompressed queries over the n/χ
  compressed frames; an utterance of length n keeps ⌈n/χ⌉ compressed frames (odd κ). Speechformer
  convolves the layer input (d_model channels) before the K/V projections, for all heads at once; in the
  MHMA the other heads of the layer need the uncompressed K/V, so each Conv head convolves its own
  projected K and V (d_k channels, 2·(d_k²·κ + d_k) parameters per head). Only the standard convolution
  is offered (the thesis' code also had depth-wise and separable ones; its experiments name none).
- **Fast** (Performer FAVOR+): softmax(q kᵀ) ≈ φ(q) φ(k)ᵀ with positive orthogonal random features
  φ(x) = exp(ωᵀx - ‖x‖²/2) / √m (eq. 22, SM⁺), so Z = φ(q) (φ(k)ᵀ v) / (φ(q) Σ_j φ(k_j)), linear in n.
"""

from __future__ import annotations

import math

import torch

from espnet_ext.errors import ConfigError


def masked_softmax(scores: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """ESPnet's masking: masked keys get weight 0; a query with no visible key gets all zeros.

    ``scores`` must be a fresh tensor (a product's output): it is masked in place, saving one copy of
    the largest tensor of attention; the zeroing pass runs only when some query sees no key.
    """
    if keep is None:
        return torch.softmax(scores, dim=-1)
    masked = ~keep
    weights = torch.softmax(scores.masked_fill_(masked, torch.finfo(scores.dtype).min), dim=-1)
    if bool(masked.all(dim=-1).any()):
        weights = weights.masked_fill(masked, 0.0)
    return weights


def full_attention(q, k, v, mask, dropout=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention -> (context (B, h, L, d_k), weights (B, h, L, T))."""
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    keep = None if mask is None else mask.unsqueeze(1).bool()  # (B, 1, 1|L, T)
    weights = masked_softmax(scores, keep)
    dropped = weights if dropout is None else dropout(weights)
    return torch.matmul(dropped, v), weights


# ---------------------------------------------------------------------------------------- Local


def _blocks(x: torch.Tensor, size: int) -> torch.Tensor:
    """(B, h, T, d) with T a multiple of ``size`` -> (B, h, T/size, size, d)."""
    return x.reshape(*x.shape[:2], x.size(2) // size, size, x.size(3))


def _windows(x: torch.Tensor, size: int) -> torch.Tensor:
    """(..., T, d) with T = nb·b -> (..., nb, d, 3b): block i's keys i-1, i, i+1 (zeros beyond the
    ends), a strided view of one padded copy (no 3x copy; its gradient accumulates in one buffer)."""
    padded = torch.nn.functional.pad(x, (0, 0, size, size))
    return padded.unfold(-2, 3 * size, size)


def _sliding_window(q, k, v, keep, half: int, dropout):
    """Undilated sliding window; ``keep`` (B, T) bool key mask. Returns context (B, h, T, d_k)."""
    length = q.size(2)
    size = max(half, 1)
    blocks = -(-length // size)
    extra = blocks * size - length
    if extra:
        q, k, v = (torch.nn.functional.pad(x, (0, 0, 0, extra)) for x in (q, k, v))
        keep = torch.nn.functional.pad(keep, (0, extra))
    scores = _blocks(q, size) @ _windows(k, size)  # (B, h, nb, b, 3b); _blocks(q) is a view
    scores.mul_(1.0 / math.sqrt(q.size(-1)))  # in place: the product's output is not saved
    key_keep = _windows(keep[:, None, :, None], size)[:, :, :, 0]  # (B, 1, nb, 3b)
    # Query s of block i sits at i·b + s, key t of its window at (i-1)·b + t: offset t - s - b.
    offsets = torch.arange(3 * size, device=q.device) - torch.arange(size, device=q.device)[:, None]
    in_band = (offsets - size).abs() <= half  # (b, 3b); keys beyond the ends are masked keys
    allowed = key_keep[:, :, :, None, :] & in_band  # (B, 1, nb, b, 3b)
    # In place on the fresh scores; a query with no visible key (only padded queries far from the
    # utterance) gets uniform weights over masked keys -- its output is padding, never read.
    scores.masked_fill_(~allowed, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    if dropout is not None:
        weights = dropout(weights)
    context = weights @ _windows(v, size).transpose(-2, -1)  # (B, h, nb, b, d)
    return context.reshape(*q.shape[:2], blocks * size, q.size(-1))[:, :, :length]


def local_attention(q, k, v, mask, window: int, dilation: int = 1, dropout=None) -> torch.Tensor:
    """Sliding window of width ``window`` (w/2 keys each side), optionally dilated; self-attention only."""
    if q.size(2) != k.size(2):
        raise ValueError("local attention is self-attention: queries and keys must have one length")
    batch, _, length, _ = q.shape
    keep = (
        torch.ones(batch, length, dtype=torch.bool, device=q.device)
        if mask is None
        else mask[:, -1].bool()
    )
    half = window // 2
    if dilation == 1:
        return _sliding_window(q, k, v, keep, half, dropout)
    # Dilation δ: positions of one residue class r (mod δ) form an undilated window problem.
    context = torch.empty_like(q)
    for r in range(min(dilation, length)):
        context[:, :, r::dilation] = _sliding_window(
            q[:, :, r::dilation], k[:, :, r::dilation], v[:, :, r::dilation],
            keep[:, r::dilation], half, dropout,
        )  # fmt: skip
    return context


# ----------------------------------------------------------------------------------------- Conv


def conv_output_lengths(lengths: torch.Tensor, kernel: int, stride: int) -> torch.Tensor:
    """Frames left by a Conv1d(kernel, stride, padding=kernel // 2) over ``lengths`` real frames."""
    return torch.div(lengths + 2 * (kernel // 2) - kernel, stride, rounding_mode="floor") + 1


def conv_attention(q, k, v, mask, k_conv, v_conv, dropout=None, where: str = "Conv head"):
    """ConvAttention: K, V compressed by ``k_conv``/``v_conv``, Conv1d(h·d_k, h·d_k, groups=h): one
    convolution per head.

    Padded frames are zeroed before the convolution so they never leak into a real compressed frame;
    the compressed mask keeps the first ``conv_output_lengths(n)`` frames of an utterance of n frames.
    Returns (context, compressed mask (B, 1, T')).
    """
    batch, heads, length, d_k = k.shape
    lengths = torch.full((batch,), length, device=k.device) if mask is None else mask[:, -1].sum(-1)
    kernel, stride = k_conv.kernel_size[0], k_conv.stride[0]
    kept = conv_output_lengths(lengths, kernel, stride)
    if bool((kept <= 0).any()):
        bad = int(lengths[kept <= 0][0])
        raise ConfigError(
            f"Conv({kernel},{stride}) compresses an utterance of {bad} frames to zero frames",
            key=where,
        )
    if mask is not None:
        keep = mask[:, -1].to(k.dtype)[:, None, :, None]  # (B, 1, T, 1)
        k, v = k * keep, v * keep

    def compress(x, conv):  # (B, h, T, d_k) -> (B, h, T', d_k), each head its own convolution
        y = conv(x.transpose(-2, -1).reshape(batch, heads * d_k, length))
        return y.reshape(batch, heads, d_k, -1).transpose(-2, -1)

    kc, vc = compress(k, k_conv), compress(v, v_conv)
    positions = torch.arange(kc.size(2), device=k.device)
    cmask = (positions[None, :] < kept[:, None]).unsqueeze(1)  # (B, 1, T')
    context, _ = full_attention(q, kc, vc, cmask, dropout)
    return context, cmask


# ----------------------------------------------------------------------------------------- Fast


def orthogonal_gaussian(features: int, dim: int, generator=None, device=None) -> torch.Tensor:
    """(features, dim) random directions, orthogonal in blocks of ``dim``, rows with χ(dim) norms.

    Each block is the Q of a Gaussian matrix's QR (Haar-orthogonal); row norms are redrawn as those of
    Gaussian vectors, so every row is marginally N(0, I) as FAVOR+ requires (Choromanski et al. §4).
    """
    rows = []
    for _ in range(-(-features // dim)):
        gauss = torch.randn(dim, dim, generator=generator, device=device)
        q, _ = torch.linalg.qr(gauss)
        rows.append(q.T)
    directions = torch.cat(rows)[:features]
    norms = torch.randn(features, dim, generator=generator, device=device).norm(dim=1)
    return directions * norms[:, None]


def favor_features(x, projection, is_query: bool, keep=None, eps: float = 1e-4) -> torch.Tensor:
    """φ⁺(x) for x (B, h, T, d): exp(ωᵀx' - ‖x'‖²/2 - c) / √m with x' = x / d^¼ (so x'·y' = x·y/√d).

    The stabiliser c (a max) cancels between numerator and denominator of attention: per query, and
    one over the real keys of a head (``keep`` (B, T): padding must not move it, a per-key constant
    would not cancel). Padded keys get φ = 0.
    """
    x = x * x.size(-1) ** -0.25
    wx = torch.matmul(x, projection.T.to(x.dtype))  # (B, h, T, m)
    half_norm = x.pow(2).sum(-1, keepdim=True) / 2
    if is_query:
        stab = wx.amax(-1, keepdim=True)
    elif keep is None:
        stab = wx.amax(dim=(-1, -2), keepdim=True)
    else:
        real = keep[:, None, :, None]
        stab = wx.masked_fill(~real, torch.finfo(wx.dtype).min).amax(dim=(-1, -2), keepdim=True)
    features = (torch.exp(wx - half_norm - stab.detach()) + eps) / math.sqrt(projection.size(0))
    return features if keep is None or is_query else features * real.to(features.dtype)


def fast_attention(q, k, v, mask, projection: torch.Tensor) -> torch.Tensor:
    """FAVOR+ bidirectional attention; masked keys contribute nothing (their features are zeroed)."""
    q_feat = favor_features(q, projection, is_query=True)
    k_feat = favor_features(
        k, projection, is_query=False, keep=None if mask is None else mask[:, -1].bool()
    )
    kv = torch.matmul(k_feat.transpose(-2, -1), v)  # (B, h, m, d_k): never an L x T matrix
    normaliser = torch.matmul(q_feat, k_feat.sum(dim=2).unsqueeze(-1))  # (B, h, L, 1)
    return torch.matmul(q_feat, kv) / normaliser
