"""STN localisers: identity returns the region, translation moves it, transforms stay invertible and bounded."""

import pytest
import torch

from espnet_ext.nets.sharp.stn import Localiser, box_affine, compose, sample_patch

IDENTITY = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])


def test_identity_transform_returns_the_input_exactly():
    image = torch.rand(1, 1, 32, 24)
    assert torch.allclose(sample_patch(image, IDENTITY, (24, 32)), image, atol=1e-6)


def test_region_box_and_translation_move_the_patch_by_whole_pixels():
    image = torch.arange(32 * 100, dtype=torch.float32).view(1, 1, 32, 100)
    # A 24-pixel-wide full-height box whose left edge is pixel 30: centre 42 px -> normalised 42/50 - 1.
    region = box_affine(torch.tensor([42 / 50 - 1]), torch.tensor([24 / 100]))
    patch = sample_patch(image, region, (24, 32))
    assert torch.allclose(patch, image[..., 30:54], atol=1e-3)
    shift = torch.tensor([[[1.0, 0.0, 2 * 4 / 24], [0.0, 1.0, 0.0]]])  # +4 px in a 24-px region
    moved = sample_patch(image, compose(region, shift), (24, 32))
    assert torch.allclose(moved, image[..., 34:58], atol=1e-3)


def test_localiser_starts_as_identity_and_its_gradients_reach_the_transform():
    torch.manual_seed(0)
    localiser = Localiser(out_size=(24, 32)).eval()
    image = torch.rand(2, 1, 32, 24)
    patch, placement = localiser(image, IDENTITY.expand(2, 2, 3), image)
    assert torch.allclose(placement, IDENTITY.expand(2, 2, 3), atol=1e-6)
    assert torch.allclose(patch, image, atol=1e-5)
    localiser.train()
    patch, _ = localiser(image, IDENTITY.expand(2, 2, 3), image)
    patch.sum().backward()
    assert localiser.head.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("scale", [1.0, 50.0, -50.0])
def test_any_raw_output_gives_a_bounded_invertible_transform(scale):
    localiser = Localiser()
    raw = torch.randn(64, 6) * scale
    theta = localiser.transform(raw)
    det = theta[:, 0, 0] * theta[:, 1, 1] - theta[:, 0, 1] * theta[:, 1, 0]
    assert (det > 0.9 * localiser.min_scale**2 * 0.9).all()
    assert theta[:, :, 2].abs().max() <= 1 and theta[:, 0, 0].max() <= localiser.max_scale + 1e-6


def test_non_finite_localiser_output_is_an_error():
    with pytest.raises(FloatingPointError, match="non-finite transform"):
        Localiser().transform(torch.tensor([[float("nan")] * 6]))


def test_x_translation_localiser_only_translates_along_x():
    theta = Localiser(mode="x_translation").transform(torch.tensor([[3.0]]))
    assert (
        torch.allclose(theta[0, :, :2], torch.eye(2))
        and theta[0, 1, 2] == 0
        and 0 < theta[0, 0, 2] <= 1
    )
