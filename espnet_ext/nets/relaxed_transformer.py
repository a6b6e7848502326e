"""ESPnet Transformer encoders/decoders whose attention sites can be relaxed or use smooth focus.

Each class is the ESPnet (or our CNN-preprocessed) module plus one option, ``attention_sites`` (see
``espnet_ext.attention.sites``). The attention modules are swapped after ``super().__init__``, keeping
parameters and state-dict keys, so a checkpoint of the plain model loads into the relaxed one and back.
The decoder also takes ``use_sdpa``, the option ESPnet's MultiHeadedAttention has and its
TransformerDecoder does not pass on: its attention through PyTorch's fused ``scaled_dot_product_attention``
(no weights kept: ``num_att_plot: 0``; a relaxed site computes its own weights while it relaxes).
"""

from __future__ import annotations

from collections.abc import Mapping

from espnet2.asr.decoder.transformer_decoder import TransformerDecoder
from espnet2.asr.encoder.transformer_encoder import TransformerEncoder

from espnet_ext.attention.sites import check_site_config, configure_attention_sites
from espnet_ext.nets.cnn_transformer_encoder import CNNTransformerEncoder
from espnet_ext.nets.compiled_layers import compile_layers_of

ENCODER_SITES = ("self_attn",)
DECODER_SITES = ("self_attn", "src_attn")


def _prepare(sites: Mapping | None, available, owner: str, kwargs: dict) -> dict:
    checked = check_site_config(sites, available, owner)  # fail before building anything
    if checked:
        kwargs.setdefault("use_flash_attn", False)  # flash-attn cannot change the weights
    return checked


class RelaxedTransformerEncoder(TransformerEncoder):
    def __init__(self, input_size: int, attention_sites: Mapping | None = None, **kwargs):
        sites = _prepare(attention_sites, ENCODER_SITES, "encoder relaxed_transformer", kwargs)
        super().__init__(input_size, **kwargs)
        configure_attention_sites(self.encoders, sites)


class RelaxedCNNTransformerEncoder(CNNTransformerEncoder):
    def __init__(self, input_size: int, attention_sites: Mapping | None = None, **kwargs):
        sites = _prepare(attention_sites, ENCODER_SITES, "encoder relaxed_cnn_transformer", kwargs)
        super().__init__(input_size, **kwargs)
        configure_attention_sites(self.encoders, sites)


class RelaxedTransformerDecoder(TransformerDecoder):
    """``compile_layers: true`` compiles each layer with ``torch.compile`` (``compile_backend``, default
    inductor; ``espnet_ext.nets.compiled_layers``); step-by-step decoding traces its first few lengths."""

    def __init__(
        self,
        vocab_size: int,
        encoder_output_size: int,
        attention_sites: Mapping | None = None,
        compile_layers: bool = False,
        compile_backend: str = "inductor",
        use_sdpa: bool = False,
        **kwargs,
    ):
        sites = _prepare(attention_sites, DECODER_SITES, "decoder relaxed_transformer", kwargs)
        super().__init__(vocab_size, encoder_output_size, **kwargs)
        # ESPnet's constructor option of the attention modules its decoder builds without it
        for layer in self.decoders:
            for site in DECODER_SITES:
                getattr(layer, site).use_sdpa = use_sdpa
        configure_attention_sites(self.decoders, sites)
        if compile_layers:
            compile_layers_of(self, self.decoders, compile_backend, "decoder_conf")
