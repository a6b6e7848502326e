"""Smooth focus (Chorowski et al., 2015), the reference method of the relaxed-attention paper (A.3, eq. 4).

    g_t = σ(e_t) / Σ_{t'} σ(e_t')

The sigmoid replaces the unbounded exponential of the softmax, which compresses the weights (no key can
take much more than its share). The sum runs over the keys the query may see; masked keys get weight 0.
"""

from __future__ import annotations

import torch


def smooth_focus_weights(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Eq. (4) on ``scores`` (B, H, L, T); ``mask`` (B, 1|L, T), 1 = may attend, or None."""
    gates = torch.sigmoid(scores)
    if mask is not None:
        gates = gates.masked_fill(mask.unsqueeze(1).eq(0), 0.0)
    # σ > 0 everywhere, so the sum is 0 only for a query without visible keys: it keeps all-zero weights.
    return gates / gates.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(gates.dtype).tiny)
