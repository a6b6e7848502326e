"""Four-layer 3x3 CNN preprocessing (VGG-style) in front of a Transformer encoder.

The relaxed-attention paper (and the espresso recipes it follows) preprocess filterbanks with four
Conv2d(3x3) + BatchNorm + ReLU layers; the 2nd and 4th stride by 2 in time and frequency, so the frame
rate drops 4x. Padding keeps every frame count valid (no "too short" utterances). Channels and strides
are options: the mini LibriSpeech config trades this layout for three stride-2 layers (8x, no convolution
at full time-frequency resolution), which roughly halves its training time.
"""

from collections.abc import Sequence

import torch
from espnet.nets.pytorch_backend.transformer.embedding import PositionalEncoding
from espnet.nets.pytorch_backend.transformer.subsampling import Conv2dSubsampling


class Conv2dSubsampling4Layer(Conv2dSubsampling):
    """(B, T, F) features -> (B, ceil(T/4), d_model), with the matching mask.

    Subclasses ESPnet's ``Conv2dSubsampling`` only so that ESPnet encoders treat it as a masked
    subsampling layer (they dispatch on isinstance); none of the parent's layers are built.
    """

    def __init__(
        self,
        idim: int,
        odim: int,
        dropout_rate: float,
        channels: Sequence[int] = (64, 64, 128, 128),
        strides: Sequence[int] = (1, 2, 1, 2),
        pos_enc: torch.nn.Module | None = None,
    ):
        torch.nn.Module.__init__(self)
        if len(channels) != len(strides):
            raise ValueError(
                f"channels {list(channels)} and strides {list(strides)} differ in length"
            )
        blocks = []
        in_ch, freq = 1, idim
        for out_ch, stride in zip(channels, strides):
            blocks.append(
                torch.nn.Sequential(
                    torch.nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1),
                    torch.nn.BatchNorm2d(out_ch),
                    torch.nn.ReLU(),
                )
            )
            in_ch, freq = out_ch, (freq - 1) // stride + 1
        self.conv = torch.nn.ModuleList(blocks)
        self.strides = tuple(strides)
        self.out = torch.nn.Sequential(
            torch.nn.Linear(in_ch * freq, odim),
            pos_enc if pos_enc is not None else PositionalEncoding(odim, dropout_rate),
        )

    def forward(
        self, x: torch.Tensor, x_mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        x = x.unsqueeze(1)  # (B, 1, T, F)
        for block, stride in zip(self.conv, self.strides):
            if x_mask is not None:
                # Zero padded frames before every block, so padding never leaks into valid frames.
                x = x.masked_fill(~x_mask[:, :, :, None], 0.0)
            x = block(x)
            if x_mask is not None:
                x_mask = x_mask[:, :, ::stride]
        b, c, t, f = x.size()
        x = self.out(x.transpose(1, 2).reshape(b, t, c * f))
        return x, x_mask

    def __getitem__(self, key):
        # ESPnet's reset_parameters() reaches the positional encoding through embed[-1].
        if key != -1:
            raise NotImplementedError("only [-1] (the positional encoding) is supported")
        return self.out[key]
