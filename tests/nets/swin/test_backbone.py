"""Our Swin transformer is timm's with our window attention: same seed -> timm's weights, same weights -> same
outputs; the geometry rules and stochastic depth are timm's."""

import pytest
import timm
import torch

from espnet_ext.attention.window import WindowAttention
from espnet_ext.errors import ConfigError
from espnet_ext.nets.swin.backbone import SwinTransformer
from tests.nets.swin.small_swin import SMALL_SWIN, shifted_window_mask


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


@pytest.mark.parametrize("config", [{}, SMALL_SWIN], ids=["swin_t_224", "small_32"])
def test_a_seed_gives_timm_s_initial_weights_and_every_block_our_attention(config):
    torch.manual_seed(3)
    reference = timm_swin(**config).state_dict()
    torch.manual_seed(3)
    ours = SwinTransformer(**config)
    assert ours.state_dict().keys() == reference.keys()
    for key, value in ours.state_dict().items():
        assert torch.equal(value, reference[key]), key
    blocks = [block for stage in ours.layers for block in stage.blocks]
    assert len(blocks) == sum(config.get("depths", (2, 2, 6, 2)))
    assert all(type(block.attn) is WindowAttention for block in blocks)
    # timm's window rule: a window shrinks to a map not larger than it, unshifted; others shift by M/2
    window = config.get("window_size", 7)
    for stage in ours.layers:
        for j, block in enumerate(stage.blocks):
            size = block.input_resolution[0]
            assert block.window_size[0] == min(window, size)
            assert block.shift_size[0] == (window // 2 if j % 2 and size > window else 0)


def test_shift_mask_regions_by_hand():
    # 4x4 map, window 2, shift 1: the last window holds one token of each of the 4 corner regions
    mask = shifted_window_mask(4, 4, 2, 1) == 0  # timm's additive mask: 0 where a query may attend
    assert mask.shape == (4, 4, 4)
    assert mask[0].all()  # top-left window: one region
    assert torch.equal(mask[3], torch.eye(4, dtype=torch.bool))
    assert torch.equal(mask[1], torch.tensor([[1, 0, 1, 0], [0, 1, 0, 1]] * 2, dtype=torch.bool))


def test_stochastic_depth_rises_linearly_over_blocks():
    blocks = [b for s in SwinTransformer().layers for b in s.blocks]
    rates = [getattr(b.drop_path1, "drop_prob", 0.0) for b in blocks]  # timm: Identity at rate 0
    assert len(rates) == 12 and rates[0] == 0.0 and abs(rates[-1] - 0.2) < 1e-7
    assert all(abs((b - a) - 0.2 / 11) < 1e-6 for a, b in zip(rates, rates[1:]))


def test_bad_geometry_is_refused():
    with pytest.raises(ConfigError, match="img_size"):
        SwinTransformer(img_size=30, patch_size=4)
    with pytest.raises(ConfigError, match="windows"):
        SwinTransformer(img_size=64, patch_size=2, window_size=5, depths=(2,), num_heads=(1,))
