"""Transformer encoder with a 3x3 CNN preprocessing block (the paper's four layers, or any stride stack).

Everything but the input layer is ESPnet's ``TransformerEncoder``, so configs, checkpoints and the
attention modules (which the relaxed-attention variants replace) stay ESPnet's.
"""

from collections.abc import Sequence

from espnet.nets.pytorch_backend.transformer.embedding import PositionalEncoding
from espnet2.asr.encoder.transformer_encoder import TransformerEncoder

from espnet_ext.nets.cnn_subsampling import Conv2dSubsampling4Layer


class CNNTransformerEncoder(TransformerEncoder):
    def __init__(
        self,
        input_size: int,
        output_size: int = 256,
        dropout_rate: float = 0.1,
        positional_dropout_rate: float = 0.1,
        conv_channels: Sequence[int] = (64, 64, 128, 128),
        conv_strides: Sequence[int] = (1, 2, 1, 2),
        **kwargs,
    ):
        if "input_layer" in kwargs:
            raise ValueError(
                "cnn_transformer has a fixed input layer; use encoder 'transformer' to choose one"
            )
        super().__init__(
            input_size,
            output_size=output_size,
            dropout_rate=dropout_rate,
            positional_dropout_rate=positional_dropout_rate,
            input_layer=None,
            **kwargs,
        )
        self.embed = Conv2dSubsampling4Layer(
            input_size,
            output_size,
            dropout_rate,
            channels=conv_channels,
            strides=conv_strides,
            pos_enc=PositionalEncoding(output_size, positional_dropout_rate),
        )
