"""Spatial transformer localisers (Jaderberg et al., 2015) of the sharpener.

A localiser looks at its input (the selected region, or the previous STN's output patch when STNs are
cascaded: "the output of the previous one is used as the input to the next one"), estimates an affine
transform of that input's normalised coordinates and samples a patch through it (``affine_grid`` +
bilinear ``grid_sample``). Transforms are composed with the input's own placement in the source image, so
every patch is one interpolation of the source image, however many STNs precede it.

Degenerate transforms cannot occur by construction (documented clamping): scales lie in
[``min_scale``, ``max_scale``] (sigmoid-bounded), translations in [-1, 1] region units (tanh), and shears
are bounded by 0.3·sqrt(sx·sy), so det = sx·sy - shx·shy >= 0.91·sx·sy > 0: the transform is always
invertible and inside a bounded range. A non-finite localiser output raises ``FloatingPointError``.
The last localisation layer starts at zero, i.e. every localiser starts as the identity transform.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from espnet_ext.errors import ConfigError

SHEAR_BOUND = 0.3


def sample_patch(image: torch.Tensor, affine: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Bilinear patch (B, C, h, w) of ``image`` (B, C, H, W) through ``affine`` (B, 2, 3) in the image's
    normalised coordinates ([-1, 1], pixel centres as in ``align_corners=False``); size = (w, h)."""
    width, height = size
    grid = F.affine_grid(affine, [image.size(0), image.size(1), height, width], align_corners=False)
    return F.grid_sample(image, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def compose(outer: torch.Tensor, inner: torch.Tensor) -> torch.Tensor:
    """Affine (B, 2, 3) maps: x -> outer(inner(x))."""
    bottom = inner.new_tensor([0.0, 0.0, 1.0]).expand(inner.size(0), 1, 3)
    return torch.bmm(outer, torch.cat([inner, bottom], dim=1))


def box_affine(centre_x: torch.Tensor, half_width: torch.Tensor) -> torch.Tensor:
    """Region -> image normalised coordinates for full-height boxes centred at ``centre_x`` (B,)."""
    zeros, ones = torch.zeros_like(centre_x), torch.ones_like(centre_x)
    return torch.stack(
        [torch.stack([half_width, zeros, centre_x], -1), torch.stack([zeros, ones, zeros], -1)], 1
    )


class Localiser(torch.nn.Module):
    """Localisation network + grid generator + sampler for one STN.

    ``mode``: ``affine`` (scale, shear, translation) or ``x_translation`` (the coarse first STN of two).
    """

    def __init__(
        self,
        out_size: tuple[int, int] = (24, 32),
        mode: str = "affine",
        channels: int = 16,
        min_scale: float = 0.2,
        max_scale: float = 1.2,
    ):
        super().__init__()
        if mode not in ("affine", "x_translation"):
            raise ConfigError(f"unknown '{mode}' (affine, x_translation)", key="mode")
        if not 0 < min_scale < max_scale:
            raise ConfigError(f"need 0 < {min_scale} < {max_scale}", key="min_scale/max_scale")
        self.out_size, self.mode = tuple(out_size), mode
        self.min_scale, self.max_scale = min_scale, max_scale
        c = channels
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(1, c, 3, padding=1),
            torch.nn.BatchNorm2d(c),
            torch.nn.ReLU(inplace=True),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(c, 2 * c, 3, padding=1),
            torch.nn.BatchNorm2d(2 * c),
            torch.nn.ReLU(inplace=True),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(2 * c, 2 * c, 3, padding=1),
            torch.nn.BatchNorm2d(2 * c),
            torch.nn.ReLU(inplace=True),
            torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(),
            torch.nn.Linear(2 * c, 64),
            torch.nn.ReLU(inplace=True),
        )
        self.head = torch.nn.Linear(64, 6 if mode == "affine" else 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)
        # sigmoid(b) chosen so that the initial scale is exactly 1.
        self._scale_offset = float(
            torch.logit(torch.tensor((1.0 - min_scale) / (max_scale - min_scale)))
        )

    def transform(self, raw: torch.Tensor) -> torch.Tensor:
        """Bounded, invertible affine (B, 2, 3) from the localisation head's raw output."""
        if not torch.isfinite(raw).all():
            raise FloatingPointError("the STN localisation network produced a non-finite transform")
        zeros, ones = torch.zeros_like(raw[:, 0]), torch.ones_like(raw[:, 0])
        if self.mode == "x_translation":
            return torch.stack(
                [
                    torch.stack([ones, zeros, torch.tanh(raw[:, 0])], -1),
                    torch.stack([zeros, ones, zeros], -1),
                ],
                1,
            )
        span = self.max_scale - self.min_scale
        sx = self.min_scale + span * torch.sigmoid(raw[:, 0] + self._scale_offset)
        sy = self.min_scale + span * torch.sigmoid(raw[:, 1] + self._scale_offset)
        bound = SHEAR_BOUND * torch.sqrt(sx * sy)
        shx, shy = bound * torch.tanh(raw[:, 2]), bound * torch.tanh(raw[:, 3])
        tx, ty = torch.tanh(raw[:, 4]), torch.tanh(raw[:, 5])
        return torch.stack([torch.stack([sx, shx, tx], -1), torch.stack([shy, sy, ty], -1)], 1)

    def forward(
        self, view: torch.Tensor, placement: torch.Tensor, source: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``view`` (B, C, h', w'): what this STN looks at, placed in ``source`` (B, C, H, W) by
        ``placement`` (B, 2, 3). Returns (patch (B, C, h, w), patch -> source map)."""
        theta = self.transform(self.head(self.net(view)))
        placement = compose(placement, theta)
        return sample_patch(source, placement, self.out_size), placement
