"""The Swin transformer (Liu et al., 2021b), as the relaxed-attention paper uses it (A.2, Fig. 4/5): timm's
``SwinTransformer`` with the relaxed window attention of ``espnet_ext.attention.window`` in every block.

    image (B, 3, H, W) -> patch embedding (p x p conv, stride p; LayerNorm) -> tokens (B, H/p, W/p, C)
    -> 4 stages: [patch merging (2 x 2 neighbours concatenated, LayerNorm, linear 4n·C -> 2n·C), from stage 2]
                 + depth_i Swin blocks, windows shifted by M/2 in every second block
    -> LayerNorm -> average pooling over tokens -> (B, 8C) features

Everything but the attention is timm's (blocks, patch merging, stochastic depth rising linearly to
``drop_path_rate``, where a stage's map is not larger than the window the window shrinks to it unshifted;
parameter names and initialisation). timm's blocks build timm's ``WindowAttention``; each is replaced by ours
(a subclass) holding the same initial weights, built outside the random stream, so a seed gives timm's
model. Official and timm ImageNet checkpoints load through timm's checkpoint filter
(``espnet_ext.nets.swin.checkpoint``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from timm.models.swin_transformer import SwinTransformer as TimmSwinTransformer

from espnet_ext.attention.window import WindowAttention
from espnet_ext.errors import ConfigError


class SwinTransformer(TimmSwinTransformer):
    """Swin backbone without a classifier head. Defaults: Swin-T (C = 96, depths 2-2-6-2, heads 3-6-12-24,
    M = 7, 224 x 224, 4 x 4 patches, stochastic depth 0.2). ``attention_conf``: options of
    ``WindowAttention`` (gamma, fuzzy_std, matched_inference, smooth_focus, fused) for every block."""

    def __init__(
        self,
        img_size: int = 224,
        patch_size: int = 4,
        in_channels: int = 3,
        embed_dim: int = 96,
        depths: Sequence[int] = (2, 2, 6, 2),
        num_heads: Sequence[int] = (3, 6, 12, 24),
        window_size: int = 7,
        mlp_ratio: float = 4.0,
        drop_path_rate: float = 0.2,
        attention_conf: dict | None = None,
    ):
        if len(depths) != len(num_heads):
            raise ConfigError(
                f"depths {list(depths)} and num_heads {list(num_heads)} differ in length"
            )
        grid = img_size // patch_size
        if img_size % patch_size or grid % 2 ** (len(depths) - 1):
            raise ConfigError(
                f"img_size {img_size} must be patch_size {patch_size} times a multiple of "
                f"{2 ** (len(depths) - 1)} (one halving per patch merging)"
            )
        for i in range(len(depths)):
            size = grid // 2**i
            window = min(window_size, size)
            if size % window:  # timm would pad the map; the paper's geometry never needs it
                raise ConfigError(
                    f"a {size}x{size} feature map does not divide into {window}x{window} windows "
                    "(choose img_size/patch_size/window_size)"
                )
        super().__init__(
            img_size=img_size,
            patch_size=patch_size,
            in_chans=in_channels,
            num_classes=0,
            embed_dim=embed_dim,
            depths=tuple(depths),
            num_heads=tuple(num_heads),
            window_size=window_size,
            mlp_ratio=mlp_ratio,
            drop_path_rate=drop_path_rate,
        )
        self.img_size = img_size
        for stage in self.layers:
            for block in stage.blocks:
                timm_attention = block.attn
                with torch.random.fork_rng(devices=[]):  # timm's random stream stays timm's
                    block.attn = WindowAttention(
                        block.dim,
                        timm_attention.num_heads,
                        block.window_size,
                        **dict(attention_conf or {}),
                    )
                block.attn.load_state_dict(timm_attention.state_dict())

    def stage_output(self, images: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) -> the last stage's feature map (B, H', W', 8C), before the final LayerNorm."""
        if images.shape[-2:] != (self.img_size, self.img_size):
            raise ValueError(
                f"expected {self.img_size}x{self.img_size} images, got {tuple(images.shape[-2:])} "
                "(resize them in the data pipeline: --image_transform_conf input_size=...)"
            )
        return self.layers(self.patch_embed(images))

    def feature_map(self, images: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) -> normalised final feature map (B, H', W', 8C)."""
        return self.norm(self.stage_output(images))

    def forward_features(self, images: torch.Tensor) -> torch.Tensor:
        return self.feature_map(images)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) -> pooled features (B, 8C)."""
        return self.feature_map(images).mean(dim=(1, 2))
