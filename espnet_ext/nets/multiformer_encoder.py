"""The Multiformer encoder (thesis §4.1, Fig. 20) and fairseq's S2T Transformer encoder, for ESPnet2.

``S2TTransformerEncoder`` is ESPnet's ``TransformerEncoder`` with one more input layer, ``s2t_conv1d``
(fairseq's convolutional subsampler, ``espnet_ext.nets.s2t_conv1d_subsampler``); ESPnet's own input
layers (conv2d, linear, ...) stay available. ``MultiformerEncoder`` adds per-layer head kinds: its
``layers`` option lists blocks of identical layers in the thesis' notation
``N_layers x (N_heads x Kind(params))``::

    encoder: multiformer
    encoder_conf:
        attention_heads: 4
        layers:
            - {layers: 2, heads: ["4 x Conv(5, 2)"]}
            - {layers: 6, heads: ["2 x Local(64)", "2 x Conv(5, 2)"]}
            - "4 x (2 x Full, 2 x Conv(7, 3))"        # the same, as one string

Each layer is ESPnet's ``EncoderLayer`` (pre-norm, FFN, dropout, stochastic depth all ESPnet's) whose
``self_attn`` is a ``MultiHeadMultiAttention`` sharing the original Q/K/V/W_o parameters.
``attention_sites: {self_attn: {gamma: ...}}`` relaxes the Full heads (the other kinds have no softmax
over all keys to relax). ``conv_form`` (``dense``, default, or ``depthwise``: the thesis' code's one
depthwise convolution per group of Conv heads) and ``local_form`` (``band``, default: |i - j| ≤ w/2, or
``block``: the thesis' code's blocks of ⌊w/3⌋) choose the forms of ``espnet_ext.attention.head_kinds``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from espnet2.asr.encoder.transformer_encoder import TransformerEncoder

from espnet_ext.attention.multi_attention import (
    DEFAULT_REDRAW_INTERVAL,
    MultiHeadMultiAttention,
    check_forms,
    parse_layer_heads,
)
from espnet_ext.attention.sites import check_site_config
from espnet_ext.errors import ConfigError
from espnet_ext.nets.compiled_layers import compile_layers_of
from espnet_ext.nets.s2t_conv1d_subsampler import S2TConv1dSubsampler

S2T_INPUT_LAYER = "s2t_conv1d"
_BLOCK = re.compile(r"^\s*(\d+)\s*[x×*]\s*\((.*)\)\s*$")


def parse_blocks(blocks, n_heads: int, key: str = "encoder_conf.layers") -> list[list]:
    """Blocks (dicts ``{layers, heads}`` or strings ``"6 x (2 x Local(64), 2 x Conv(5,2))"``) ->
    one head-kind list per layer."""
    if isinstance(blocks, str) or not isinstance(blocks, Sequence) or not blocks:
        raise ConfigError("must be a non-empty list of blocks {layers: N, heads: [...]}", key=key)
    layers = []
    for index, block in enumerate(blocks):
        where = f"{key}[{index}]"
        if isinstance(block, str):
            match = _BLOCK.match(block)
            if not match:
                raise ConfigError(f"cannot read block {block!r}: write 'N x (<heads>)'", key=where)
            count, heads = int(match.group(1)), match.group(2)
        elif isinstance(block, Mapping):
            unknown = sorted(set(block) - {"layers", "heads"})
            if unknown or "layers" not in block or "heads" not in block:
                raise ConfigError(
                    f"a block has exactly the keys 'layers' and 'heads', got {sorted(block)}",
                    key=where,
                )
            count, heads = block["layers"], block["heads"]
            if not isinstance(count, int) or isinstance(count, bool):
                raise ConfigError(
                    f"layers must be an integer, got {count!r}", key=f"{where}.layers"
                )
        else:
            raise ConfigError(f"a block is a mapping or a string, got {block!r}", key=where)
        if count <= 0:
            raise ConfigError(f"layers must be > 0, got {count}", key=f"{where}.layers")
        kinds = parse_layer_heads(heads, n_heads, f"{where}.heads")
        layers.extend([kinds] * count)
    return layers


def _check_divisible(output_size: int, attention_heads: int) -> None:
    if attention_heads <= 0 or output_size % attention_heads:
        raise ConfigError(
            f"output_size {output_size} is not divisible by attention_heads {attention_heads}",
            key="encoder_conf.attention_heads",
        )


class S2TTransformerEncoder(TransformerEncoder):
    """ESPnet's Transformer encoder; ``input_layer: s2t_conv1d`` selects fairseq's S2T front end.

    Front-end options: ``conv_channels`` (1024), ``conv_kernel_sizes`` ([5, 5]), ``conv_strides``
    ([2, 2]; [1, 1] = no downsampling, thesis Anexo B). ``compile_layers: true`` compiles each layer
    with ``torch.compile`` (``compile_backend``, default inductor; ``espnet_ext.nets.compiled_layers``).
    """

    def __init__(
        self,
        input_size: int,
        output_size: int = 256,
        attention_heads: int = 4,
        input_layer: str | None = S2T_INPUT_LAYER,
        dropout_rate: float = 0.1,
        conv_channels: int = 1024,
        conv_kernel_sizes: Sequence[int] = (5, 5),
        conv_strides: Sequence[int] = (2, 2),
        compile_layers: bool = False,
        compile_backend: str = "inductor",
        **kwargs,
    ):
        _check_divisible(output_size, attention_heads)
        s2t = input_layer == S2T_INPUT_LAYER
        super().__init__(
            output_size if s2t else input_size,  # ESPnet's input layer is then the identity
            output_size=output_size,
            attention_heads=attention_heads,
            input_layer=None if s2t else input_layer,
            dropout_rate=dropout_rate,
            **kwargs,
        )
        self.subsample = None
        if s2t:
            self.subsample = S2TConv1dSubsampler(
                input_size,
                output_size,
                kwargs.get("positional_dropout_rate", dropout_rate),
                channels=conv_channels,
                kernel_sizes=conv_kernel_sizes,
                strides=conv_strides,
            )
        if compile_layers:  # traced at the first call: a subclass may still replace the attention
            compile_layers_of(self, self.encoders, compile_backend, "encoder_conf")

    def forward(self, xs_pad, ilens, prev_states=None, ctc=None, return_all_hs=False):
        if self.subsample is not None:
            xs_pad, ilens = self.subsample(xs_pad, ilens)
        return super().forward(xs_pad, ilens, prev_states, ctc=ctc, return_all_hs=return_all_hs)


class MultiformerEncoder(S2TTransformerEncoder):
    """S2T Transformer encoder whose layers' heads each have their own attention kind (MHMA)."""

    def __init__(
        self,
        input_size: int,
        layers: Sequence,
        attention_heads: int = 4,
        output_size: int = 256,
        num_blocks: int | None = None,
        attention_sites: Mapping | None = None,
        redraw_interval: int = DEFAULT_REDRAW_INTERVAL,
        conv_form: str = "dense",
        local_form: str = "band",
        **kwargs,
    ):
        _check_divisible(output_size, attention_heads)
        check_forms(conv_form, local_form, "encoder_conf")
        layer_heads = parse_blocks(layers, attention_heads)  # refuse bad configs before building
        if num_blocks is not None and num_blocks != len(layer_heads):
            raise ConfigError(
                f"num_blocks {num_blocks} differs from the {len(layer_heads)} layers of "
                "encoder_conf.layers (leave num_blocks out)",
                key="encoder_conf.num_blocks",
            )
        sites = check_site_config(attention_sites, ("self_attn",), "encoder multiformer")
        super().__init__(
            input_size,
            output_size=output_size,
            attention_heads=attention_heads,
            num_blocks=len(layer_heads),
            **kwargs,
        )
        for index, (layer, heads) in enumerate(zip(self.encoders, layer_heads)):
            layer.self_attn = MultiHeadMultiAttention.from_attention(
                layer.self_attn,
                heads,
                key=f"encoder_conf.layers (encoder layer {index})",
                redraw_interval=redraw_interval,
                conv_form=conv_form,
                local_form=local_form,
            )
        options = sites.get("self_attn")
        if options:
            if not any(h.kind == "full" for heads in layer_heads for h in heads):
                raise ConfigError(
                    "relaxed attention / smooth focus act on Full heads and no layer has one",
                    key="encoder_conf.attention_sites.self_attn",
                )
            for layer in self.encoders:
                layer.self_attn.configure(**options)

    def attention_layers(self) -> list[MultiHeadMultiAttention]:
        """The MHMA module of every encoder layer, in order (for analyses)."""
        return [layer.self_attn for layer in self.encoders]
