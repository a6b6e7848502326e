"""Our Swin transformer against timm's (the public reference): same weights -> same outputs."""

import pytest
import timm
import torch

from espnet_ext.errors import ConfigError
from espnet_ext.nets.swin.backbone import DropPath, SwinTransformer, shifted_window_mask
from tests.nets.swin.small_swin import SMALL_SWIN


def timm_swin(**config):
    config.setdefault("num_classes", 0)
    return timm.create_model("swin_tiny_patch4_window7_224", pretrained=False, **config).eval()


@pytest.mark.parametrize("config", [{}, SMALL_SWIN], ids=["swin_t_224", "small_32"])
def test_same_weights_same_features_as_timm(config):
    torch.manual_seed(0)
    reference = timm_swin(**config)
    ours = SwinTransformer(**config).eval()
    ours.load_state_dict(reference.state_dict(), strict=True)  # identical names, strict
    size = config.get("img_size", 224)
    images = torch.randn(2, 3, size, size)
    with torch.no_grad():
        torch.testing.assert_close(ours(images), reference(images), atol=2e-5, rtol=1e-4)


def test_parameter_count_is_swin_t():
    ours = SwinTransformer()
    count = sum(p.numel() for p in ours.parameters()) + 768 * 100 + 100  # + a CIFAR-100 head
    assert 27.5e6 < count < 28.5e6  # "29M" in the paper counts the 1000-class head (28.3M)
    assert count == sum(p.numel() for p in timm_swin(num_classes=100).parameters())


def test_shift_masks_and_window_sizes_match_timm():
    reference = timm_swin(**SMALL_SWIN)
    ours = SwinTransformer(**SMALL_SWIN)
    for stage_ref, stage in zip(reference.layers, ours.layers):
        for block_ref, block in zip(stage_ref.blocks, stage.blocks):
            assert block.window_size == block_ref.window_size[0]
            assert block.shift_size == block_ref.shift_size[0]
            if block_ref.attn_mask is None:
                assert block.attn_mask is None
            else:  # timm: 0 for same region, -100 otherwise
                assert torch.equal(block.attn_mask, block_ref.attn_mask == 0)


def test_shift_mask_regions_by_hand():
    # 4x4 map, window 2, shift 1: the last window holds one token of each of the 4 corner regions
    mask = shifted_window_mask(4, 4, 2, 1)
    assert mask.shape == (4, 4, 4)
    assert mask[0].all()  # top-left window: one region
    assert torch.equal(mask[3], torch.eye(4, dtype=torch.bool))
    assert torch.equal(mask[1], torch.tensor([[1, 0, 1, 0], [0, 1, 0, 1]] * 2, dtype=torch.bool))


def test_stochastic_depth_drops_whole_samples_and_rescales():
    torch.manual_seed(0)
    drop = DropPath(0.25)
    x = torch.ones(20000, 3)
    y = drop(x)
    kept = y[:, 0] > 0
    assert torch.all(y[kept] == 1 / 0.75) and torch.all(y[~kept] == 0)
    assert abs(kept.float().mean().item() - 0.75) < 0.01
    assert torch.equal(drop.eval()(x), x)


def test_stochastic_depth_rises_linearly_over_blocks():
    rates = [b.drop_path.p for s in SwinTransformer().layers for b in s.blocks]
    assert len(rates) == 12 and rates[0] == 0.0 and abs(rates[-1] - 0.2) < 1e-7
    assert all(abs((b - a) - 0.2 / 11) < 1e-6 for a, b in zip(rates, rates[1:]))


def test_bad_geometry_is_refused():
    with pytest.raises(ConfigError, match="img_size"):
        SwinTransformer(img_size=30, patch_size=4)
    with pytest.raises(ConfigError, match="windows"):
        SwinTransformer(img_size=64, patch_size=2, window_size=5, depths=(2,), num_heads=(1,))
