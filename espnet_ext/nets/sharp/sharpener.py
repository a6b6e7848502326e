"""The sharpener (§2.3, §4.1 "Implementation"): the selected region -> one or two STNs -> encoder -> Z_t.

Regions are the receptive fields of the backbone's output columns on the 100 x 32 image (24 regions 46 px
wide, height clipped to 32). The paper "upsampled the set of regions along the width with a scale factor of
1.8 [2.0 for scene text] ... by running region generation with 180x32 images": with ``region: field`` the
sharpener cuts the whole receptive field of column â from the image rendered at (100·scale) x 32, i.e. the
region at ``scale`` times the horizontal resolution (83 x 32 px at 1.8), and the first localiser looks at
that region. ``region: narrowed`` (an alternative reading, not the paper's) keeps the field's centre but
narrows its width by ``scale`` (26 of 46 px) on the 100 x 32 image.

Two STNs cascade as the paper says: the first (x-translation) outputs a large patch (64 x 32), which is the
second localiser's input; the second's transform is composed with the first's, so the final patch is one
interpolation of the region image.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from espnet_ext.errors import ConfigError
from espnet_ext.nets.sharp.backbone import VGGBackbone, receptive_fields, width_layers
from espnet_ext.nets.sharp.stn import Localiser, box_affine, sample_patch

IMAGE_SIZE = (100, 32)  # (width, height) the backbone sees; regions are its receptive fields
REGIONS = ("field", "narrowed")


class Sharpener(torch.nn.Module):
    def __init__(
        self,
        channels: Sequence[int],
        region: str = "field",
        region_scale: float = 1.8,
        num_stn: int = 1,
        patch_size: Sequence[int] = (24, 32),
        coarse_patch_size: Sequence[int] = (64, 32),
        stn_channels: int = 16,
    ):
        super().__init__()
        if region not in REGIONS:
            raise ConfigError(f"unknown '{region}' ({', '.join(REGIONS)})", key="model_conf.region")
        if num_stn not in (1, 2):
            raise ConfigError(f"must be 1 or 2, got {num_stn}", key="model_conf.num_stn")
        if region_scale < 1:
            raise ConfigError(f"must be >= 1, got {region_scale}", key="model_conf.region_scale")
        self.region = region
        columns = IMAGE_SIZE[0] // 4 - 1
        fields = torch.tensor(receptive_fields(width_layers(VGGBackbone(1, channels)), columns))
        field_width = float(fields[0, 1] - fields[0, 0]) / IMAGE_SIZE[0]  # of the image width
        # The region image: the input rendered at scale x the width ("field") or as the backbone sees it.
        upsampled = region == "field"
        self.image_size = (round(IMAGE_SIZE[0] * region_scale) if upsampled else IMAGE_SIZE[0], 32)
        self.box_width = field_width if upsampled else field_width / region_scale
        self.region_pixels = (max(1, round(self.box_width * self.image_size[0])), 32)
        # Normalised coordinates do not depend on the rendering width: column i's centre in [-1, 1].
        self.register_buffer(
            "region_centre", fields.mean(-1) / IMAGE_SIZE[0] * 2 - 1, persistent=False
        )
        self.localisers = torch.nn.ModuleList(
            [Localiser(tuple(coarse_patch_size), mode="x_translation", channels=stn_channels)]
            * (num_stn == 2)
            + [Localiser(tuple(patch_size), mode="affine", channels=stn_channels)]
        )
        self.encoder = VGGBackbone(1, channels)
        self.out_dim = channels[-1]

    def select(self, region_image: torch.Tensor, index: torch.Tensor):
        """Region ``index`` (B,) of ``region_image`` (B, 1, 32, W): (pixels (B, 1, 32, w), region -> image)."""
        centre = self.region_centre[index]
        placement = box_affine(centre, torch.full_like(centre, self.box_width))
        return sample_patch(region_image, placement, self.region_pixels), placement

    def localise(self, region_image: torch.Tensor, index: torch.Tensor) -> list[torch.Tensor]:
        """Every STN's output in order (the last is the patch Z is computed from)."""
        view, placement = self.select(region_image, index)
        outputs = []
        for localiser in self.localisers:
            view, placement = localiser(view, placement, region_image)
            outputs.append(view)
        return outputs

    def forward(self, region_image: torch.Tensor, index: torch.Tensor):
        """(patch (B, 1, h, w), Z_t (B, M', c4)) for region ``index`` (B,)."""
        patch = self.localise(region_image, index)[-1]
        return patch, self.encoder(patch)
