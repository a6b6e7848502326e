"""The attention kinds a head of the Multi-Head Multi-Attention can compute (thesis §3.2.1, §4.1).

Every function takes one group of heads' projections ``q`` (B, h, L, d_k), ``k``/``v`` (B, h, T, d_k) and
ESPnet's key mask ``mask`` (B, 1, T), 1 = real frame, and returns the heads' context (B, h, L, d_k).

- **Full**: softmax(q kᵀ / √d_k) v (Vaswani et al.), exactly ESPnet's ``forward_attention``.
- **Local**, band form (Longformer sliding window, the default): query i sees keys j with |i - j| ≤ w/2
  (or, dilated by δ, keys i + δ·t for |t| ≤ w/2). Computed in blocks of w/2 queries against their block
  and the two neighbours, so time and memory are O(n·w) instead of O(n²); ``sliding_window`` recomputes
  the weights in backward. On CUDA, up to ``LOCAL_DENSE_MAX_FRAMES`` frames the band is a mask over one
  fused dense attention instead (fewer, larger kernels win there); beyond, the band in chunks through one
  fused call (``LOCAL_CHUNK_DEVICES``: CUDA, 2.6x faster than the blocked path at 4,096 frames on an H100;
  PyTorch's FlexAttention, ``FLEX_ON_CUDA``, is opt-in, measured slower). The blocked path stays the
  reference and the CPU's path.
- **Local**, block form (the thesis' code: lucidrains ``LocalAttention(window_size=w//3, look_backward=1,
  look_forward=1)``): blocks of b = ⌊w/3⌋ queries, each seeing every key of its block and the two
  neighbours, 3b keys (63 for w = 64) at offsets that depend on the query's place in its block.
- **Conv** (Speechformer ConvAttention): keys and values compressed along time by a 1-D convolution
  (kernel κ, stride χ), then Full attention of the uncompressed queries over the ~n/χ compressed frames.
  Computed by PyTorch's fused attention (no weight matrix kept; on the CPU with dropout it computes
  explicitly). Speechformer convolves the layer input (d_model channels) before the K/V projections, for
  all heads at once; in the MHMA the other heads of the layer need the uncompressed K/V, so the Conv heads
  convolve their projected K and V (d_k channels). Two forms:
  *dense* (``conv_attention``): each head its own standard Conv1d(d_k, d_k, κ, χ, padding ⌊κ/2⌋),
  2·(d_k²·κ + d_k) parameters per head; an utterance of n frames keeps ⌈n/χ⌉ compressed frames (odd κ).
  *depthwise* (``depthwise_conv_attention``, the thesis' code: mt-upc/fairseq ``multiformer``
  fairseq/modules/conv_attention.py, ``conv_type='depthwise'`` in every registered architecture): one
  depthwise Conv1d(d_k, d_k, κ, χ, padding ⌊χ/2⌋, groups=d_k) shared by all heads of the group (heads
  folded into the batch), 2·(d_k·κ + d_k) parameters per group; the input is right-padded to
  κ + χ·⌈(T - κ)/χ⌉ frames and an utterance of n frames keeps ⌊(n + 2⌊χ/2⌋ - κ)/χ + 1⌋.
- **Fast** (Performer FAVOR+): softmax(q kᵀ) ≈ φ(q) φ(k)ᵀ with positive orthogonal random features
  φ(x) = exp(ωᵀx - ‖x‖²/2) / √m (eq. 22, SM⁺), so Z = φ(q) (φ(k)ᵀ v) / (φ(q) Σ_j φ(k_j)), linear in n.
"""

from __future__ import annotations

import math

import torch

from espnet_ext.attention.mask_cache import PerMask, additive_mask
from espnet_ext.attention.sliding_window import block_window_attention, sliding_window_attention


def masked_softmax(scores: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """ESPnet's masking: masked keys get weight 0; a query with no visible key gets all zeros.

    ``scores`` must be a fresh tensor (a product's output): it is masked in place, saving one copy of
    the largest tensor of attention. The zeroing pass runs always, as ESPnet's: asking first whether
    some query sees no key would make the host wait for the device.
    """
    if keep is None:
        return torch.softmax(scores, dim=-1)
    masked = ~keep
    weights = torch.softmax(scores.masked_fill_(masked, torch.finfo(scores.dtype).min), dim=-1)
    return weights.masked_fill(masked, 0.0)


def full_attention(q, k, v, mask, dropout=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention -> (context (B, h, L, d_k), weights (B, h, L, T))."""
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    keep = None if mask is None else mask.unsqueeze(1).bool()  # (B, 1, 1|L, T)
    weights = masked_softmax(scores, keep)
    dropped = weights if dropout is None else dropout(weights)
    return torch.matmul(dropped, v), weights


# ---------------------------------------------------------------------------------------- Local


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
    drop = dropout.p if dropout is not None and dropout.training else 0.0
    if q.device.type in LOCAL_DENSE_DEVICES and length <= LOCAL_DENSE_MAX_FRAMES:
        return dense_local_attention(q, k, v, keep, half, dilation, drop, mask_source=mask)
    # FlexAttention (opt-in, measured slower) has no dropout on the weights, and its CUDA kernels need
    # heads of >= 16 dimensions
    if FLEX_ON_CUDA and q.is_cuda and drop == 0.0 and q.size(-1) >= FLEX_MIN_HEAD_DIM:
        return flex_local_attention(q, k, v, keep, half, dilation, mask_source=mask)
    if q.device.type in LOCAL_CHUNK_DEVICES:
        return chunked_local_attention(
            q, k, v, keep, half, dilation, drop, LOCAL_CHUNK_FRAMES, mask_source=mask
        )
    if dilation == 1:
        return sliding_window_attention(q, k, v, keep, half, drop)
    # Dilation δ: positions of one residue class r (mod δ) form an undilated window problem.
    context = torch.empty_like(q)
    for r in range(min(dilation, length)):
        context[:, :, r::dilation] = sliding_window_attention(
            q[:, :, r::dilation], k[:, :, r::dilation], v[:, :, r::dilation],
            keep[:, r::dilation], half, drop,
        )  # fmt: skip
    return context


# On CUDA, up to this many frames a Local head is a band mask over one fused dense attention; beyond, its band
# in chunks (LOCAL_CHUNK_DEVICES). bench_multiformer (batch 16, attention dropout 0.1), dense band against
# chunks of 128 queries, whole encoder: one H100 7.9 / 9.9 ms at T 512, 14.3 / 11.7 at 1024; one H200 7.4 /
# 8.6 at 512, 10.1 / 9.4 at 768, 13.7 / 11.2 at 1024: the chunks overtake between 512 and 768. On 2 CPU
# cores a whole encoder ran 1.0-1.9x slower dense (T 256-1024), so the CPU keeps the blocked path.
LOCAL_DENSE_MAX_FRAMES = 512
LOCAL_DENSE_DEVICES = {"cuda"}


def local_band(
    keep: torch.Tensor, half: int, dilation: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """The keys each query of a Local head sees (``local_mask_mod`` as a tensor) over ``keep`` (B, T) ->
    (visible (B, 1, T, T), empty (B, 1, T, 1)). A query that sees no key (``empty``) is shown every key,
    so the softmax and its gradient stay finite; its context is zeroed afterwards."""
    positions = torch.arange(keep.size(1), device=keep.device)
    offset = positions[:, None] - positions[None, :]
    band = offset.abs() <= half * dilation
    if dilation > 1:
        band = band & (offset % dilation == 0)
    visible = band[None, None] & keep[:, None, None, :]
    empty = ~visible.any(dim=-1, keepdim=True)
    return visible | empty, empty


MASK_TERMS = (
    PerMask()
)  # per padding mask: what Local (dense) and Conv heads derive from it, once a forward


def dense_local_attention(
    q, k, v, keep: torch.Tensor, half: int, dilation: int = 1, drop: float = 0.0, mask_source=None
):
    """A Local head's context through PyTorch's fused attention over the band mask (O(T²), one kernel);
    a query with no visible key gets zeros, as in the blocked path. The band is built once per
    ``mask_source`` (the padding mask ``keep`` was read from) and reused by the other layers."""

    def band():
        visible, empty = local_band(keep, half, dilation)
        return additive_mask(visible, q.dtype), empty

    bias, empty = MASK_TERMS.get(
        mask_source, ("band", half, dilation, tuple(keep.shape), q.dtype), band
    )
    context = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=bias, dropout_p=drop
    )
    return context.masked_fill(empty, 0.0)


# Past LOCAL_DENSE_MAX_FRAMES, on the devices in LOCAL_CHUNK_DEVICES, Local heads run the band in chunks of
# LOCAL_CHUNK_FRAMES queries, each chunk against its keys within reach, every chunk of every utterance in one
# fused attention call (``chunked_local_attention``): about (c + w)/w times the band's scores, in the fused
# kernel that made the dense band win up to 1,024 frames. On one H100 (bench_multiformer, batch 16, attention
# dropout 0.1, 4 x Local(64), 2 layers) the encoder took 21.4 / 38.6 ms chunked against 53.0 / 99.3 ms
# blocked at T = 2048 / 4096 (Full 52.5 / 171.5), for 5 % more peak memory; chunks of 64 / 256 queries
# took 37.5 / 40.8 ms at 4096. On 2 CPU cores (the math kernel) it ran as fast as the blocked path, which
# the CPU keeps.
LOCAL_CHUNK_FRAMES = 128
LOCAL_CHUNK_DEVICES = {"cuda"}


def _chunk_layout(length: int, half: int, dilation: int, chunk: int) -> tuple[int, int, int]:
    """(chunks, reach, keys a chunk sees): the key window of a chunk of ``chunk`` queries spans its frames
    and ``reach`` = δ·w/2 frames each side, rounded up to a multiple of 16 (PyTorch's memory-efficient
    kernel pads the mask to that otherwise, a copy every call)."""
    reach = half * dilation
    return -(-length // chunk), reach, -(-(chunk + 2 * reach) // 16) * 16


def chunked_band(
    keep: torch.Tensor, half: int, dilation: int, chunk: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The band of ``local_band`` cut into chunks of ``chunk`` queries over ``keep`` (B, T) -> (visible
    (B·C, 1, c, W), empty (B·C, 1, c, 1)): query a of chunk i is frame i·c + a, key b of its window is
    frame i·c - reach + b (frames outside 0..T-1 are padding). A query that sees no key is shown every key
    of its window (a finite softmax) and zeroed afterwards."""
    batch, length = keep.shape
    chunks, reach, window = _chunk_layout(length, half, dilation, chunk)
    right = (chunks - 1) * chunk + window - reach - length
    keys = torch.nn.functional.pad(keep, (reach, right)).unfold(1, window, chunk)  # (B, C, W)
    offset = (
        torch.arange(chunk, device=keep.device)[:, None]
        + reach
        - torch.arange(window, device=keep.device)[None, :]
    )  # query frame - key frame
    band = offset.abs() <= reach
    if dilation > 1:
        band = band & (offset % dilation == 0)
    visible = (band & keys[:, :, None, :]).flatten(0, 1)[:, None]
    empty = ~visible.any(dim=-1, keepdim=True)
    return visible | empty, empty


def chunked_local_attention(
    q, k, v, keep: torch.Tensor, half: int, dilation: int, drop: float, chunk: int, mask_source=None
):
    """A Local head's context through one fused attention call over chunks of ``chunk`` queries, each
    seeing the keys within reach of its frames (``chunked_band``); equal to the blocked path."""
    batch, heads, length, d_k = q.shape
    chunks, reach, window = _chunk_layout(length, half, dilation, chunk)

    def terms():
        visible, empty = chunked_band(keep, half, dilation, chunk)
        return additive_mask(visible, q.dtype), empty

    bias, empty = MASK_TERMS.get(
        mask_source, ("chunked band", half, dilation, chunk, tuple(keep.shape), q.dtype), terms
    )
    queries = torch.nn.functional.pad(q, (0, 0, 0, chunks * chunk - length))
    queries = queries.view(batch, heads, chunks, chunk, d_k).transpose(1, 2)

    def windows(x):  # (B, h, T, d_k) -> (B·C, h, W, d_k): each chunk's keys, overlapping
        right = (chunks - 1) * chunk + window - reach - length
        x = torch.nn.functional.pad(x, (0, 0, reach, right)).unfold(2, window, chunk)
        return x.permute(0, 2, 1, 4, 3).reshape(batch * chunks, heads, window, d_k)

    context = torch.nn.functional.scaled_dot_product_attention(
        queries.reshape(batch * chunks, heads, chunk, d_k),
        windows(k),
        windows(v),
        attn_mask=bias,
        dropout_p=drop,
    ).masked_fill(empty, 0.0)
    context = context.view(batch, chunks, heads, chunk, d_k).transpose(1, 2)
    return context.reshape(batch, heads, chunks * chunk, d_k)[:, :, :length]


def block_local_attention(q, k, v, mask, window: int, dropout=None) -> torch.Tensor:
    """The block form of a Local(w) head (the thesis' code): blocks of ⌊w/3⌋ frames, each query seeing
    the real keys of its block and of the blocks before and after it. The author's LocalAttention also
    masks padded queries (their outputs, never read, differ); self-attention only."""
    if q.size(2) != k.size(2):
        raise ValueError("local attention is self-attention: queries and keys must have one length")
    if window // 3 <= 0:
        raise ValueError(f"the block form needs a window >= 3 (blocks of w // 3), got {window}")
    keep = (
        torch.ones(q.size(0), q.size(2), dtype=torch.bool, device=q.device)
        if mask is None
        else mask[:, -1].bool()
    )
    drop = dropout.p if dropout is not None and dropout.training else 0.0
    return block_window_attention(q, k, v, keep, window // 3, drop)


# Local heads past LOCAL_DENSE_MAX_FRAMES on CUDA through FlexAttention (torch.nn.attention.flex_attention)
# instead of the blocked path: off. On one H100 (torch 2.11, bench_multiformer, batch 16, 2 layers, no
# attention dropout) the Local(64) encoder took 70 / 138 ms through it at T = 2048 / 4096, the blocked path
# 29 / 55 ms (with dropout 0.1), the 4 x Full encoder 49 / 158 ms. The path stays, tested equal to the
# blocked one, for a PyTorch whose kernel does better.
FLEX_ON_CUDA = False
# torch 2.11's FlexAttention lowering: "embedding dimension ... must be at least 16"
FLEX_MIN_HEAD_DIM = 16
_compiled_flex_attention = None
BLOCK_MASKS = PerMask()  # per padding mask and head form: built once per forward, not per layer


def local_mask_mod(keep: torch.Tensor, half: int, dilation: int = 1):
    """FlexAttention's ``mask_mod`` of a Local head: query i sees key j when |i - j| <= δ·w/2, i - j is a
    multiple of δ, and j is a real frame of utterance b (``keep`` (B, T))."""

    def visible(b, h, i, j):
        offset = i - j
        seen = keep[b, j] & (offset.abs() <= half * dilation)
        return seen if dilation == 1 else seen & (offset % dilation == 0)

    return visible


def local_block_mask(keep: torch.Tensor, half: int, dilation: int = 1, mask_source=None):
    """FlexAttention's block mask of a Local head over ``keep`` (B, T); reused while ``mask_source`` (the
    padding mask tensor ``keep`` was read from) is the one last seen and unchanged."""
    from torch.nn.attention.flex_attention import create_block_mask

    batch, length = keep.shape
    return BLOCK_MASKS.get(
        mask_source,
        (half, dilation, batch, length, keep.device),
        lambda: create_block_mask(
            local_mask_mod(keep, half, dilation), batch, None, length, length, device=keep.device,
            _compile=keep.is_cuda,  # compiled where FlexAttention runs; eager elsewhere (tests)
        ),
    )  # fmt: skip


def flex_local_attention(
    q, k, v, keep: torch.Tensor, half: int, dilation: int = 1, mask_source=None
):
    """The Local head's context through a compiled FlexAttention over the band's block mask; a query
    with no visible key gets zeros, as in the blocked path."""
    from torch.nn.attention.flex_attention import flex_attention

    global _compiled_flex_attention
    if _compiled_flex_attention is None:  # compiled once per process, as PyTorch recommends
        _compiled_flex_attention = torch.compile(flex_attention)
    block_mask = local_block_mask(keep, half, dilation, mask_source)
    return _compiled_flex_attention(q, k, v, block_mask=block_mask)


# ----------------------------------------------------------------------------------------- Conv


def conv_output_lengths(
    lengths: torch.Tensor, kernel: int, stride: int, padding: int | None = None
) -> torch.Tensor:
    """Frames left by a Conv1d(kernel, stride, padding) over ``lengths`` real frames, ⌊(n + 2p - κ)/χ⌋ + 1
    (padding ⌊κ/2⌋ unless given). With the depthwise form's p = ⌊χ/2⌋ this is the thesis' code's
    compressed mask length (``compute_conv_out_length``), ≤ 0 for n < κ - 2p."""
    padding = kernel // 2 if padding is None else padding
    return torch.div(lengths + 2 * padding - kernel, stride, rounding_mode="floor") + 1


def depthwise_input_length(length: int, kernel: int, stride: int) -> int:
    """Frames the depthwise form right-pads its input to (the thesis' code's
    ``compute_pre_conv_length``): κ + χ·⌈(T - κ)/χ⌉, at least κ."""
    return kernel + stride * -(-(length - kernel) // stride) if length > kernel else kernel


def conv_mask_terms(
    mask, length: int, kernel: int, stride: int, padding: int, compressed: int, dtype
):
    """What a Conv group derives from ESPnet's key ``mask`` (B, 1|L, T), once per mask tensor and
    compression: (the real frames as a (B, 1, T, 1) factor in ``dtype``, zeroing the padding; ``kept``
    (B,) compressed frames per utterance; the compressed mask (B, 1, T'); the fused attention's additive
    mask (B, 1, 1, T') over at least one compressed frame per row, so no query is left without keys and
    PyTorch's fused attention gives Full's result, with no NaN for the backward to carry; the rows keeping
    no frame (B, 1, 1, 1), whose context is zeroed)."""

    def compute():
        real = mask[:, -1]
        kept = conv_output_lengths(real.sum(-1), kernel, stride, padding)
        positions = torch.arange(compressed, device=mask.device)
        cmask = (positions[None, :] < kept[:, None]).unsqueeze(1)
        visible = (positions[None, :] < kept.clamp(min=1)[:, None])[:, None, None, :]
        keep = real.to(dtype)[:, None, :, None]
        return keep, kept, cmask, additive_mask(visible, dtype), (kept <= 0)[:, None, None, None]

    key = ("conv", length, kernel, stride, padding, compressed, dtype)
    return MASK_TERMS.get(mask, key, compute)


def compressed_attention(q, kc, vc, terms, unmasked_kept, dropout):
    """Attention of the queries over the compressed frames kc/vc (B, h, T', d_k) that ``terms``
    (``conv_mask_terms``) leave visible; without a mask (``terms`` None) over every frame, the compressed
    mask then keeping ``unmasked_kept`` frames. Returns (context, compressed mask (B, 1, T'))."""
    drop = dropout.p if dropout is not None and dropout.training else 0.0
    if terms is None:
        positions = torch.arange(kc.size(2), device=kc.device)
        cmask = (positions[None, :] < unmasked_kept[:, None]).unsqueeze(1)
        return torch.nn.functional.scaled_dot_product_attention(q, kc, vc, dropout_p=drop), cmask
    _, _, cmask, bias, dead = terms
    context = torch.nn.functional.scaled_dot_product_attention(
        q, kc, vc, attn_mask=bias, dropout_p=drop
    )
    return context.masked_fill(dead, 0.0), cmask


def _conv_inputs(kv, mask, kernel: int, stride: int, padding: int, compressed: int):
    """(K and V side by side, ``kv`` (B, h', T, d'), with padded frames set to zero, so they never leak
    into a real compressed frame; the group's ``conv_mask_terms``, None without a mask; the kept frames of
    an unmasked batch, else None)."""
    batch, _, length, _ = kv.shape
    if mask is None:
        full = torch.full((batch,), length, device=kv.device)
        return kv, None, conv_output_lengths(full, kernel, stride, padding)
    terms = conv_mask_terms(mask, length, kernel, stride, padding, compressed, kv.dtype)
    return kv * terms[0], terms, None


def _convolve_both(x, k_conv, v_conv):
    """``k_conv`` on the first half of the channels of ``x`` (N, 2C, L), ``v_conv`` on the second, as one
    grouped convolution (their weights side by side): one kernel instead of two, forward and backward."""
    weight = torch.cat([k_conv.weight, v_conv.weight])
    bias = torch.cat([k_conv.bias, v_conv.bias])
    return torch.nn.functional.conv1d(
        x, weight, bias, k_conv.stride, k_conv.padding, k_conv.dilation, 2 * k_conv.groups
    )


def conv_compress(k, v, mask, k_conv, v_conv, fused_layout: bool = False):
    """The dense form's compression: K, V (B, h, T, d_k) -> (kc, vc (B, h, T', d_k), ``conv_mask_terms``
    or None without a mask, the kept frames of an unmasked batch or None), one standard
    Conv1d(h·d_k, h·d_k, groups=h, padding ⌊κ/2⌋) per projection: each head its own convolution.
    ``fused_layout``: kc and vc with unit stride in their last dimension (one copy of both), which
    PyTorch's fused attention kernels require (given the convolution's layout, it runs its math path,
    on GPUs as on CPUs)."""
    batch, heads, length, d_k = k.shape
    kernel, stride = k_conv.kernel_size[0], k_conv.stride[0]
    padding = kernel // 2
    compressed = (length + 2 * padding - kernel) // stride + 1
    kv, terms, kept = _conv_inputs(torch.cat([k, v], 1), mask, kernel, stride, padding, compressed)
    y = _convolve_both(kv.transpose(-2, -1).reshape(batch, 2 * heads * d_k, length), k_conv, v_conv)
    kc, vc = _frames_last(y.reshape(batch, 2 * heads, d_k, -1), fused_layout).chunk(2, dim=1)
    return kc, vc, terms, kept


def depthwise_conv_compress(k, v, mask, k_conv, v_conv, fused_layout: bool = False):
    """The depthwise form's compression (the thesis' code), as ``conv_compress``: one depthwise
    Conv1d(d_k, d_k, groups=d_k, padding ⌊χ/2⌋) for every head of the group, heads folded into the batch,
    the input right-padded to ``depthwise_input_length`` frames."""
    batch, heads, length, d_k = k.shape
    kernel, stride = k_conv.kernel_size[0], k_conv.stride[0]
    padding, padded = stride // 2, depthwise_input_length(length, kernel, stride)
    compressed = (padded + 2 * padding - kernel) // stride + 1
    kv, terms, kept = _conv_inputs(torch.cat([k, v], -1), mask, kernel, stride, padding, compressed)
    # (B, h, T, 2 d_k) -> (B·h, 2 d_k, T + extra) -> (B, h, T', 2 d_k)
    x = torch.nn.functional.pad(
        kv.reshape(batch * heads, length, 2 * d_k), (0, 0, 0, padded - length)
    )
    y = _convolve_both(x.transpose(1, 2), k_conv, v_conv)
    kc, vc = _frames_last(y.reshape(batch, heads, 2 * d_k, -1), fused_layout).chunk(2, dim=-1)
    return kc, vc, terms, kept


def _frames_last(y: torch.Tensor, fused_layout: bool) -> torch.Tensor:
    """A convolution's output (..., channels, T') as (..., T', channels): a view, or with
    ``fused_layout`` a copy whose channels are contiguous."""
    y = y.transpose(-2, -1)
    return y.contiguous() if fused_layout else y


def conv_attention(q, k, v, mask, k_conv, v_conv, dropout=None):
    """ConvAttention, dense form: K, V compressed by ``k_conv``/``v_conv`` (``conv_compress``): one
    standard convolution per head.

    Padded frames are zeroed before the convolution so they never leak into a real compressed frame;
    the compressed mask keeps the first ``conv_output_lengths(n)`` frames of an utterance of n frames
    (at least one for n >= 1). An utterance of no frames (a padded row) gets a zero context, as a query
    without visible keys gets from the other kinds. Returns (context, compressed mask (B, 1, T')).
    """
    return compressed_attention(q, *conv_compress(k, v, mask, k_conv, v_conv, True), dropout)


def depthwise_conv_attention(q, k, v, mask, k_conv, v_conv, dropout=None):
    """ConvAttention, depthwise form (the thesis' code): K, V of every head of the group compressed by
    one depthwise ``k_conv``/``v_conv`` (``depthwise_conv_compress``); an utterance of n frames keeps
    ``conv_output_lengths(n, κ, χ, ⌊χ/2⌋)`` compressed frames (a row keeping none gets a zero context).

    Padded frames are zeroed first: the thesis' code convolves a padded batch as it is, so the last
    compressed frames of an utterance read the next frames' padding; here an utterance's result is the
    one the thesis' code gives it alone in its batch. Returns (context, compressed mask (B, 1, T')).
    """
    return compressed_attention(
        q, *depthwise_conv_compress(k, v, mask, k_conv, v_conv, True), dropout
    )


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
    """FAVOR+ bidirectional attention; masked keys contribute nothing (their features are zeroed).

    Computed in float32 also under autocast (the context is returned in q's dtype): the features are
    exponentials of ωᵀx, so a half-precision ωᵀx of size 10 would err by several percent after exp,
    and the normaliser sums them over all keys. Linear in T, so float32 costs little."""
    dtype = q.dtype
    with torch.autocast(q.device.type, enabled=False):
        q, k, v, projection = q.float(), k.float(), v.float(), projection.float()
        q_feat = favor_features(q, projection, is_query=True)
        k_feat = favor_features(
            k, projection, is_query=False, keep=None if mask is None else mask[:, -1].bool()
        )
        kv = torch.matmul(k_feat.transpose(-2, -1), v)  # (B, h, m, d_k): never an L x T matrix
        normaliser = torch.matmul(q_feat, k_feat.sum(dim=2).unsqueeze(-1))  # (B, h, L, 1)
        return (torch.matmul(q_feat, kv) / normaliser).to(dtype)
