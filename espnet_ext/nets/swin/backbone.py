"""The Swin transformer (Liu et al., 2021b), as the relaxed-attention paper uses it (A.2, Fig. 4/5).

    image (B, 3, H, W) -> patch embedding (p x p conv, stride p; LayerNorm) -> tokens (B, H/p, W/p, C)
    -> 4 stages: [patch merging (2 x 2 neighbours concatenated, LayerNorm, linear 4n·C -> 2n·C), from stage 2]
                 + depth_i Swin blocks, windows shifted by M/2 in every second block
    -> LayerNorm -> average pooling over tokens -> (B, 8C) features

A Swin block: x + DropPath(W-MSA(LN(x))), then x + DropPath(MLP(LN(x))) with a GELU MLP of ratio 4.
W-MSA is ``espnet_ext.attention.window.WindowAttention`` (relaxed/fuzzy eq. 3, smooth focus). Where a
stage's feature map is not larger than the window, the window shrinks to the map and is not shifted
(the reference implementation's rule). Stochastic depth (DropPath) rises linearly from 0 to
``drop_path_rate`` over the blocks. Parameter names follow the reference implementation
(``espnet_ext.nets.swin.checkpoint`` maps them to timm's and the official checkpoints').
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from espnet_ext.attention.window import WindowAttention
from espnet_ext.errors import ConfigError


class DropPath(torch.nn.Module):
    """Stochastic depth (Huang et al., 2016): drop the residual branch of a whole sample with
    probability p in training, scaling kept branches by 1/(1-p)."""

    def __init__(self, p: float):
        super().__init__()
        self.p = float(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = x.new_empty((x.size(0),) + (1,) * (x.dim() - 1)).bernoulli_(1.0 - self.p)
        return x * keep / (1.0 - self.p)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def window_partition(x: torch.Tensor, window: int) -> torch.Tensor:
    """(B, H, W, C) -> (B·nW, M², C), windows in row-major order within each image."""
    b, h, w, c = x.shape
    x = x.view(b, h // window, window, w // window, window, c).transpose(2, 3)
    return x.reshape(-1, window * window, c)


def window_reverse(windows: torch.Tensor, window: int, h: int, w: int) -> torch.Tensor:
    """Inverse of ``window_partition``: (B·nW, M², C) -> (B, H, W, C)."""
    c = windows.size(-1)
    x = windows.view(-1, h // window, w // window, window, window, c).transpose(2, 3)
    return x.reshape(-1, h, w, c)


def shifted_window_mask(h: int, w: int, window: int, shift: int) -> torch.Tensor:
    """(nW, M², M²) bool: True where query and key come from the same region of the cyclically
    shifted map (the pairs Swin lets attend to each other)."""
    region = torch.zeros(h, w, dtype=torch.long)
    bounds = ((0, -window), (-window, -shift), (-shift, None))
    for n, (rows, cols) in enumerate((r, c) for r in bounds for c in bounds):
        region[slice(*rows), slice(*cols)] = n
    ids = window_partition(region.view(1, h, w, 1), window).squeeze(-1)  # (nW, M²)
    return ids[:, :, None] == ids[:, None, :]


class Mlp(torch.nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = torch.nn.Linear(dim, hidden)
        self.act = torch.nn.GELU()
        self.fc2 = torch.nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class SwinBlock(torch.nn.Module):
    """One Swin block on a (B, H, W, C) map; ``shift`` 0 (W-MSA) or M/2 (SW-MSA)."""

    def __init__(
        self,
        dim: int,
        resolution: tuple[int, int],
        num_heads: int,
        window_size: int,
        shift: bool,
        mlp_ratio: float,
        drop_path: float,
        attention_conf: dict,
    ):
        super().__init__()
        self.window_size = min(window_size, *resolution)
        self.shift_size = self.window_size // 2 if shift and min(resolution) > window_size else 0
        if resolution[0] % self.window_size or resolution[1] % self.window_size:
            raise ConfigError(
                f"a {resolution[0]}x{resolution[1]} feature map does not divide into "
                f"{self.window_size}x{self.window_size} windows (choose img_size/patch_size/window_size)"
            )
        self.norm1 = torch.nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, num_heads, self.window_size, **attention_conf)
        self.drop_path = DropPath(drop_path)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))
        mask = shifted_window_mask(*resolution, self.window_size, self.shift_size)
        self.register_buffer("attn_mask", mask if self.shift_size else None, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, c = x.shape
        shifted = self.norm1(x)
        if self.shift_size:
            shifted = torch.roll(shifted, (-self.shift_size, -self.shift_size), dims=(1, 2))
        windows = self.attn(window_partition(shifted, self.window_size), self.attn_mask)
        shifted = window_reverse(windows, self.window_size, h, w)
        if self.shift_size:
            shifted = torch.roll(shifted, (self.shift_size, self.shift_size), dims=(1, 2))
        x = x + self.drop_path(shifted)
        return x + self.drop_path(self.mlp(self.norm2(x)))


class PatchMerging(torch.nn.Module):
    """(B, H, W, C) -> (B, H/2, W/2, 2C): each 2 x 2 neighbourhood concatenated (order (0,0), (1,0),
    (0,1), (1,1) as (row, column)), LayerNorm, linear without bias."""

    def __init__(self, dim: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(4 * dim)
        self.reduction = torch.nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], -1)
        return self.reduction(self.norm(x))


class PatchEmbed(torch.nn.Module):
    def __init__(self, patch_size: int, in_channels: int, dim: int):
        super().__init__()
        self.proj = torch.nn.Conv2d(in_channels, dim, patch_size, stride=patch_size)
        self.norm = torch.nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.proj(x).permute(0, 2, 3, 1))  # (B, H/p, W/p, C)


class SwinStage(torch.nn.Module):
    def __init__(
        self, merge: bool, dim: int, resolution, depth, num_heads, drop_paths, **block_conf
    ):
        super().__init__()
        self.downsample = PatchMerging(dim // 2) if merge else torch.nn.Identity()
        self.blocks = torch.nn.Sequential(
            *(
                SwinBlock(dim, resolution, num_heads, shift=i % 2 == 1, drop_path=p, **block_conf)
                for i, p in zip(range(depth), drop_paths)
            )
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(self.downsample(x))


class SwinTransformer(torch.nn.Module):
    """Swin backbone. Defaults: Swin-T (C = 96, depths 2-2-6-2, heads 3-6-12-24, M = 7, 224 x 224,
    4 x 4 patches, stochastic depth 0.2). ``attention_conf``: options of ``WindowAttention`` (gamma,
    fuzzy_std, matched_inference, smooth_focus, fused) for every block."""

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
        super().__init__()
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
        self.img_size = img_size
        self.patch_embed = PatchEmbed(patch_size, in_channels, embed_dim)
        drop_paths = torch.linspace(0, drop_path_rate, sum(depths)).tolist()
        stages = []
        for i, (depth, heads) in enumerate(zip(depths, num_heads)):
            size = grid // 2**i
            stages.append(
                SwinStage(
                    i > 0,
                    embed_dim * 2**i,
                    (size, size),
                    depth,
                    heads,
                    drop_paths[sum(depths[:i]) : sum(depths[: i + 1])],
                    window_size=window_size,
                    mlp_ratio=mlp_ratio,
                    attention_conf=dict(attention_conf or {}),
                )
            )
        self.layers = torch.nn.Sequential(*stages)
        self.num_features = embed_dim * 2 ** (len(depths) - 1)
        self.norm = torch.nn.LayerNorm(self.num_features)
        self.apply(_init_weights)

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

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) -> pooled features (B, 8C)."""
        return self.feature_map(images).mean(dim=(1, 2))


def _init_weights(module: torch.nn.Module) -> None:
    """The reference initialisation: truncated normal (std 0.02) linear weights, zero biases."""
    if isinstance(module, torch.nn.Linear):
        torch.nn.init.trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            torch.nn.init.zeros_(module.bias)
    elif isinstance(module, torch.nn.LayerNorm):
        torch.nn.init.ones_(module.weight)
        torch.nn.init.zeros_(module.bias)
