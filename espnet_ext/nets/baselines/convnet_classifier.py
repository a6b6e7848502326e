"""A small ConvNet image classifier: the baseline model of ``ImageClassificationTask``.

Blocks of (3x3 conv, batch norm, ReLU) x ``convs_per_block`` followed by 2x2 max pooling, then
global average pooling, dropout and a linear layer to the classes. Cross-entropy loss (optionally
label-smoothed).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from espnet2.torch_utils.device_funcs import force_gatherable
from espnet2.train.abs_espnet_model import AbsESPnetModel


def images_to_nchw(image: torch.Tensor, in_channels: int) -> torch.Tensor:
    """(B, H, W) grey or (B, H, W, C) as the image data type gives them -> (B, C, H, W)."""
    x = image.unsqueeze(-1) if image.dim() == 3 else image
    if x.dim() != 4 or x.size(-1) != in_channels:
        raise ValueError(
            f"expected images (B, H, W[, {in_channels}]), got shape {tuple(image.shape)}"
        )
    return x.permute(0, 3, 1, 2)


class ConvNetClassifier(AbsESPnetModel):
    def __init__(
        self,
        num_classes: int,
        in_channels: int = 3,
        channels: Sequence[int] = (32, 64, 128),
        convs_per_block: int = 1,
        dropout_rate: float = 0.1,
        label_smoothing: float = 0.0,
    ):
        super().__init__()
        self.num_classes = num_classes
        self.in_channels = in_channels
        self.label_smoothing = label_smoothing
        layers = []
        previous = in_channels
        for width in channels:
            for _ in range(convs_per_block):
                layers += [
                    torch.nn.Conv2d(previous, width, 3, padding=1, bias=False),
                    torch.nn.BatchNorm2d(width),
                    torch.nn.ReLU(inplace=True),
                ]
                previous = width
            layers.append(torch.nn.MaxPool2d(2, ceil_mode=True))
        self.features = torch.nn.Sequential(*layers)
        self.dropout = torch.nn.Dropout(dropout_rate)
        self.output = torch.nn.Linear(previous, num_classes)

    def classify(self, image: torch.Tensor) -> torch.Tensor:
        """Images (B, H, W[, C]) in [0, 1] -> class logits (B, num_classes)."""
        x = self.features(images_to_nchw(image, self.in_channels))
        return self.output(self.dropout(x.mean(dim=(2, 3))))

    def forward(
        self, image: torch.Tensor, label: torch.Tensor, **kwargs
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
        label = label.view(-1)
        logits = self.classify(image)
        loss = F.cross_entropy(logits, label, label_smoothing=self.label_smoothing)
        acc = (logits.argmax(-1) == label).float().mean()
        stats = dict(loss=loss.detach(), acc=acc.detach())
        return force_gatherable((loss, stats, image.size(0)), loss.device)

    def collect_feats(self, image: torch.Tensor, **kwargs) -> dict[str, torch.Tensor]:
        return {}  # nothing to normalise with corpus statistics: pixels are already in [0, 1]
