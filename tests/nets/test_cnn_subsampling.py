"""The 3x3 CNN front-end with other layouts than the paper's: the mini LibriSpeech config's three
stride-2 layers (8x fewer frames, no convolution at full resolution)."""

import math

import pytest
import torch

from espnet_ext.nets.cnn_subsampling import Conv2dSubsampling4Layer


def _ceil_through(length: int, strides) -> int:
    for stride in strides:
        length = math.ceil(length / stride)
    return length


@pytest.mark.parametrize(
    "channels, strides", [((2, 2, 4, 4), (1, 2, 1, 2)), ((2, 4, 4), (2, 2, 2)), ((3,), (1,))]
)
def test_lengths_and_padding_follow_the_strides(channels, strides):
    torch.manual_seed(0)
    layer = Conv2dSubsampling4Layer(20, 8, 0.0, channels=channels, strides=strides).eval()
    lengths = [23, 11, 1]
    x = torch.randn(3, 23, 20)
    mask = (torch.arange(23)[None, :] < torch.tensor(lengths)[:, None])[:, None, :]
    y, y_mask = layer(x, mask)
    expected = [_ceil_through(n, strides) for n in lengths]
    assert y.shape == (3, expected[0], 8)
    assert y_mask.squeeze(1).sum(1).tolist() == expected
    # Every valid output frame of a padded utterance equals the one computed without padding.
    for i, n in enumerate(lengths):
        alone, _ = layer(x[i : i + 1, :n], mask[i : i + 1, :, :n])
        torch.testing.assert_close(alone[0], y[i, : expected[i]], atol=1e-5, rtol=1e-5)


def test_mini_layout_has_no_full_resolution_convolution():
    # The first convolution already strides: its output has half the frames and half the bins.
    layer = Conv2dSubsampling4Layer(80, 16, 0.0, channels=(16, 32, 32), strides=(2, 2, 2))
    first = layer.conv[0][0](torch.zeros(1, 1, 100, 80))
    assert first.shape[-2:] == (50, 40)
    assert layer.out[0].in_features == 32 * 10  # 80 bins -> 40 -> 20 -> 10


def test_channels_and_strides_must_pair():
    with pytest.raises(ValueError, match="differ in length"):
        Conv2dSubsampling4Layer(80, 16, 0.0, channels=(16, 32), strides=(2, 2, 2))
