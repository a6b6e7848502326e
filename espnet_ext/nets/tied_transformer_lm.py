"""Transformer LM with shared input/output embedding (relaxed-attention paper, A.3.3).

ESPnet2's ``TransformerLM`` (decoder blocks without cross attention, i.e. a causal self-attention stack)
has separate input embedding and output projection; the paper's LMs share them. Everything else, including
batch scoring for ESPnet's beam search (shallow fusion), is ESPnet's.
"""

from espnet2.lm.transformer_lm import TransformerLM

from espnet_ext.errors import ConfigError


class TiedTransformerLM(TransformerLM):
    def __init__(
        self,
        vocab_size: int,
        embed_unit: int = 512,
        att_unit: int = 512,
        tie_weights: bool = True,
        **kwargs,
    ):
        super().__init__(vocab_size, embed_unit=embed_unit, att_unit=att_unit, **kwargs)
        if tie_weights:
            if embed_unit != att_unit:
                raise ConfigError(
                    f"tie_weights needs embed_unit == att_unit (got {embed_unit} and {att_unit}): "
                    "the output projection reuses the embedding matrix"
                )
            self.decoder.weight = self.embed.weight
