"""The VGG variant of Shi et al. (2017) used as backbone and as the sharpener's encoder, and the image regions
its output columns see (their receptive fields), which sharp attention aligns with instead of features.

Grey 32 x W image -> 3x3 conv + BN + ReLU blocks: c1, pool 2x2, c2, pool 2x2, c3, c3, pool (2, 1), c4, c4,
pool (2, 1), 2x2 conv without padding (c4): a 1 x (W/4 - 1) map, i.e. 24 columns of c4 = 512 features for
the paper's 100 x 32 input.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


# Along the width, every layer as (kernel, stride, padding): what receptive fields depend on.
def _conv(k=3, s=1, p=1):
    return (k, s, p)


class VGGBackbone(torch.nn.Module):
    def __init__(self, in_channels: int = 1, channels: Sequence[int] = (64, 128, 256, 512)):
        super().__init__()
        c1, c2, c3, c4 = channels
        self.out_channels = c4

        def block(cin, cout):
            return [
                torch.nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                torch.nn.BatchNorm2d(cout),
                torch.nn.ReLU(inplace=True),
            ]

        self.layers = torch.nn.Sequential(
            *block(in_channels, c1),
            torch.nn.MaxPool2d(2, 2),
            *block(c1, c2),
            torch.nn.MaxPool2d(2, 2),
            *block(c2, c3),
            *block(c3, c3),
            torch.nn.MaxPool2d((2, 1), (2, 1)),
            *block(c3, c4),
            *block(c4, c4),
            torch.nn.MaxPool2d((2, 1), (2, 1)),
            torch.nn.Conv2d(c4, c4, 2, bias=False),
            torch.nn.BatchNorm2d(c4),
            torch.nn.ReLU(inplace=True),
        )

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        """(B, C, 32, W) -> column features (B, W', c4), W' = W // 4 - 1."""
        features = self.layers(image)
        if features.size(2) != 1:
            raise ValueError(
                f"the backbone expects images 32 pixels high, got {tuple(image.shape)}"
            )
        return features.squeeze(2).transpose(1, 2)


def width_layers(module: VGGBackbone) -> list[tuple[int, int, int]]:
    """(kernel, stride, padding) along the width of every conv/pool layer, in order."""
    spec = []
    for layer in module.layers:
        if isinstance(layer, (torch.nn.Conv2d, torch.nn.MaxPool2d)):
            pair = lambda v: v if isinstance(v, tuple) else (v, v)  # noqa: E731
            kernel, stride, padding = (
                pair(layer.kernel_size),
                pair(layer.stride),
                pair(layer.padding),
            )
            spec.append((kernel[1], stride[1], padding[1]))
    return spec


def receptive_fields(
    layers: Sequence[tuple[int, int, int]], columns: int
) -> list[tuple[float, float]]:
    """Image x-extent [x0, x1) (pixels, may exceed the image) that output column i depends on.

    Standard recurrence: jump j (input pixels between adjacent outputs), size r and first centre c:
    j' = j s,  r' = r + (k - 1) j,  c' = c + ((k - 1) / 2 - p) j, starting from j = r = 1, c = 0.5.
    """
    jump, size, centre = 1.0, 1.0, 0.5
    for kernel, stride, padding in layers:
        centre += ((kernel - 1) / 2 - padding) * jump
        size += (kernel - 1) * jump
        jump *= stride
    return [(centre + i * jump - size / 2, centre + i * jump + size / 2) for i in range(columns)]
