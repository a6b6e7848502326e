"""Multi-Head Multi-Attention (MHMA, the Multiformer's layer; thesis §4.1, eq. 23).

    Z = (Z_1, ..., Z_h) · W_o,    Z_i = F_i(Q_i, K_i, V_i)

Every head i projects its own slice of Q, K, V (ESPnet's ``linear_q/k/v``) and applies its own attention
kind F_i (``espnet_ext.attention.head_kinds``): Full, Fast (Performer), Local (sliding window) or Conv
(ConvAttention). The concatenated head outputs are projected by one W_o (``linear_out``), so the region of
W_o that reads head i is the column block i·d_k:(i+1)·d_k of ``linear_out.weight`` (§4.3).

A layer's heads are written as in the thesis' Tabla 1: ``["2 x Local(64)", "2 x Conv(5, 2)"]``; kinds:
``Full``, ``Fast`` or ``Fast(m)`` (m random features, default d_k·ln d_k as performer-pytorch),
``Local(w)`` or ``Local(w, δ)`` (dilation δ), ``Conv(κ, χ)``. With every head Full the module is ESPnet's
``MultiHeadedAttention`` (its own forward runs), so its weights and checkpoints are interchangeable.

Relaxed attention / smooth focus (``attention_sites``) act on the Full heads only: they are defined on a
softmax over all keys, which Local, Conv and Fast heads do not compute.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch
from espnet.nets.pytorch_backend.transformer.attention import MultiHeadedAttention

from espnet_ext.attention import head_kinds
from espnet_ext.attention.gamma import check_gamma
from espnet_ext.attention.relaxed import relax_weights
from espnet_ext.attention.smooth_focus import smooth_focus_weights
from espnet_ext.errors import ConfigError

KINDS = {
    "full": 0,
    "fast": (0, 1),
    "local": (1, 2),
    "conv": (2, 2),
}  # kind -> allowed parameter counts
DEFAULT_REDRAW_INTERVAL = (
    1000  # Performer feature redraw every 1000 training calls (performer-pytorch)
)


@dataclass(frozen=True)
class HeadKind:
    """One attention kind with its parameters (``params`` as written, validated)."""

    kind: str  # full | fast | local | conv
    params: tuple[int, ...] = ()

    def __str__(self) -> str:
        name = self.kind.capitalize()
        return f"{name}({', '.join(map(str, self.params))})" if self.params else name


_HEADS = re.compile(r"^\s*(?:(\d+)\s*[x×*]\s*)?([A-Za-z]+)\s*(?:\(([^()]*)\))?\s*$")


def parse_heads(entry: str, key: str) -> list[HeadKind]:
    """``"2 x Local(64)"`` -> [Local(64), Local(64)]; errors name the config ``key``."""
    match = _HEADS.match(str(entry))
    if not match:
        raise ConfigError(
            f"cannot read head entry {entry!r}: write '<count> x <Kind>(<params>)'", key=key
        )
    count, name, args = match.groups()
    kind = name.lower()
    if kind not in KINDS:
        raise ConfigError(
            f"unknown attention kind {name!r} (known: Full, Fast, Local, Conv)", key=key
        )
    try:
        params = tuple(int(a) for a in args.split(",")) if args and args.strip() else ()
    except ValueError:
        raise ConfigError(f"{name} parameters must be integers, got ({args})", key=key) from None
    allowed = KINDS[kind]
    low, high = (allowed, allowed) if isinstance(allowed, int) else allowed
    if not low <= len(params) <= high:
        raise ConfigError(f"{name} takes {low}..{high} parameters, got {len(params)}", key=key)
    if any(p <= 0 for p in params):
        what = {"local": "window and dilation", "conv": "kernel and stride", "fast": "features"}
        raise ConfigError(f"{name}: {what[kind]} must be > 0, got {params}", key=key)
    if count is not None and int(count) <= 0:
        raise ConfigError(f"head count must be > 0 in {entry!r}", key=key)
    return [HeadKind(kind, params)] * (1 if count is None else int(count))


def parse_layer_heads(entries, n_heads: int, key: str) -> list[HeadKind]:
    """A layer's head list (strings) -> one HeadKind per head, checked against the layer's head count."""
    if isinstance(entries, str):
        entries = [e for e in re.split(r",(?![^()]*\))", entries) if e.strip()]
    heads = [h for i, e in enumerate(entries) for h in parse_heads(e, f"{key}[{i}]")]
    if len(heads) != n_heads:
        raise ConfigError(
            f"the head list {list(entries)} gives {len(heads)} heads, the layer has {n_heads} "
            "(attention_heads)",
            key=key,
        )
    return heads


def head_runs(heads: list[HeadKind]) -> list[tuple[HeadKind, int, int]]:
    """Consecutive heads of one kind as (kind, first, stop): each run is computed as one batch."""
    runs = []
    for index, head in enumerate(heads):
        if runs and runs[-1][0] == head:
            runs[-1] = (head, runs[-1][1], index + 1)
        else:
            runs.append((head, index, index + 1))
    return runs


class MultiHeadMultiAttention(MultiHeadedAttention):
    """ESPnet's multi-head attention whose heads each compute their own attention kind (eq. 23).

    Parameters beyond ESPnet's: per Conv head a K and a V convolution (``conv_k.<run>``, ``conv_v.<run>``);
    per Fast run random features (``fast_features_<run>``), redrawn every ``redraw_interval`` training
    forward calls (as performer-pytorch counts; under DDP the buffers are broadcast from rank 0, so all
    ranks use one draw). The state dict keeps the draw as integers (``fast_draw_<run>``: seed, draw
    index) and loading regenerates its features: averaging checkpoints (ESPnet's n-best average sums
    integer tensors, ours floors their mean) then still gives one proper orthogonal draw, where averaged
    feature matrices of different draws would be shrunken, non-orthogonal directions.
    """

    def __init__(
        self,
        n_head: int,
        n_feat: int,
        dropout_rate: float,
        heads,
        key: str = "heads",
        redraw_interval: int = DEFAULT_REDRAW_INTERVAL,
        **espnet_kwargs,
    ):
        if n_feat % n_head:
            raise ConfigError(f"d_model {n_feat} is not divisible by {n_head} heads", key=key)
        super().__init__(n_head, n_feat, dropout_rate, **espnet_kwargs)
        self._add_heads(heads, key, redraw_interval)

    @classmethod
    def from_attention(
        cls,
        attention: MultiHeadedAttention,
        heads,
        key: str = "heads",
        redraw_interval: int = DEFAULT_REDRAW_INTERVAL,
    ) -> MultiHeadMultiAttention:
        """The same Q/K/V/W_o parameters (same state-dict keys) with per-head kinds added."""
        if type(attention) is not MultiHeadedAttention:
            raise ConfigError(
                f"MHMA replaces ESPnet's MultiHeadedAttention, not {type(attention).__name__}",
                key=key,
            )
        mhma = cls.__new__(cls)
        mhma.__dict__.update(attention.__dict__)
        mhma._add_heads(heads, key, redraw_interval)
        return mhma

    def _add_heads(self, heads, key: str, redraw_interval: int) -> None:
        self.heads = (
            heads if isinstance(heads[0], HeadKind) else parse_layer_heads(heads, self.h, key)
        )
        if len(self.heads) != self.h:
            raise ConfigError(f"{len(self.heads)} head kinds for {self.h} heads", key=key)
        self.key = key
        self.runs = head_runs(self.heads)
        self.all_full = all(h.kind == "full" for h in self.heads)
        if self.use_flash_attn and not self.all_full:
            self.use_flash_attn = False  # flash-attn computes Full heads only
            self.dropout = torch.nn.Dropout(self.dropout_rate)
        self.conv_k, self.conv_v = torch.nn.ModuleDict(), torch.nn.ModuleDict()
        device = self.linear_q.weight.device
        # run -> [seed, index] of ``fast_draw_<run>`` kept on the host: a redraw in a training forward
        # reading the buffer would make the host wait for the device.
        self._draws: dict[int, list[int]] = {}
        for run, (head, first, stop) in enumerate(self.runs):
            if head.kind == "conv":
                kernel, stride = head.params
                channels = (stop - first) * self.d_k
                for convs in (self.conv_k, self.conv_v):
                    convs[str(run)] = torch.nn.Conv1d(
                        channels, channels, kernel, stride, padding=kernel // 2,
                        groups=stop - first, device=device,
                    )  # fmt: skip
            elif head.kind == "fast":
                features = (
                    head.params[0] if head.params else max(1, int(self.d_k * math.log(self.d_k)))
                )
                seed = int(torch.randint(2**31, ()))
                self._draws[run] = [seed, 0]
                self.register_buffer(f"fast_draw_{run}", torch.tensor([seed, 0], device=device))
                self.register_buffer(
                    f"fast_features_{run}",
                    torch.empty(features, self.d_k, device=device),
                    persistent=False,
                )
                self._draw_features(run)
        if redraw_interval <= 0:
            raise ConfigError(f"redraw_interval must be > 0, got {redraw_interval}", key=key)
        self.redraw_interval = redraw_interval
        self.calls_since_redraw = 0
        self.gamma, self.matched_inference, self.smooth_focus = 0.0, False, False
        self._full_weights: list[torch.Tensor] = []

    def configure(self, gamma=0.0, matched_inference=False, smooth_focus=False, fused=True) -> None:
        """Relaxed attention (eq. 1) / smooth focus on the Full heads (``attention_sites`` options).

        ``fused`` is accepted for config compatibility; Full heads of a mixed layer always take the
        explicit weight path (their weights are also what ESPnet's attention plots show)."""
        self.gamma = check_gamma(gamma, f"{self.key}: gamma")
        self.matched_inference = bool(matched_inference)
        self.smooth_focus = bool(smooth_focus)
        if self.gamma > 0 or self.smooth_focus:
            self.use_flash_attn = False

    @property
    def relaxing(self) -> bool:
        return self.gamma > 0 and (self.training or self.matched_inference)

    def extra_repr(self) -> str:
        return f"heads=[{', '.join(f'{s - f} x {h}' for h, f, s in self.runs)}]"

    def _fast_runs(self) -> list[int]:
        return [run for run, (head, _, _) in enumerate(self.runs) if head.kind == "fast"]

    def _draw_features(self, run: int) -> None:
        """``fast_features_<run>`` := the features of its draw (seed, index), made on the CPU (the same
        draw on every device) and copied to the device without waiting for it (from pinned memory)."""
        seed, index = self._draws[run]
        generator = torch.Generator().manual_seed((seed * 1_000_003 + index) % 2**63)
        features = getattr(self, f"fast_features_{run}")
        drawn = head_kinds.orthogonal_gaussian(*features.shape, generator=generator)
        features.copy_(drawn.pin_memory() if features.is_cuda else drawn, non_blocking=True)

    def redraw_features(self) -> None:
        """New random features for every Fast run (Performer's feature redraw)."""
        for run in self._fast_runs():
            getattr(self, f"fast_draw_{run}")[1] += 1
            self._draws[run][1] += 1
            self._draw_features(run)
        self.calls_since_redraw = 0

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        with torch.no_grad():
            for run in self._fast_runs():
                self._draws[run] = [int(x) for x in getattr(self, f"fast_draw_{run}")]
                self._draw_features(run)

    def forward(self, query, key, value, mask, expand_kv: bool = False):
        if self.all_full and not self.relaxing and not self.smooth_focus:
            return super().forward(query, key, value, mask, expand_kv)  # exactly ESPnet's attention
        if self.training and any(h.kind == "fast" for h in self.heads):
            if self.calls_since_redraw >= self.redraw_interval:
                self.redraw_features()
            self.calls_since_redraw += 1
        q, k, v = self.forward_qkv(query, key, value, expand_kv)
        contexts, self._full_weights = [], []
        for run, (head, first, stop) in enumerate(self.runs):
            contexts.append(
                self._run(run, head, q[:, first:stop], k[:, first:stop], v[:, first:stop], mask)
            )
        # ``attn`` (B, heads, L, T) holds the Full heads' weights; the other kinds have no L x T matrix
        # (None without Full heads: ESPnet's attention plots need num_att_plot: 0 then).
        self.attn = torch.cat(self._full_weights, dim=1) if self._full_weights else None
        self._full_weights = []
        context = (
            contexts[0] if len(contexts) == 1 else torch.cat(contexts, dim=1)
        )  # (B, H, L, d_k)
        batch, heads, length, d_k = context.shape
        return self.linear_out(context.transpose(1, 2).reshape(batch, length, heads * d_k))

    def _run(self, run: int, head: HeadKind, q, k, v, mask):
        if head.kind == "full":
            return self._full(q, k, v, mask)
        if head.kind == "local":
            window, dilation = (*head.params, 1)[:2]
            return head_kinds.local_attention(q, k, v, mask, window, dilation, self.dropout)
        if head.kind == "conv":
            context, _ = head_kinds.conv_attention(
                q, k, v, mask, self.conv_k[str(run)], self.conv_v[str(run)], self.dropout
            )
            return context
        return head_kinds.fast_attention(q, k, v, mask, getattr(self, f"fast_features_{run}"))

    def _full(self, q, k, v, mask):
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_k)
        if self.smooth_focus:
            weights = smooth_focus_weights(scores, mask)
        else:
            keep = None if mask is None else mask.unsqueeze(1).bool()
            weights = head_kinds.masked_softmax(scores, keep)
        if self.relaxing:
            weights = relax_weights(weights, self.gamma, mask)
        self._full_weights.append(weights)
        return torch.matmul(self.dropout(weights), v)
