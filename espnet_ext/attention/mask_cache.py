"""Values derived from a padding mask, computed once per forward instead of once per layer.

Every layer of an ESPnet encoder (or decoder) forward receives the same mask tensor object. What a layer
derives from it alone (a Local head's band, a Conv head's compressed mask, FlexAttention's block mask,
relaxed attention's uniform term) is the same in every layer, and computing it again costs each layer a
handful of small kernels, which on a GPU at a real batch cost more than the arithmetic. ``PerMask`` keeps
such values for the few mask tensors last seen (a decoder layer alternates its self-attention mask and the
encoder's):

    BLOCK_MASKS = PerMask()
    block_mask = BLOCK_MASKS.get(mask, ("band", half), lambda: create_block_mask(...))

The cache holds the mask tensors themselves, so their identities cannot be reused by another batch's masks
while cached, and it compares each tensor's in-place version, so a mask changed in place is seen. One cache
per thread: ``torch.nn.DataParallel`` runs the replicas' forwards in threads, each with its own masks.
Tensors made under ``torch.inference_mode`` have no version counter: their values are not cached. Under
``torch.compile`` nothing is cached either: a compiled layer computes the values inside its graph.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import torch


class PerMask(threading.local):
    """Values keyed by (a mask tensor, key) for the ``size`` mask tensors last seen; ``compute`` on a miss."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        # id(mask) -> (mask, its version when cached, {key: value}); oldest first
        self.masks: dict[int, tuple[torch.Tensor, int, dict[Hashable, Any]]] = {}

    def get(self, mask: torch.Tensor | None, key: Hashable, compute: Callable[[], Any]) -> Any:
        # nothing to key on; no version counter to compare; a compiled layer computes them in its graph
        if mask is None or torch.compiler.is_compiling() or mask.is_inference():
            return compute()
        entry = self.masks.pop(id(mask), None)  # re-inserted last: the most recent
        if entry is None or entry[1] != mask._version:
            entry = (mask, mask._version, {})
        self.masks[id(mask)] = entry
        while len(self.masks) > self.size:
            del self.masks[next(iter(self.masks))]
        values = entry[2]
        if key not in values:
            values[key] = compute()
        return values[key]

    def clear(self) -> None:
        self.masks = {}


# PyTorch's memory-efficient attention (CUDA) copies an additive mask whose strides are not multiples of 8
# elements into padded rows, in every call (``preprocess_mask`` in aten's attention): a copy of the mask per
# layer. The masks made here are views of rows already padded to such a length.
BIAS_ALIGNMENT = 8


def aligned_empty(shape: Sequence[int], dtype: torch.dtype, device) -> torch.Tensor:
    """An uninitialised tensor of ``shape`` whose strides are multiples of ``BIAS_ALIGNMENT`` but the
    last one (1): the first ``shape[-1]`` columns of rows padded to a multiple of it (outside compiled
    graphs: the padded length of a symbolic one would be a guard on its value)."""
    *rows, width = shape
    if torch.compiler.is_compiling():  # a compiled graph's lengths are symbolic: no padding of them
        return torch.empty(shape, dtype=dtype, device=device)
    padded = -(-width // BIAS_ALIGNMENT) * BIAS_ALIGNMENT
    return torch.empty((*rows, padded), dtype=dtype, device=device)[..., :width]


def additive_mask(visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean attention mask as the additive one PyTorch's fused attention turns it into (0 where
    visible, -inf elsewhere) in ``dtype``: made once per padding mask instead of by every layer's call,
    in aligned rows (``aligned_empty``)."""
    bias = aligned_empty(visible.shape, dtype, visible.device).zero_()
    return bias.masked_fill_(~visible, -math.inf)


def aligned_cat(parts: Sequence[torch.Tensor]) -> torch.Tensor:
    """``torch.cat(parts, dim=-1)`` in aligned rows (``aligned_empty``)."""
    width = sum(part.size(-1) for part in parts)
    out = aligned_empty((*parts[0].shape[:-1], width), parts[0].dtype, parts[0].device)
    start = 0
    for part in parts:
        out[..., start : start + part.size(-1)] = part
        start += part.size(-1)
    return out
