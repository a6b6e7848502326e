"""fairseq's utterance CMVN as an ESPnet2 normalisation (``normalize: utterance_cmvn``).

Per utterance and feature dimension over its own frames: y = (x - mean) / sqrt(max(var, 1e-10)), var the
population variance (fairseq ``data/audio/feature_transforms/utterance_cmvn.py``, the transform of its
MuST-C and mTEDx S2T recipes, which the Multiformer and head-selection papers follow). Padded frames stay 0.

ESPnet's ``utterance_mvn`` with ``norm_vars: true`` is not this on a padded batch: after subtracting the
mean its padded frames hold -mean and enter the variance (espnet2/layers/utterance_mvn.py), so every
utterance shorter than the batch's longest gets a larger std.

Order: ESPnet's models normalise after SpecAugment (``ESPnetASRModel.encode``), fairseq before it, so here the
masked bands (0 in the log-mel domain) enter the utterance's statistics; fairseq's masks sit at the mean.
"""

from __future__ import annotations

import torch
from espnet2.layers.abs_normalize import AbsNormalize


class UtteranceCMVN(AbsNormalize):
    def __init__(self, min_var: float = 1.0e-10):
        super().__init__()
        self.min_var = min_var

    def extra_repr(self) -> str:
        return f"min_var={self.min_var}"

    def forward(
        self, x: torch.Tensor, ilens: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``x`` (B, T, D), ``ilens`` (B,) -> normalised (B, T, D) with padded frames 0, ``ilens``."""
        if ilens is None:
            ilens = x.new_full([x.size(0)], x.size(1), dtype=torch.long)
        valid = torch.arange(x.size(1), device=x.device)[None, :] < ilens.to(x.device)[:, None]
        valid = valid.unsqueeze(-1).to(x.dtype)  # (B, T, 1)
        n = valid.sum(1, keepdim=True).clamp(min=1.0)
        mean = (x * valid).sum(1, keepdim=True) / n
        var = ((x - mean).pow(2) * valid).sum(1, keepdim=True) / n
        return (x - mean) / var.clamp(min=self.min_var).sqrt() * valid, ilens
