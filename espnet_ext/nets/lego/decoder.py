"""The LegoNN decoder (§III-B2): an ingestor (WEmb or BeamConv) + ESPnet's standard Transformer decoder.

The decoder is pre-LN (``normalize_before``: a LayerNorm before every residual block and one at the end,
§V). ``ingest`` turns the incoming interface distributions into the memory the decoder attends to; the
rest -- ``forward``, ``score``, ``batch_score`` for ESPnet's beam search -- is ESPnet's
``TransformerDecoder`` reading that memory, so decoding needs nothing new.
"""

from __future__ import annotations

import torch
from espnet2.asr.decoder.transformer_decoder import TransformerDecoder

from espnet_ext.errors import ConfigError
from espnet_ext.nets.lego.encoder import load_token_list
from espnet_ext.nets.lego.ingestors import build_ingestor


class LegoNNDecoder(TransformerDecoder):
    def __init__(
        self,
        vocab_size: int,
        encoder_output_size: int,
        ingestor: dict | None = None,
        interface_token_list: str | list[str] | None = None,
        attention_dim: int = 256,
        attention_heads: int = 4,
        linear_units: int = 1024,
        num_blocks: int = 6,
        dropout_rate: float = 0.1,
        positional_dropout_rate: float = 0.1,
        self_attention_dropout_rate: float = 0.0,
        src_attention_dropout_rate: float = 0.0,
        share_ingestor_embedding: bool = False,
    ):
        # ESPnet passes the interface vocabulary size as ``encoder_output_size``: the encoder's output
        # is a distribution over it.
        super().__init__(
            vocab_size,
            attention_dim,
            attention_heads=attention_heads,
            linear_units=linear_units,
            num_blocks=num_blocks,
            dropout_rate=dropout_rate,
            positional_dropout_rate=positional_dropout_rate,
            self_attention_dropout_rate=self_attention_dropout_rate,
            src_attention_dropout_rate=src_attention_dropout_rate,
            normalize_before=True,
        )
        self.interface_token_list = None
        if interface_token_list is not None:
            self.interface_token_list = load_token_list(
                interface_token_list, "decoder_conf.interface_token_list"
            )
            if len(self.interface_token_list) != encoder_output_size:
                raise ConfigError(
                    f"lists {len(self.interface_token_list)} tokens but the encoder emits "
                    f"distributions over {encoder_output_size}",
                    key="decoder_conf.interface_token_list",
                )
        conf = dict(ingestor or {"type": "wemb"})
        kind = conf.pop("type", "wemb")
        self.ingestor = build_ingestor(kind, encoder_output_size, attention_dim, **conf)
        if share_ingestor_embedding:
            if kind != "wemb" or encoder_output_size != vocab_size:
                raise ConfigError(
                    "shares the WEmb table with the decoder's token embedding, so it needs the wemb "
                    f"ingestor and an interface vocabulary equal to the output one ({kind}, "
                    f"{encoder_output_size} vs {vocab_size} tokens)",
                    key="decoder_conf.share_ingestor_embedding",
                )
            self.ingestor.share_embedding(self.embed[0])

    def ingest(
        self, log_probs: torch.Tensor, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Interface distributions (B, K, |V|) -> decoder memory (B, K, attention_dim)."""
        return self.ingestor(log_probs, lengths)
