"""Swin helpers shared by the unit tests and smoke runs.

SMALL_SWIN: a Swin small enough for them, 32 x 32 images in patches of 2 (16 x 16 tokens), windows of 4,
Swin-T's four stages of two blocks with its patch merging between them."""

import torch
from timm.models.swin_transformer import SwinTransformerBlock

SMALL_SWIN = dict(
    img_size=32,
    patch_size=2,
    embed_dim=24,
    depths=(2, 2, 2, 2),
    num_heads=(1, 2, 2, 4),
    window_size=4,
)


def shifted_window_mask(h: int, w: int, window: int, shift: int) -> torch.Tensor:
    """The additive mask (nW, M², M²) timm's Swin block gives its window attention on an h x w map shifted
    by ``shift``: 0 where query and key come from the same region, -100 elsewhere."""
    block = SwinTransformerBlock(4, (h, w), num_heads=1, window_size=window, shift_size=shift)
    assert block.attn_mask is not None, "no shift at this geometry"
    return block.attn_mask
