"""Ingestors of an incoming sequence of distributions (§III-B2).

WEmb (eqs. 20-21), differentiable end to end:

    h_{1:K} = Conv1D_RF(P^{V(i-1)}_{1:K});  h = h + PE(h);  h = TransformerEncoder(h)

with RF = 1 this is the expected embedding P W_Emb, W_Emb in R^{|V| x d}; a wider (odd) receptive field
learns local confusion patterns of the previous module.

BeamConv (eqs. 22-26), gradient-isolated: the indices of the p most probable tokens per position (an
integer bottleneck, so no gradient reaches the previous module) are embedded, r in R^{K x p x e},
concatenated over the beam and aggregated by a 1-D convolution to d, then positions and Transformer
layers as above. The convolution's input width is p * e, so the beam size is part of the trained weights:
loading them with another beam size is refused.
"""

from __future__ import annotations

import torch

from espnet_ext.errors import ConfigError
from espnet_ext.nets.lego.layers import TransformerStack, length_mask, sinusoidal_positions


def check_receptive_field(receptive_field: int) -> int:
    if receptive_field < 1 or receptive_field % 2 == 0:
        raise ConfigError(
            f"must be an odd integer >= 1 (keeps the K positions), not {receptive_field}",
            key="ingestor.receptive_field",
        )
    return receptive_field


def conv_over_positions(conv: torch.nn.Conv1d, x: torch.Tensor, valid: torch.Tensor):
    """(B, K, C) -> (B, K, d): padded positions are zeroed first so they leak into no neighbour."""
    x = x.masked_fill(~valid.transpose(1, 2), 0.0)
    return conv(x.transpose(1, 2)).transpose(1, 2)


class _Ingestor(torch.nn.Module):
    """Positions (eq. 20/25) and Transformer layers (eq. 21/26) shared by both ingestors."""

    def __init__(
        self,
        vocab_size: int,
        dim: int,
        receptive_field: int,
        num_blocks: int,
        attention_heads: int,
        linear_units: int,
        dropout_rate: float,
        attention_dropout_rate: float,
    ):
        super().__init__()
        self.vocab_size = vocab_size
        self.dim = dim
        self.receptive_field = check_receptive_field(receptive_field)
        self.encoder = TransformerStack(
            dim, num_blocks, attention_heads, linear_units, dropout_rate, attention_dropout_rate
        )

    def output_size(self) -> int:
        return self.dim

    def check_vocab(self, log_probs: torch.Tensor) -> None:
        if log_probs.size(-1) != self.vocab_size:
            raise ConfigError(
                f"the ingestor reads distributions over {self.vocab_size} tokens, "
                f"the incoming module emits {log_probs.size(-1)}",
                key="ingestor.vocab_size",
            )

    def encode(self, h: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        h = h + sinusoidal_positions(h.size(1), self.dim, h.device)
        return self.encoder(h, valid)

    def forward(
        self, log_probs: torch.Tensor, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``log_probs`` (B, K, |V|) of the previous module -> (B, K, d), lengths unchanged."""
        self.check_vocab(log_probs)
        valid = length_mask(lengths, log_probs.size(1))
        return self.encode(self.embed(log_probs, valid), valid), lengths


class WEmbIngestor(_Ingestor):
    def __init__(
        self,
        vocab_size: int,
        dim: int,
        receptive_field: int = 1,
        num_blocks: int = 3,
        attention_heads: int = 4,
        linear_units: int = 1024,
        dropout_rate: float = 0.1,
        attention_dropout_rate: float = 0.1,
    ):
        super().__init__(
            vocab_size,
            dim,
            receptive_field,
            num_blocks,
            attention_heads,
            linear_units,
            dropout_rate,
            attention_dropout_rate,
        )
        # Eq. (20): W_Emb is the kernel; no bias, so RF = 1 is exactly the expected embedding.
        self.weighted_embedding = torch.nn.Conv1d(
            vocab_size, dim, receptive_field, padding=receptive_field // 2, bias=False
        )
        # W_Emb is an embedding table (§V shares it with token tables): entries of variance 1, as a token
        # table after the usual sqrt(d) scale, split over the RF taps. A convolution's default init
        # (bound 1/sqrt(|V| RF)) would leave the content ~10x below the positions added next.
        torch.nn.init.normal_(self.weighted_embedding.weight, std=receptive_field**-0.5)

    def embed(self, log_probs: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        # In float32 also under autocast: the gradient to the previous module's log-probabilities is
        # P ∘ (W_Emb ∂h), of which the previous module's softmax keeps only the part that differs across
        # the vocabulary; half-precision products of W_Emb would bury it in rounding.
        with torch.autocast(log_probs.device.type, enabled=False):
            probs = log_probs.float().exp()
            if self.weighted_embedding is None:  # RF = 1 with a shared table: P W_Emb
                probs = probs.masked_fill(~valid.transpose(1, 2), 0.0)
                return probs @ self.shared_embedding.weight.float()
            return conv_over_positions(self.weighted_embedding, probs, valid)

    def share_embedding(self, embedding: torch.nn.Embedding) -> None:
        """Use ``embedding`` (|V| x d, e.g. the decoder's token table) as W_Emb, as §V shares input
        embedding tables where the vocabularies agree. Only RF = 1 is a plain table."""
        if self.receptive_field != 1:
            raise ConfigError(
                f"a shared embedding table is W_Emb only at receptive field 1, not {self.receptive_field}",
                key="ingestor.receptive_field",
            )
        if tuple(embedding.weight.shape) != (self.vocab_size, self.dim):
            raise ConfigError(
                f"the table is {tuple(embedding.weight.shape)}, the ingestor needs "
                f"({self.vocab_size}, {self.dim})",
                key="share_ingestor_embedding",
            )
        self.weighted_embedding = None
        self.shared_embedding = embedding


def top_p_indices(log_probs: torch.Tensor, beam_size: int) -> torch.Tensor:
    """Eq. (22): (B, K, p) indices of the p most probable tokens, best first; integers carry no gradient."""
    return torch.topk(log_probs.detach(), beam_size, dim=-1).indices


class BeamConvIngestor(_Ingestor):
    def __init__(
        self,
        vocab_size: int,
        dim: int,
        beam_size: int = 5,
        embed_dim: int = 300,
        receptive_field: int = 1,
        num_blocks: int = 3,
        attention_heads: int = 4,
        linear_units: int = 1024,
        dropout_rate: float = 0.1,
        attention_dropout_rate: float = 0.1,
    ):
        super().__init__(
            vocab_size,
            dim,
            receptive_field,
            num_blocks,
            attention_heads,
            linear_units,
            dropout_rate,
            attention_dropout_rate,
        )
        if not 1 <= beam_size <= vocab_size:
            raise ConfigError(
                f"must be in [1, {vocab_size}] (the incoming vocabulary), not {beam_size}",
                key="ingestor.beam_size",
            )
        self.beam_size = beam_size
        # A float: ESPnet's n-best averaging divides float tensors by n but sums integer ones, so an
        # integer here would read n x the beam size in an averaged model.
        self.register_buffer("trained_beam_size", torch.tensor(float(beam_size)))
        self.token_embedding = torch.nn.Embedding(vocab_size, embed_dim)  # eq. (23)
        self.beam_conv = torch.nn.Conv1d(  # eq. (24)
            beam_size * embed_dim, dim, receptive_field, padding=receptive_field // 2
        )

    def embed(self, log_probs: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        r = self.token_embedding(top_p_indices(log_probs, self.beam_size))  # (B, K, p, e)
        return conv_over_positions(self.beam_conv, r.flatten(2), valid)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        trained = state_dict.get(prefix + "trained_beam_size")
        if trained is not None and round(float(trained)) != self.beam_size:
            raise ConfigError(
                f"these BeamConv weights were trained with beam size {round(float(trained))}; the "
                "convolution "
                f"reads p * embed_dim inputs, so beam size {self.beam_size} cannot use them",
                key="ingestor.beam_size",
            )
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


INGESTORS = {"wemb": WEmbIngestor, "beamconv": BeamConvIngestor}


def build_ingestor(kind: str, vocab_size: int, dim: int, **conf) -> _Ingestor:
    if kind not in INGESTORS:
        raise ConfigError(f"unknown ingestor {kind!r}; one of {sorted(INGESTORS)}", key="ingestor")
    return INGESTORS[kind](vocab_size, dim, **conf)
