"""Context vectors c_t of soft, hard and sharp attention, one small module per kind, all with one call:
``context(alpha, features, region_image, h_prev, greedy) -> StepContext``.

- soft (eq. 3): c_t = Σ_i α_ti x_i;
- hard (eq. 4): c_t = x_â, â drawn from α_t (argmax when ``greedy``);
- sharp (§2.3-2.5): the region â goes through the ``Sharpener`` (STN localisers + encoder) giving Z_t, and a
  combiner makes c_t of Z_t and x_â: ``pooling`` (mean of Z_t), ``chain`` ([mean Z_t; x_â]) or
  ``weighting`` (additive attention from h_{t-1} over {columns of Z_t, x_â}).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from espnet_ext.errors import ConfigError
from espnet_ext.nets.sharp.attention import AdditiveAttention, sample_regions
from espnet_ext.nets.sharp.sharpener import Sharpener


class StepContext(NamedTuple):
    context: torch.Tensor  # c_t (B, D)
    log_alpha: torch.Tensor | None  # log α_t(â) (B,) of the chosen region; None for soft attention
    patch: torch.Tensor | None  # sharpener output (B, 1, h, w); None unless sharp


def chosen_columns(features: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x_â (B, D) of features (B, M, D) at ``index`` (B,)."""
    return features[torch.arange(features.size(0), device=features.device), index]


class SoftContext(torch.nn.Module):
    needs_region_image = False

    def __init__(self, feature_dim: int):
        super().__init__()
        self.dim = feature_dim

    def forward(self, alpha, features, region_image, h_prev, greedy) -> StepContext:
        return StepContext(torch.bmm(alpha.unsqueeze(1), features).squeeze(1), None, None)


class HardContext(torch.nn.Module):
    needs_region_image = False

    def __init__(self, feature_dim: int):
        super().__init__()
        self.dim = feature_dim

    def forward(self, alpha, features, region_image, h_prev, greedy) -> StepContext:
        index, log_alpha = sample_regions(alpha, greedy)
        return StepContext(chosen_columns(features, index), log_alpha, None)


class PoolingCombiner(torch.nn.Module):
    """c_t = mean over the columns of Z_t."""

    def __init__(self, patch_dim: int, feature_dim: int, query_dim: int, attention_dim: int):
        super().__init__()
        self.dim = patch_dim

    def forward(self, columns, chosen, h_prev):
        return columns.mean(1)


class ChainCombiner(torch.nn.Module):
    """c_t = [mean Z_t; x_â] (the glimpse idea: fine and coarse views of the token)."""

    def __init__(self, patch_dim: int, feature_dim: int, query_dim: int, attention_dim: int):
        super().__init__()
        self.dim = patch_dim + feature_dim

    def forward(self, columns, chosen, h_prev):
        return torch.cat([columns.mean(1), chosen], -1)


class WeightingCombiner(torch.nn.Module):
    """c_t = Σ β_j v_j over {columns of Z_t, x_â}, β from additive attention with h_{t-1} (as eq. 7).

    The set needs one dimension: the paper's (512 = 512) needs nothing; narrower models whose encoder depth
    differs from 2 x lstm_units project Z's columns to x's dimension, the only case with an extra Linear.
    """

    def __init__(self, patch_dim: int, feature_dim: int, query_dim: int, attention_dim: int):
        super().__init__()
        self.dim = feature_dim
        self.patch_projection = (
            torch.nn.Linear(patch_dim, feature_dim) if patch_dim != feature_dim else None
        )
        self.weigh = AdditiveAttention(feature_dim, query_dim, attention_dim)

    def forward(self, columns, chosen, h_prev):
        if self.patch_projection is not None:
            columns = self.patch_projection(columns)
        items = torch.cat([columns, chosen.unsqueeze(1)], 1)
        weights = self.weigh(self.weigh.keys(items), h_prev)
        return torch.bmm(weights.unsqueeze(1), items).squeeze(1)


COMBINERS = {"pooling": PoolingCombiner, "chain": ChainCombiner, "weighting": WeightingCombiner}


class SharpContext(torch.nn.Module):
    needs_region_image = True

    def __init__(
        self,
        sharpener: Sharpener,
        context: str,
        feature_dim: int,
        query_dim: int,
        attention_dim: int,
    ):
        super().__init__()
        if context not in COMBINERS:
            raise ConfigError(
                f"unknown '{context}' ({', '.join(COMBINERS)})", key="model_conf.context"
            )
        self.sharpener = sharpener
        self.combine = COMBINERS[context](sharpener.out_dim, feature_dim, query_dim, attention_dim)
        self.dim = self.combine.dim

    def forward(self, alpha, features, region_image, h_prev, greedy) -> StepContext:
        index, log_alpha = sample_regions(alpha, greedy)
        patch, columns = self.sharpener(region_image, index)
        return StepContext(
            self.combine(columns, chosen_columns(features, index), h_prev), log_alpha, patch
        )
