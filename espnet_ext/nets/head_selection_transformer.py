"""ESPnet Transformer encoders/decoders whose self-attention selects H of H' heads per task.

Each class is the ESPnet (or our CNN-preprocessed, or S2T conv1d) module plus ``num_tasks``,
``head_candidates`` (H'), ``selection_strategy`` ("group" or "subset"), ``gumbel_temperature`` (τ; the
authors' 5.0 in the real configs), ``selection_logit_init`` ("spread", the default, or "zero"; see
``LOGIT_INITS``) and ``selection_inference_noise`` (false: the noise-free selection at inference; true:
Gumbel draws as the authors' selector); H is ``attention_heads``.
After ``super().__init__`` every layer's ``self_attn`` becomes a ``HeadSelectionAttention`` of the same
width and dropout. Source attention of the decoder stays shared (the paper selects in self-attention
only). Selection in the encoder, the decoder or both (Table 6) is the choice of encoder/decoder class.

The task ids reach the layers through ``set_task_id`` (``espnet_ext.attention.head_selection``); the
models of ``espnet_ext.nets.task_models`` call it from their ``forward``.
"""

from __future__ import annotations

from espnet2.asr.decoder.transformer_decoder import TransformerDecoder
from espnet2.asr.encoder.transformer_encoder import TransformerEncoder

from espnet_ext.attention.head_selection import (
    HeadSelectionAttention,
    check_selection_config,
    draw_together,
)
from espnet_ext.nets.cnn_transformer_encoder import CNNTransformerEncoder
from espnet_ext.nets.multiformer_encoder import S2TTransformerEncoder


def select_self_attention_heads(
    layers,
    num_tasks: int,
    head_candidates: int,
    strategy: str,
    temperature: float,
    logit_init: str,
    inference_noise: bool = False,
) -> None:
    """Replace ``self_attn`` of every layer by head selection over ``head_candidates`` heads."""
    for layer in layers:
        shared = layer.self_attn
        layer.self_attn = HeadSelectionAttention(
            shared.h,
            shared.h * shared.d_k,
            shared.dropout_rate,
            num_tasks,
            head_candidates,
            strategy,
            temperature,
            logit_init,
            inference_noise,
        )


def _selection_options(
    kwargs: dict, num_tasks, head_candidates, strategy, temperature, logit_init
) -> tuple:
    # fail on a bad config before ESPnet builds anything
    heads = kwargs.get("attention_heads", 4)
    check_selection_config(heads, head_candidates, strategy, temperature, logit_init)
    return num_tasks, head_candidates, strategy, temperature, logit_init


class _SelectsHeads:
    """Mixin before an ESPnet-style encoder or decoder class: the self-attention of its layers (the
    ``_selecting`` attribute) selects heads per task."""

    _selecting = "encoders"  # the attribute holding the layers

    def __init__(
        self,
        *args,
        num_tasks: int = 1,
        head_candidates: int = 8,
        selection_strategy: str = "group",
        gumbel_temperature: float = 1.0,
        selection_logit_init: str = "spread",
        selection_inference_noise: bool = False,
        **kwargs,
    ):
        options = (num_tasks, head_candidates, selection_strategy, gumbel_temperature)
        options = _selection_options(kwargs, *options, selection_logit_init)
        super().__init__(*args, **kwargs)
        layers = getattr(self, self._selecting)
        select_self_attention_heads(layers, *options, bool(selection_inference_noise))

    def forward(self, *args, **kwargs):
        # every layer's selection in one draw (draw_together); step-by-step decoding draws per layer
        with draw_together([layer.self_attn for layer in getattr(self, self._selecting)]):
            return super().forward(*args, **kwargs)


class HeadSelectionTransformerEncoder(_SelectsHeads, TransformerEncoder):
    pass


class HeadSelectionCNNTransformerEncoder(_SelectsHeads, CNNTransformerEncoder):
    pass


class HeadSelectionS2TTransformerEncoder(_SelectsHeads, S2TTransformerEncoder):
    """The paper's S2T Transformer (fairseq's conv1d sub-sampler, ``input_layer: s2t_conv1d``)."""


class HeadSelectionTransformerDecoder(_SelectsHeads, TransformerDecoder):
    _selecting = "decoders"
