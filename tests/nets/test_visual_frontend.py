"""The visual front-end's crop (crop_size, augment): AV-HuBERT's image_aug (avhubert/hubert_dataset.py,
utils.py RandomCrop + HorizontalFlip(0.5) on the training split, CenterCrop otherwise)."""

import pytest
import torch

from espnet_ext.errors import ConfigError
from espnet_ext.nets.baselines.visual_frontend import Conv3dResNetFrontend


def frontend(**options):
    return Conv3dResNetFrontend(relu_type="relu", resnet_stages=1, **options)


def test_centre_crop_outside_training_and_without_augment():
    video = torch.rand(2, 3, 96, 96)
    for model in (frontend(crop_size=88, augment=True).eval(), frontend(crop_size=88).train()):
        torch.testing.assert_close(model.crop(video), video[..., 4:92, 4:92])


def test_training_crops_are_random_per_utterance_and_half_are_mirrored():
    torch.manual_seed(0)
    model = frontend(crop_size=88, augment=True).train()
    # Each pixel holds its own (row, column) code, so a crop shows where it came from and whether it
    # was flipped.
    rows, cols = torch.meshgrid(torch.arange(96.0), torch.arange(96.0), indexing="ij")
    code = rows * 100 + cols
    video = code.expand(400, 2, 96, 96)
    crops = model.crop(video)
    assert crops.shape == (400, 2, 88, 88)
    torch.testing.assert_close(crops[:, 0], crops[:, 1])  # the same crop for every frame
    tops = crops[:, 0, 0, :].min(dim=1).values // 100
    flipped = crops[:, 0, 0, 0] > crops[:, 0, 0, -1]
    lefts = torch.where(flipped, crops[:, 0, 0, -1], crops[:, 0, 0, 0]) % 100
    for b in range(400):
        top, left = int(tops[b]), int(lefts[b])
        window = code[top : top + 88, left : left + 88]
        torch.testing.assert_close(crops[b, 0], window.flip(-1) if flipped[b] else window)
    assert set(tops.tolist()) == set(range(9)) and set(lefts.tolist()) == set(range(9))
    assert 0.4 < flipped.float().mean() < 0.6


def test_crop_runs_before_the_resnet_and_padding_stays_zero():
    torch.manual_seed(0)
    model = frontend(crop_size=88, augment=True).train()
    features, lengths = model(torch.rand(2, 5, 96, 96), torch.tensor([5, 3]))
    assert features.shape == (2, 5, 64) and torch.all(features[1, 3:] == 0)
    with pytest.raises(ValueError, match="smaller than crop_size 88"):
        model(torch.rand(1, 2, 80, 80), torch.tensor([2]))


def test_bad_options():
    with pytest.raises(ConfigError, match="augment"):
        frontend(augment=True)
    with pytest.raises(ConfigError, match="crop_size"):
        frontend(crop_size=0)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_channels_last_layout_computes_the_same_features_and_gradients(device, monkeypatch):
    """The weights in channels-last layouts (their activations follow) and a state dict loaded into them:
    the features and the gradients of the default layout, to rounding (on CUDA with cuDNN's TF32 off,
    whose products would differ by algorithm)."""
    if device == "cuda":
        if not torch.cuda.is_available():
            pytest.skip("needs a CUDA device")
        monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    torch.manual_seed(0)
    plain = Conv3dResNetFrontend(relu_type="prelu", resnet_stages=2).to(device).train()
    fast = Conv3dResNetFrontend(relu_type="prelu", resnet_stages=2, channels_last=True).to(device)
    fast.train().load_state_dict(plain.state_dict())
    # (the stem's one input channel is laid out alike either way)
    assert fast.res_encoder.frontend3D[0].weight.is_contiguous(memory_format=torch.channels_last_3d)
    convs = [m.weight for m in fast.res_encoder.trunk.modules() if isinstance(m, torch.nn.Conv2d)]
    assert convs and all(w.is_contiguous(memory_format=torch.channels_last) for w in convs)
    assert not any(w.is_contiguous() for w in convs if w.shape[-1] > 1)  # 1x1: alike either way
    video = torch.rand(2, 5, 24, 24, device=device, requires_grad=True)
    # no padded frames: their constant activations tie in max pooling, whose gradient then goes to
    # whichever tied element a layout visits first (both correct)
    lengths = torch.tensor([5, 5], device=device)
    results = []
    for model in (plain, fast):
        features, _ = model(video, lengths)
        (grad,) = torch.autograd.grad(features.square().sum(), video)
        results.append((features, grad))
    (features, grad), (expected, expected_grad) = results[1], results[0]
    # float32 sums in another order (batch norm's batch statistics; on CUDA also cuDNN's algorithms of
    # each layout, Winograd or FFT among them): errors within 1e-5 (1e-3) of the largest value
    scale = 1e-5 if device == "cpu" else 1e-3
    for got, want in ((features, expected), (grad, expected_grad)):
        torch.testing.assert_close(got, want, rtol=0, atol=scale * want.abs().max().item())
