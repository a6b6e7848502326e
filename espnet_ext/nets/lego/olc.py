"""Output Length Controller (§III-B1b, eqs. 15-19).

K positional queries attend to themselves and to the modality encoder's T states:

    h^PE_{1:K} = SinusoidalPE(1:K) + LearnablePE(1:K)                      (15)
    h̃^PE = LayerNorm(h^PE);  h^PE = h^PE + MHA(h̃^PE, h̃^PE_{1:K}, h̃^PE_{1:K})  (16, 17)
    h^PE = h^PE + MHA(LayerNorm(h^PE), X_{1:T}, X_{1:T})                   (18)
    h^PE = h^PE + FFN(LayerNorm(h^PE))                                     (19)

then a final LayerNorm. K = min(max_length, max(1, ceil(ratio * T))) per utterance: ``ratio`` > 1
up-samples, < 1 down-samples, by any fractional factor (the paper's "reduce by 1.2" is ratio = 1/1.2).
One block of eqs. 16-19 is exactly a pre-LN Transformer decoder layer without the causal mask, so ESPnet's
``DecoderLayer`` runs it with the queries' padding mask.
"""

from __future__ import annotations

import torch
from espnet.nets.pytorch_backend.transformer.attention import MultiHeadedAttention
from espnet.nets.pytorch_backend.transformer.decoder_layer import DecoderLayer
from espnet.nets.pytorch_backend.transformer.layer_norm import LayerNorm
from espnet.nets.pytorch_backend.transformer.positionwise_feed_forward import (
    PositionwiseFeedForward,
)

from espnet_ext.errors import ConfigError
from espnet_ext.nets.lego.layers import length_mask, sinusoidal_positions


def olc_lengths(input_lengths: torch.Tensor, ratio: float, max_length: int) -> torch.Tensor:
    """(B,) K = min(max_length, max(1, ceil(ratio * T))); float noise (1.2 * 10 = 12.000...02) ignored."""
    scaled = torch.ceil(input_lengths.double() * ratio - 1e-6).long()
    return scaled.clamp(min=1, max=max_length)


def smallest_safe_ratio(input_lengths: torch.Tensor, needed: torch.Tensor) -> float:
    """The smallest K/T with ceil(ratio * T) >= needed for every utterance (§III-B1b's "most
    accommodating ratio" from training data): max over utterances of needed / T."""
    return float((needed.double() / input_lengths.double()).max())


def too_short(input_lengths, needed, ratio: float, max_length: int) -> torch.Tensor:
    """(N,) True where this ratio and maximum leave K below what the CTC target needs."""
    return olc_lengths(input_lengths, ratio, max_length) < needed


class OutputLengthController(torch.nn.Module):
    def __init__(
        self,
        dim: int,
        ratio: float,
        max_length: int = 1024,
        num_blocks: int = 1,
        attention_heads: int = 4,
        linear_units: int = 1024,
        dropout_rate: float = 0.1,
        attention_dropout_rate: float = 0.0,
    ):
        super().__init__()
        if not ratio > 0:
            raise ConfigError(f"the OLC ratio K/T must be > 0, not {ratio}", key="olc.ratio")
        if max_length < 1:
            raise ConfigError(f"must be >= 1, not {max_length}", key="olc.max_length")
        self.ratio = float(ratio)
        self.max_length = int(max_length)
        self.dim = dim
        self.learnable_pe = torch.nn.Embedding(self.max_length, dim)
        torch.nn.init.normal_(self.learnable_pe.weight, std=dim**-0.5)
        self.blocks = torch.nn.ModuleList(
            DecoderLayer(
                dim,
                MultiHeadedAttention(attention_heads, dim, attention_dropout_rate),
                MultiHeadedAttention(attention_heads, dim, attention_dropout_rate),
                PositionwiseFeedForward(dim, linear_units, dropout_rate),
                dropout_rate,
                normalize_before=True,
            )
            for _ in range(num_blocks)
        )
        self.after_norm = LayerNorm(dim)

    def output_lengths(self, input_lengths: torch.Tensor) -> torch.Tensor:
        return olc_lengths(input_lengths, self.ratio, self.max_length)

    def queries(self, k: int, device) -> torch.Tensor:
        """Eq. (15): (k, dim) positional queries."""
        positions = torch.arange(k, device=device)
        return sinusoidal_positions(k, self.dim, device) + self.learnable_pe(positions)

    def forward(
        self, states: torch.Tensor, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``states`` (B, T, dim) with ``lengths`` (B,) -> (B, K_max, dim) and K (B,)."""
        out_lengths = self.output_lengths(lengths)
        k_max = int(out_lengths.max())
        h = self.queries(k_max, states.device).unsqueeze(0).expand(states.size(0), -1, -1)
        query_mask = length_mask(out_lengths, k_max)
        memory_mask = length_mask(lengths, states.size(1))
        for block in self.blocks:
            h, _, _, _ = block(h, query_mask, states, memory_mask)
        return self.after_norm(h), out_lengths
