"""The sharpener's input is the selected region at the paper's upsampled resolution; STNs cascade."""

import pytest
import torch

from espnet_ext.errors import ConfigError
from espnet_ext.nets.sharp.model import AttentionRecognizer
from espnet_ext.nets.sharp.sharpener import Sharpener

CHANNELS = (4, 8, 8, 16)


def ramp(batch=1, width=100):
    """Width-first images whose intensity is the pixel centre's x in 100-px units (x + 0.5) / 100."""
    x = (torch.arange(width, dtype=torch.float32) + 0.5) / width
    return x.view(1, width, 1).expand(batch, width, 32).contiguous(), torch.full((batch,), width)


def first_view(sharpener, region_image, index):
    seen = []
    sharpener.localisers[0].net.register_forward_hook(lambda m, i, o: seen.append(i[0]))
    sharpener(region_image, index)
    return seen[0]


@pytest.mark.parametrize("scale, pixels", [(1.8, 83), (2.0, 92)])
def test_the_localiser_sees_the_whole_receptive_field_at_scale_times_the_resolution(scale, pixels):
    torch.manual_seed(0)
    sharpener = Sharpener(CHANNELS, "field", scale).eval()
    assert sharpener.image_size == (round(100 * scale), 32)
    image = AttentionRecognizer.prepare_images(*ramp(), sharpener.image_size)
    view = first_view(sharpener, image, torch.tensor([10]))
    # Column 10's receptive field is [21, 67) px of the 100-px image (46 px, backbone.receptive_fields).
    assert view.shape == (1, 1, 32, pixels)
    left, right = view[0, 0, 16, 0].item() * 100, view[0, 0, 16, -1].item() * 100
    half_step = 46 / pixels / 2
    assert left == pytest.approx(21 + half_step, abs=0.05)
    assert right == pytest.approx(67 - half_step, abs=0.05)


def test_narrowed_regions_remain_an_option():
    sharpener = Sharpener(CHANNELS, "narrowed", 1.8).eval()
    image = AttentionRecognizer.prepare_images(*ramp())
    view = first_view(sharpener, image, torch.tensor([10]))
    assert sharpener.image_size == (100, 32) and view.shape == (1, 1, 32, 26)
    span = (view[0, 0, 16, -1] - view[0, 0, 16, 0]).item() * 100
    assert span == pytest.approx(46 / 1.8 * 25 / 26, abs=0.1)  # centre 44, 25.6 px wide


def second_view(sharpener, image):
    seen = []
    sharpener.localisers[1].net.register_forward_hook(lambda m, i, o: seen.append(i[0]))
    outputs = sharpener.localise(image, torch.tensor([5, 12]))
    return seen[0], outputs


def test_the_second_stn_reads_the_first_stns_output_patch():
    torch.manual_seed(0)
    sharpener = Sharpener(CHANNELS, num_stn=2).eval()
    image = torch.rand(2, 1, 32, 180)
    seen, outputs = second_view(sharpener, image)
    assert seen.shape == (2, 1, 32, 64) and torch.equal(seen, outputs[0])
    # Its content follows the first STN: a translation of the first changes what the second sees.
    torch.nn.init.constant_(sharpener.localisers[0].head.bias, 0.5)
    moved, _ = second_view(sharpener, image)
    assert not torch.allclose(moved, seen, atol=1e-3)
    # And its size follows the first patch's size.
    torch.manual_seed(0)
    other = Sharpener(CHANNELS, num_stn=2, coarse_patch_size=(40, 32)).eval()
    assert second_view(other, image)[0].shape == (2, 1, 32, 40)


def test_bad_sharpener_options_name_their_key():
    with pytest.raises(ConfigError, match="model_conf.region"):
        Sharpener(CHANNELS, "box")
    with pytest.raises(ConfigError, match="model_conf.num_stn"):
        Sharpener(CHANNELS, num_stn=3)
