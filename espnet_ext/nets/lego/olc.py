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

Two options for small data, both off by default (= the equations as written). Measured on the Europarl mini
phoneme recogniser (egs/europarl/asr1/RESULTS.md, 150 updates): with neither, the OLC held it at 43.0 % phone
error where the same encoder without an OLC reached 2.1 %; with both, 1.1 %; either alone, 28.5 / 46.4 %.

- ``query_scale`` s: eq. (15)'s queries times s. The queries start the OLC's residual stream, and at
  initialisation the sinusoids are about ten times the cross-attention's content, so the CTC layer reads
  mostly "position"; s = 0.1 lets content dominate from the start. The queries of eq. (16)-(18) see
  LayerNorm(h), so s changes the residual balance only.
- ``alignment_prior`` sigma: eq. (18)'s scores plus w_h * log N(t; c_k, (sigma * T/K)^2) (up to a constant),
  c_k = (k + 1/2) T/K - 1/2 the centre of query k's span of the input, per utterance and head h, w_h
  learnable from 1. Positional queries must otherwise learn to find their span in states that carry
  little position information (ESPnet's subsampling adds it at 1/sqrt(d) of the content).
"""

from __future__ import annotations

import math

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


def olc_length(input_length: int, ratio: float, max_length: int) -> int:
    """``olc_lengths`` of one length given as a Python integer (the same double arithmetic)."""
    return min(max_length, max(1, math.ceil(input_length * ratio - 1e-6)))


def smallest_safe_ratio(input_lengths: torch.Tensor, needed: torch.Tensor) -> float:
    """The smallest K/T with ceil(ratio * T) >= needed for every utterance (§III-B1b's "most
    accommodating ratio" from training data): max over utterances of needed / T."""
    return float((needed.double() / input_lengths.double()).max())


def too_short(input_lengths, needed, ratio: float, max_length: int) -> torch.Tensor:
    """(N,) True where this ratio and maximum leave K below what the CTC target needs."""
    return olc_lengths(input_lengths, ratio, max_length) < needed


def alignment_prior(
    in_lengths: torch.Tensor, out_lengths: torch.Tensor, k_max: int, t_max: int, sigma: float
) -> torch.Tensor:
    """(B, 1, K, T) log-prior -((t - c_k) / (sigma T/K))^2 / 2 of the module doc, per utterance."""
    span = in_lengths.double() / out_lengths.double()  # (B,) input frames per query
    centre = (torch.arange(k_max, device=span.device) + 0.5) * span[:, None] - 0.5  # (B, K)
    width = sigma * span  # (B,)
    frames = torch.arange(t_max, device=span.device)
    distance = (frames[None, None, :] - centre[:, :, None]) / width[:, None, None]  # (B, K, T)
    return (-0.5 * distance.pow(2)).unsqueeze(1).float()


class AlignmentPriorAttention(MultiHeadedAttention):
    """Eq. (18)'s cross-attention with ``prior`` (set by the OLC around each call) added to its scores,
    times a learnable weight per head, where ESPnet masks and normalises them (``forward_attention``)."""

    def __init__(self, n_head: int, n_feat: int, dropout_rate: float):
        super().__init__(n_head, n_feat, dropout_rate)
        self.prior_weight = torch.nn.Parameter(torch.ones(n_head))
        self.prior: torch.Tensor | None = None

    def forward_attention(self, value, scores, mask):
        if self.prior is None:
            return super().forward_attention(value, scores, mask)
        # Far from a query's span the log-prior is large and negative next to content scores of order 1,
        # and the softmax's gradient lives in their small differences: under autocast the scores arrive
        # in half precision, so scores, prior, softmax and the weighted sum run in float32.
        with torch.autocast(value.device.type, enabled=False):
            scores = (
                scores.float() + self.prior_weight.float().view(1, -1, 1, 1) * self.prior.float()
            )
            return super().forward_attention(value.float(), scores, mask)


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
        query_scale: float = 1.0,
        alignment_prior: float = 0.0,
    ):
        super().__init__()
        if not query_scale > 0:
            raise ConfigError(f"must be > 0, not {query_scale}", key="olc.query_scale")
        if alignment_prior < 0:
            raise ConfigError(
                f"the prior's width sigma must be > 0 (0: no prior), not {alignment_prior}",
                key="olc.alignment_prior",
            )
        self.query_scale = float(query_scale)
        self.alignment_prior = float(alignment_prior)
        if not ratio > 0:
            raise ConfigError(f"the OLC ratio K/T must be > 0, not {ratio}", key="olc.ratio")
        if max_length < 1:
            raise ConfigError(f"must be >= 1, not {max_length}", key="olc.max_length")
        self.ratio = float(ratio)
        self.max_length = int(max_length)
        self.dim = dim
        self.learnable_pe = torch.nn.Embedding(self.max_length, dim)
        torch.nn.init.normal_(self.learnable_pe.weight, std=dim**-0.5)
        cross_attention = AlignmentPriorAttention if alignment_prior else MultiHeadedAttention
        self.blocks = torch.nn.ModuleList(
            DecoderLayer(
                dim,
                MultiHeadedAttention(attention_heads, dim, attention_dropout_rate),
                cross_attention(attention_heads, dim, attention_dropout_rate),
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
        """Eq. (15): (k, dim) positional queries (times ``query_scale``)."""
        # the table's first k rows: a slice, whose backward is a copy (a lookup's is a scatter-add)
        queries = sinusoidal_positions(k, self.dim, device) + self.learnable_pe.weight[:k]
        return queries if self.query_scale == 1.0 else self.query_scale * queries

    def forward(
        self, states: torch.Tensor, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``states`` (B, T, dim) with ``lengths`` (B,) -> (B, K_max, dim) and K (B,).

        K_max is K of the padded length T, known on the host (K of the longest utterance would have to
        be read back from the device); it is the longest K when, as in ESPnet's batches, the longest
        utterance fills T, and otherwise adds padded queries only."""
        out_lengths = self.output_lengths(lengths)
        k_max = olc_length(states.size(1), self.ratio, self.max_length)
        h = self.queries(k_max, states.device).unsqueeze(0).expand(states.size(0), -1, -1)
        query_mask = length_mask(out_lengths, k_max)
        memory_mask = length_mask(lengths, states.size(1))
        prior = None
        if self.alignment_prior:
            prior = alignment_prior(
                lengths, out_lengths, k_max, states.size(1), self.alignment_prior
            )
        for block in self.blocks:
            block.src_attn.prior = prior
            try:
                h, _, _, _ = block(h, query_mask, states, memory_mask)
            finally:
                block.src_attn.prior = None
        return self.after_norm(h), out_lengths
