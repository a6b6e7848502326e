"""Shared building blocks: sinusoidal positions and pre-LN Transformer encoder stacks (ESPnet's layers)."""

from __future__ import annotations

import math

import torch
from espnet.nets.pytorch_backend.transformer.attention import MultiHeadedAttention
from espnet.nets.pytorch_backend.transformer.encoder_layer import EncoderLayer
from espnet.nets.pytorch_backend.transformer.layer_norm import LayerNorm
from espnet.nets.pytorch_backend.transformer.positionwise_feed_forward import (
    PositionwiseFeedForward,
)


def sinusoidal_positions(length: int, dim: int, device=None) -> torch.Tensor:
    """(length, dim): PE[k, 2i] = sin(k / 10000^(2i/dim)), PE[k, 2i+1] = cos(same), Vaswani et al."""
    position = torch.arange(length, dtype=torch.float32, device=device)[:, None]
    inv_freq = torch.exp(
        torch.arange(0, dim, 2, dtype=torch.float32, device=device) * (-math.log(10000.0) / dim)
    )
    pe = torch.zeros(length, dim, device=device)
    pe[:, 0::2] = torch.sin(position * inv_freq)
    pe[:, 1::2] = torch.cos(position * inv_freq)[:, : dim // 2]
    return pe


def length_mask(lengths: torch.Tensor, max_length: int) -> torch.Tensor:
    """(B,) lengths -> (B, 1, max_length) bool, True at valid positions (ESPnet's mask convention)."""
    steps = torch.arange(max_length, device=lengths.device)
    return (steps[None, :] < lengths[:, None])[:, None, :]


class TransformerStack(torch.nn.Module):
    """``num_blocks`` pre-LN self-attention blocks (eqs. 12-14) followed by a final LayerNorm."""

    def __init__(
        self,
        dim: int,
        num_blocks: int,
        attention_heads: int = 4,
        linear_units: int = 1024,
        dropout_rate: float = 0.1,
        attention_dropout_rate: float = 0.0,
    ):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            EncoderLayer(
                dim,
                MultiHeadedAttention(attention_heads, dim, attention_dropout_rate),
                PositionwiseFeedForward(dim, linear_units, dropout_rate),
                dropout_rate,
                normalize_before=True,
            )
            for _ in range(num_blocks)
        )
        self.after_norm = LayerNorm(dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``x`` (B, T, dim), ``mask`` (B, 1, T) -> (B, T, dim)."""
        for block in self.blocks:
            x, mask = block(x, mask)
        return self.after_norm(x)
