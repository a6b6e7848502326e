"""fairseq S2T's convolutional front end (Wang et al. 2020, ``Conv1dSubsampler``), as an ESPnet input layer.

    x (B, T, F) -> [Conv1d(kernel κ_i, stride s_i, padding ⌊κ_i/2⌋) -> GLU over channels] x n -> (B, T', d)

Every layer but the last outputs ``channels`` channels (halved by the GLU); the last outputs 2·d (d after
the GLU). s2t_transformer_s: two layers, κ = 5, s = 2, 1024 channels: T' = ⌈⌈T/2⌉/2⌉ (factor 4). The
positional encoding follows, as in fairseq (x·√d + sinusoid, dropout). Strides of 1 keep every frame: the
thesis' "no downsampling" (Anexo B). ESPnet's ``Conv1dSubsampling{1,2,3}`` are ReLU stacks with a final
linear layer and no padding, so none of them is this module.

One difference from fairseq: padded frames are zeroed before each convolution, so the convolution at the
end of a short utterance sees zeros (as it would alone) rather than the previous layer's bias on padding;
an utterance's output does not depend on what it is batched with.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from espnet.nets.pytorch_backend.transformer.embedding import PositionalEncoding

from espnet_ext.attention.head_kinds import conv_output_lengths
from espnet_ext.errors import ConfigError
from espnet_ext.nets.padding import padding_mask


class S2TConv1dSubsampler(torch.nn.Module):
    def __init__(
        self,
        idim: int,
        odim: int,
        dropout_rate: float,
        channels: int = 1024,
        kernel_sizes: Sequence[int] = (5, 5),
        strides: Sequence[int] = (2, 2),
        key: str = "encoder_conf",
    ):
        super().__init__()
        if len(kernel_sizes) != len(strides) or not kernel_sizes:
            raise ConfigError(
                f"conv_kernel_sizes {list(kernel_sizes)} and conv_strides {list(strides)} must "
                "name the same (non-zero) number of layers",
                key=key,
            )
        if any(k <= 0 for k in kernel_sizes) or any(s <= 0 for s in strides):
            raise ConfigError("conv kernel sizes and strides must be > 0", key=key)
        if channels % 2:
            raise ConfigError(f"conv_channels {channels} must be even (GLU halves it)", key=key)
        self.kernel_sizes, self.strides = list(kernel_sizes), list(strides)
        last = len(kernel_sizes) - 1
        self.convs = torch.nn.ModuleList(
            torch.nn.Conv1d(
                idim if i == 0 else channels // 2,
                channels if i < last else 2 * odim,
                kernel,
                stride,
                padding=kernel // 2,
            )
            for i, (kernel, stride) in enumerate(zip(kernel_sizes, strides))
        )
        self.pos_enc = PositionalEncoding(odim, dropout_rate)

    def output_lengths(self, lengths: torch.Tensor) -> torch.Tensor:
        for kernel, stride in zip(self.kernel_sizes, self.strides):
            lengths = conv_output_lengths(lengths, kernel, stride)
        return lengths

    def forward(self, xs: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T, F), (B,) -> (B, T', d) with positional encoding, (B,) output lengths."""
        x = xs.transpose(1, 2)  # (B, F, T)
        for conv, kernel, stride in zip(self.convs, self.kernel_sizes, self.strides):
            x = x.masked_fill(padding_mask(lengths, x.size(-1), x.device).unsqueeze(1), 0.0)
            x = torch.nn.functional.glu(conv(x), dim=1)
            lengths = conv_output_lengths(lengths, kernel, stride)
        return self.pos_enc(x.transpose(1, 2)), lengths
