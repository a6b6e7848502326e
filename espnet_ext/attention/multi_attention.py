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

Consecutive heads of one kind form a group (``head_runs``: ``4 x Conv(5, 2)`` is one group, as the thesis'
code's ``('compressed', 4, 5, 2, 'depthwise')``), computed by one module of its kind's class (``FullHeads``,
``LocalHeads``, ``ConvHeads``, ``FastHeads``) in ``groups``, each called as ``group(q, k, v, mask,
dropout) -> (context, weights or None)`` on the group's slice of the heads. ``conv_form`` picks the Conv
groups' convolutions (``dense``: one standard convolution per head; ``depthwise``: one depthwise
convolution shared by the group's heads, the thesis' code), ``local_form`` the Local groups' pattern
(``band``: |i - j| ≤ w/2; ``block``: the thesis' code's blocks of ⌊w/3⌋); ``head_kinds`` has both.

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
from espnet_ext.attention.mask_cache import additive_mask, aligned_cat
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
CONV_FORMS = ("dense", "depthwise")
LOCAL_FORMS = ("band", "block")
# Training layers run every group's heads through one fused dense call (``_one_call``) on the devices of Local
# heads' dense band, for utterances of at most this many frames: the threshold the dense band had when the path
# came in (bc153a3; MuST-C's subsampled utterances are far shorter). Where it overtakes each group's own path
# past 512 frames (Local heads in chunks) has not been measured.
ONE_CALL_MAX_FRAMES = 1024


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


def check_forms(conv_form: str, local_form: str, key: str) -> None:
    """Refuse unknown ``conv_form`` / ``local_form`` values, naming the config key (``<key>.conv_form``)."""
    for name, value, allowed in (("conv_form", conv_form, CONV_FORMS),
                                 ("local_form", local_form, LOCAL_FORMS)):  # fmt: skip
        if value not in allowed:
            raise ConfigError(f"must be one of {list(allowed)}, got {value!r}", key=f"{key}.{name}")


class HeadGroup(torch.nn.Module):
    """Heads ``first:stop`` of a layer, all of one kind: ``forward(q, k, v, mask, dropout)`` maps the
    group's projections (B, h, L|T, d_k) and ESPnet's key mask (B, 1, T) to (context (B, h, L, d_k),
    attention weights (B, h, L, T) or None where the kind has no L x T matrix)."""

    def __init__(self, head: HeadKind, first: int, stop: int):
        super().__init__()
        self.head, self.first, self.stop = head, first, stop

    def extra_repr(self) -> str:
        return f"{self.stop - self.first} x {self.head}"


class FullHeads(HeadGroup):
    """softmax(q kᵀ/√d_k) v; relaxed attention (eq. 1) / smooth focus when configured."""

    def __init__(self, head: HeadKind, first: int, stop: int):
        super().__init__(head, first, stop)
        self.gamma, self.matched_inference, self.smooth_focus = 0.0, False, False

    @property
    def relaxing(self) -> bool:
        return self.gamma > 0 and (self.training or self.matched_inference)

    def forward(self, q, k, v, mask, dropout):
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        if self.smooth_focus:
            weights = smooth_focus_weights(scores, mask)
        else:
            keep = None if mask is None else mask.unsqueeze(1).bool()
            weights = head_kinds.masked_softmax(scores, keep)
        if self.relaxing:
            weights = relax_weights(weights, self.gamma, mask)
        return torch.matmul(dropout(weights), v), weights


class LocalHeads(HeadGroup):
    """Local(w[, δ]): the band |i - j| ≤ w/2 (dilated by δ) or the thesis' code's blocks of ⌊w/3⌋."""

    def __init__(self, head: HeadKind, first: int, stop: int, form: str, key: str):
        super().__init__(head, first, stop)
        self.window, self.dilation = (*head.params, 1)[:2]
        self.form = form
        if form == "block" and (self.dilation != 1 or self.window < 3):
            raise ConfigError(
                f"{head}: the block form (local_form: block) takes one window >= 3 and no dilation",
                key=key,
            )

    def forward(self, q, k, v, mask, dropout):
        if self.form == "block":
            return head_kinds.block_local_attention(q, k, v, mask, self.window, dropout), None
        context = head_kinds.local_attention(q, k, v, mask, self.window, self.dilation, dropout)
        return context, None

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, form={self.form}"


class ConvHeads(HeadGroup):
    """Conv(κ, χ): K and V compressed by ``conv_k`` / ``conv_v``, dense (per head) or depthwise (shared)."""

    def __init__(self, head: HeadKind, first: int, stop: int, d_k: int, form: str, device=None):
        super().__init__(head, first, stop)
        kernel, stride = head.params
        self.form = form
        if form == "dense":  # one standard Conv1d(d_k, d_k) per head, as one grouped convolution
            channels, groups, padding = (stop - first) * d_k, stop - first, kernel // 2
        else:  # the thesis' code: one depthwise Conv1d(d_k, d_k) for the whole group, padding ⌊χ/2⌋
            channels, groups, padding = d_k, d_k, stride // 2
        self.conv_k, self.conv_v = (
            torch.nn.Conv1d(
                channels, channels, kernel, stride, padding=padding, groups=groups, device=device
            )
            for _ in range(2)
        )

    def compress(self, k, v, mask, fused_layout: bool = False):
        """(kc, vc (B, h, T', d_k), ``conv_mask_terms`` or None, kept frames of an unmasked batch);
        ``fused_layout`` as ``head_kinds.conv_compress``."""
        compress = (
            head_kinds.conv_compress if self.form == "dense" else head_kinds.depthwise_conv_compress
        )
        return compress(k, v, mask, self.conv_k, self.conv_v, fused_layout)

    def forward(self, q, k, v, mask, dropout):
        compressed = self.compress(k, v, mask, fused_layout=True)
        context, _ = head_kinds.compressed_attention(q, *compressed, dropout)
        return context, None

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, form={self.form}"


class FastHeads(HeadGroup):
    """FAVOR+ with random features ``features`` (a non-persistent buffer) made from the draw ``draw``
    (seed, index; persistent): loading a state dict regenerates the features of its draw."""

    def __init__(self, head: HeadKind, first: int, stop: int, d_k: int, device=None):
        super().__init__(head, first, stop)
        features = head.params[0] if head.params else max(1, int(d_k * math.log(d_k)))
        seed = int(torch.randint(2**31, ()))
        # [seed, index] also kept on the host: a redraw in a training forward reading the buffer would
        # make the host wait for the device.
        self._draw = [seed, 0]
        self.register_buffer("draw", torch.tensor([seed, 0], device=device))
        self.register_buffer(
            "features", torch.empty(features, d_k, device=device), persistent=False
        )
        self._make_features()

    def _make_features(self) -> None:
        """``features`` := the features of the draw (seed, index), made on the CPU (the same draw on
        every device) and copied to the device without waiting for it (from pinned memory)."""
        seed, index = self._draw
        generator = torch.Generator().manual_seed((seed * 1_000_003 + index) % 2**63)
        drawn = head_kinds.orthogonal_gaussian(*self.features.shape, generator=generator)
        self.features.copy_(
            drawn.pin_memory() if self.features.is_cuda else drawn, non_blocking=True
        )

    def redraw(self) -> None:
        self.draw[1] += 1
        self._draw[1] += 1
        self._make_features()

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        with torch.no_grad():
            self._draw = [int(x) for x in self.draw]
            self._make_features()

    def forward(self, q, k, v, mask, dropout):
        return head_kinds.fast_attention(q, k, v, mask, self.features), None


class MultiHeadMultiAttention(MultiHeadedAttention):
    """ESPnet's multi-head attention whose heads each compute their own attention kind (eq. 23).

    Parameters beyond ESPnet's live in ``groups.<g>``: a Conv group's K and V convolutions
    (``groups.<g>.conv_k``, ``conv_v``); a Fast group's random features (``groups.<g>.features``),
    redrawn every ``redraw_interval`` training forward calls (as performer-pytorch counts; under DDP the
    buffers are broadcast from rank 0, so all ranks use one draw), the calls since the last redraw saved
    as ``redraw_calls`` (a resumed training redraws when an uninterrupted one would). The state dict keeps the draw as
    integers (``groups.<g>.draw``: seed, draw index) and loading regenerates its features: averaging
    checkpoints (ESPnet's n-best average sums integer tensors, ours floors their mean) then still gives
    one proper orthogonal draw, where averaged feature matrices of different draws would be shrunken,
    non-orthogonal directions. Checkpoints written before the groups (``conv_k.<g>.*``, ``conv_v.<g>.*``,
    ``fast_draw_<g>``) load through ``_load_from_state_dict``.
    """

    def __init__(
        self,
        n_head: int,
        n_feat: int,
        dropout_rate: float,
        heads,
        key: str = "heads",
        redraw_interval: int = DEFAULT_REDRAW_INTERVAL,
        conv_form: str = "dense",
        local_form: str = "band",
        **espnet_kwargs,
    ):
        if n_feat % n_head:
            raise ConfigError(f"d_model {n_feat} is not divisible by {n_head} heads", key=key)
        super().__init__(n_head, n_feat, dropout_rate, **espnet_kwargs)
        self._add_heads(heads, key, redraw_interval, conv_form, local_form)

    @classmethod
    def from_attention(
        cls,
        attention: MultiHeadedAttention,
        heads,
        key: str = "heads",
        redraw_interval: int = DEFAULT_REDRAW_INTERVAL,
        conv_form: str = "dense",
        local_form: str = "band",
    ) -> MultiHeadMultiAttention:
        """The same Q/K/V/W_o parameters (same state-dict keys) with per-head kinds added; ``attention``
        itself is left as it was (its module, parameter and buffer tables are copied, not shared)."""
        if type(attention) is not MultiHeadedAttention:
            raise ConfigError(
                f"MHMA replaces ESPnet's MultiHeadedAttention, not {type(attention).__name__}",
                key=key,
            )
        mhma = cls.__new__(cls)
        # Module's tables (_modules, _parameters, _buffers, hooks, ...) are dicts and sets: copies, so
        # the groups added below do not appear in ``attention``; the Linear layers themselves are shared.
        mhma.__dict__.update(
            {
                name: value.copy() if isinstance(value, (dict, set)) else value
                for name, value in attention.__dict__.items()
            }
        )
        mhma._add_heads(heads, key, redraw_interval, conv_form, local_form)
        return mhma

    def _add_heads(
        self, heads, key: str, redraw_interval: int, conv_form: str, local_form: str
    ) -> None:
        check_forms(conv_form, local_form, key)
        self.heads = (
            heads if isinstance(heads[0], HeadKind) else parse_layer_heads(heads, self.h, key)
        )
        if len(self.heads) != self.h:
            raise ConfigError(f"{len(self.heads)} head kinds for {self.h} heads", key=key)
        if redraw_interval <= 0:
            raise ConfigError(f"redraw_interval must be > 0, got {redraw_interval}", key=key)
        self.key = key
        self.all_full = all(h.kind == "full" for h in self.heads)
        if self.use_flash_attn and not self.all_full:
            self.use_flash_attn = False  # flash-attn computes Full heads only
            self.dropout = torch.nn.Dropout(self.dropout_rate)
        device = self.linear_q.weight.device
        groups = []
        for head, first, stop in head_runs(self.heads):
            if head.kind == "full":
                groups.append(FullHeads(head, first, stop))
            elif head.kind == "local":
                groups.append(LocalHeads(head, first, stop, local_form, key))
            elif head.kind == "conv":
                groups.append(ConvHeads(head, first, stop, self.d_k, conv_form, device))
            else:
                groups.append(FastHeads(head, first, stop, self.d_k, device))
        self.groups = torch.nn.ModuleList(groups).train(self.training)
        self.redraw_interval = redraw_interval
        # Training calls since the last redraw: saved (``redraw_calls``), so that a training resumed from a
        # checkpoint redraws when an uninterrupted one would; kept on the host too, as the draw is.
        self.calls_since_redraw = 0
        if self._groups_of(FastHeads):
            self.register_buffer("redraw_calls", torch.zeros((), dtype=torch.long, device=device))
        self.gamma, self.matched_inference, self.smooth_focus = 0.0, False, False

    def configure(self, gamma=0.0, matched_inference=False, smooth_focus=False, fused=True) -> None:
        """Relaxed attention (eq. 1) / smooth focus on the Full heads (``attention_sites`` options).

        ``fused`` is accepted for config compatibility; Full heads of a mixed layer always take the
        explicit weight path (their weights are also what ESPnet's attention plots show)."""
        self.gamma = check_gamma(gamma, f"{self.key}: gamma")
        self.matched_inference = bool(matched_inference)
        self.smooth_focus = bool(smooth_focus)
        for group in self._groups_of(FullHeads):
            group.gamma, group.matched_inference = self.gamma, self.matched_inference
            group.smooth_focus = self.smooth_focus
        if (self.gamma > 0 or self.smooth_focus) and self.use_flash_attn:
            # the explicit path applies self.dropout, which ESPnet makes an Identity under flash
            self.use_flash_attn = False
            self.dropout = torch.nn.Dropout(self.dropout_rate)

    @property
    def relaxing(self) -> bool:
        return self.gamma > 0 and (self.training or self.matched_inference)

    def extra_repr(self) -> str:
        return f"heads=[{', '.join(f'{g.stop - g.first} x {g.head}' for g in self.groups)}]"

    def _groups_of(self, kind: type) -> list:
        return [group for group in self.groups if isinstance(group, kind)]

    def redraw_features(self) -> None:
        """New random features for every Fast group (Performer's feature redraw)."""
        for group in self._groups_of(FastHeads):
            group.redraw()
        self.calls_since_redraw = 0
        if hasattr(self, "redraw_calls"):
            self.redraw_calls.zero_()

    # A compiled layer runs this eagerly: traced, its Python counter would give a graph per value.
    @torch.compiler.disable
    def _count_training_call(self) -> None:
        """Performer's redraw schedule: new features once ``redraw_interval`` training calls have passed."""
        if self.calls_since_redraw >= self.redraw_interval:
            self.redraw_features()
        self.calls_since_redraw += 1
        self.redraw_calls.add_(1)

    # Checkpoints from before the head groups: <old key> -> <key under groups.<g>.>
    _OLD_KEYS = re.compile(r"^(?:(conv_k|conv_v)\.(\d+)\.(weight|bias)|fast_draw_(\d+))$")

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for name in [k for k in state_dict if k.startswith(prefix)]:
            match = self._OLD_KEYS.match(name[len(prefix) :])
            if match:
                conv, group, tensor, fast = match.groups()
                new = f"{group}.{conv}.{tensor}" if conv else f"{fast}.draw"
                state_dict[f"{prefix}groups.{new}"] = state_dict.pop(name)
        counter = f"{prefix}redraw_calls"
        if hasattr(self, "redraw_calls") and counter not in state_dict:  # saved before the counter
            state_dict[counter] = torch.zeros_like(self.redraw_calls)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        if hasattr(self, "redraw_calls"):
            self.calls_since_redraw = int(self.redraw_calls)

    def forward(self, query, key, value, mask, expand_kv: bool = False):
        if self.all_full and not self.relaxing and not self.smooth_focus:
            return super().forward(query, key, value, mask, expand_kv)  # exactly ESPnet's attention
        if self.training and self._groups_of(FastHeads):
            self._count_training_call()
        q, k, v = self.forward_qkv(query, key, value, expand_kv)
        if self._one_call(q, k, mask):
            self.attn = (
                None  # training: nothing reads the weights (relaxed / smooth focus layers excluded)
            )
            context = self._attention_in_one_call(q, k, v, mask)
            batch, heads, length, d_k = context.shape
            return self.linear_out(context.transpose(1, 2).reshape(batch, length, heads * d_k))
        contexts, full_weights = [], []
        for group in self.groups:
            heads = slice(group.first, group.stop)
            context, weights = group(q[:, heads], k[:, heads], v[:, heads], mask, self.dropout)
            contexts.append(context)
            if weights is not None:
                full_weights.append(weights)
        # ``attn`` (B, heads, L, T) holds the Full heads' weights; the other kinds have no L x T matrix
        # (None without Full heads: ESPnet's attention plots need num_att_plot: 0 then).
        self.attn = torch.cat(full_weights, dim=1) if full_weights else None
        context = (
            contexts[0] if len(contexts) == 1 else torch.cat(contexts, dim=1)
        )  # (B, H, L, d_k)
        batch, heads, length, d_k = context.shape
        return self.linear_out(context.transpose(1, 2).reshape(batch, length, heads * d_k))

    @property
    def weightless_reason(self) -> str | None:
        """Why an evaluation forward keeps no weights in ``attn`` (ESPnet's attention plots read them)."""
        if any(isinstance(g, FullHeads) for g in self.groups):
            return None
        return "a Multiformer layer without Full heads keeps no weights"

    # ------------------------------------------------------------------ all groups in one attention call

    def _one_call(self, q, k, mask) -> bool:
        """Whether this forward takes ``_attention_in_one_call``: training self-attention over a padding
        mask (B, 1, T), every group Full (neither relaxed nor smooth focus), Local in the band form or Conv, more
        than one group, on a device of Local heads' dense band, for utterances of at most ``ONE_CALL_MAX_FRAMES``."""
        return (
            self.training
            and len(self.groups) > 1
            and mask is not None
            and mask.size(1) == 1  # a padding mask (B, 1, T), not per query (a causal one)
            and q.size(2) == k.size(2)
            and q.device.type in head_kinds.LOCAL_DENSE_DEVICES
            and q.size(2) <= ONE_CALL_MAX_FRAMES
            and not (self.relaxing or self.smooth_focus)
            and all(
                isinstance(g, (FullHeads, ConvHeads))
                or (isinstance(g, LocalHeads) and g.form == "band")
                for g in self.groups
            )
        )

    def _attention_in_one_call(self, q, k, v, mask):
        """Every group's heads through one fused attention call -> context (B, H, T, d_k).

        The keys are the T frames followed by each Conv group's T'_g compressed frames (at its heads; the
        other heads get zeros, or in the depthwise form their own frames compressed alike); the additive
        mask (``_one_call_mask``) shows each head the keys its kind sees: Full heads the real frames, Local
        heads their band, a Conv group's heads its compressed frames, every other key -inf, so each head's
        softmax is the one its own group computes. Per layer that is one attention kernel forward and one
        backward instead of one per group, on a GPU where these small layers cost launches, not
        arithmetic."""
        keys, values, conv_terms = [k], [v], []
        for group in self._groups_of(ConvHeads):
            if group.form == "depthwise":
                # its one convolution serves any number of heads: every head's K and V compressed, the
                # other heads' frames masked out; no slice of the group's heads and no padding back to
                # all heads, forward or backward (kernels that cost a launch-bound GPU more than the
                # arithmetic of a depthwise convolution over the other heads)
                kc, vc, terms, _ = group.compress(k, v, mask)
            else:  # a convolution per head of the group
                heads = slice(group.first, group.stop)
                kc, vc, terms, _ = group.compress(k[:, heads], v[:, heads], mask)
                at_heads = (0, 0, 0, 0, group.first, self.h - group.stop)  # pads the head dimension
                kc = torch.nn.functional.pad(kc, at_heads)
                vc = torch.nn.functional.pad(vc, at_heads)
            keys.append(kc)
            values.append(vc)
            conv_terms.append(terms)
        layout = tuple((g.head, g.first, g.stop, getattr(g, "form", None)) for g in self.groups)
        bias, zero_rows = head_kinds.MASK_TERMS.get(
            mask,
            ("one call", layout, q.size(2), q.dtype),
            lambda: self._one_call_mask(mask[:, -1].bool(), conv_terms, q.dtype),
        )
        drop = getattr(self.dropout, "p", 0.0) if self.training else 0.0
        context = torch.nn.functional.scaled_dot_product_attention(
            q, torch.cat(keys, dim=2), torch.cat(values, dim=2), attn_mask=bias, dropout_p=drop
        )
        return context.masked_fill(zero_rows, 0.0)

    def _one_call_mask(self, keep, conv_terms, dtype):
        """(additive mask (B, H, T, T + Σ T'_g) in ``dtype``, rows to zero (B, H, T, 1)) for
        ``_attention_in_one_call``; ``keep`` (B, T) the real frames, ``conv_terms`` each Conv group's
        ``conv_mask_terms``. A query that would see no key (an utterance without frames; a Conv group
        keeping none) is shown its group's keys and zeroed afterwards, as each group's own path does."""
        batch, length = keep.shape
        frames = keep.new_zeros(batch, self.h, length, length)
        zero_rows = keep.new_zeros(batch, self.h, length, 1)
        compressed = []
        conv = iter(conv_terms)
        for group in self.groups:
            heads = slice(group.first, group.stop)
            if isinstance(group, ConvHeads):  # its own additive mask and dead rows, -inf elsewhere
                *_, bias, dead = next(conv)
                segment = bias.new_full((batch, self.h, length, bias.size(-1)), -math.inf)
                segment[:, heads] = bias
                compressed.append(segment.to(dtype))
                zero_rows[:, heads] = dead
                continue
            if isinstance(group, LocalHeads):
                visible, empty = head_kinds.local_band(keep, group.window // 2, group.dilation)
            else:  # Full
                empty = ~keep.any(-1)[:, None, None, None]
                visible = keep[:, None, None, :] | empty
            frames[:, heads] = visible
            zero_rows[:, heads] = empty
        return aligned_cat([additive_mask(frames, dtype), *compressed]), zero_rows
