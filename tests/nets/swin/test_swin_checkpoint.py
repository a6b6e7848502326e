"""Loading ImageNet Swin checkpoints (official and timm layouts) into the CIFAR-100 classifier."""

import json

import pytest
import timm
import torch

from espnet_ext.errors import InputError
from espnet_ext.nets.swin import checkpoint
from espnet_ext.nets.swin.backbone import SwinTransformer
from tests.nets.swin.small_swin import SMALL_SWIN


@pytest.fixture(scope="module")
def imagenet():
    torch.manual_seed(0)
    return timm.create_model("swin_tiny_patch4_window7_224", pretrained=False, **SMALL_SWIN).eval()


def official_layout(state):
    """timm's names -> the official release's (merging at the end of the previous stage, head,
    saved buffers), written independently of the module under test."""
    out = {}
    for key, value in state.items():
        parts = key.split(".")
        if parts[0] == "layers" and parts[2] == "downsample":
            parts[1] = str(int(parts[1]) - 1)
        if parts[:2] == ["head", "fc"]:
            parts = ["head", parts[2]]
        out[".".join(parts)] = value
        if key.endswith("relative_position_bias_table"):
            out[key.replace("bias_table", "index")] = torch.zeros(16, 16, dtype=torch.long)
    return out


@pytest.mark.parametrize("layout", ["timm", "official"])
def test_checkpoint_loads_and_reproduces_imagenet_features(tmp_path, imagenet, layout):
    state = imagenet.state_dict()
    path = tmp_path / "swin.pth"
    if layout == "official":
        torch.save({"model": official_layout(state)}, path)
        assert any(k.startswith("layers.0.downsample") for k in official_layout(state))
    else:
        torch.save(state, path)
    ours = SwinTransformer(**SMALL_SWIN).eval()
    checkpoint.load_backbone(ours, path)
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(ours(images), imagenet.forward_features(images).mean((1, 2)))


def test_converter_replaces_the_1000_class_head(tmp_path, imagenet):
    path = tmp_path / "swin.pth"
    torch.save({"model": official_layout(imagenet.state_dict())}, path)
    config = tmp_path / "swin.yaml"
    config.write_text(f"model: swin\nmodel_conf: {json.dumps(SMALL_SWIN)}\n")  # JSON is YAML
    out = tmp_path / "init.pth"
    assert (
        checkpoint.main(
            [
                "--checkpoint",
                str(path),
                "--config",
                str(config),
                "--num_classes",
                "100",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    init = torch.load(out, weights_only=True)
    assert all(k.startswith("backbone.") for k in init) and "head.weight" not in init
    torch.testing.assert_close(
        init["backbone.layers.1.downsample.reduction.weight"],
        imagenet.state_dict()["layers.1.downsample.reduction.weight"],
    )


def test_other_window_size_is_refused(tmp_path, imagenet):
    path = tmp_path / "swin.pth"
    torch.save(imagenet.state_dict(), path)
    other = SwinTransformer(**{**SMALL_SWIN, "window_size": 2})
    with pytest.raises(InputError, match="relative-position table") as error:
        checkpoint.load_backbone(other, path)
    assert error.value.path == str(path)


def test_other_patch_size_is_refused(tmp_path, imagenet):
    # timm's filter would resample the patch embedding; the loader refuses it instead
    path = tmp_path / "swin.pth"
    torch.save(imagenet.state_dict(), path)
    other = SwinTransformer(**{**SMALL_SWIN, "img_size": 64, "patch_size": 4})
    with pytest.raises(
        InputError, match=r"\(2, 2\) patches in the checkpoint, \(4, 4\) in the model"
    ):
        checkpoint.load_backbone(other, path)


def test_missing_and_foreign_keys_are_refused(tmp_path, imagenet):
    state = dict(imagenet.state_dict())
    state.pop("norm.weight")
    state["extra.weight"] = torch.zeros(1)
    path = tmp_path / "swin.pth"
    torch.save(state, path)
    with pytest.raises(InputError, match="missing.*norm.weight.*unexpected.*extra.weight"):
        checkpoint.load_backbone(SwinTransformer(**SMALL_SWIN), path)


def test_not_a_state_dict_is_refused(tmp_path):
    path = tmp_path / "x.pth"
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(InputError, match="cannot read"):
        checkpoint.load_backbone(SwinTransformer(**SMALL_SWIN), path)


def test_converter_builds_the_backbone_with_the_trainings_later_options(tmp_path, imagenet, capsys):
    # A smoke run narrows the config's widths on the training's command line (cls.sh passes them here too):
    # the checkpoint of the narrow Swin fits only the model built with them.
    path = tmp_path / "swin.pth"
    torch.save(imagenet.state_dict(), path)
    config = tmp_path / "swin.yaml"
    wide = {**SMALL_SWIN, "embed_dim": 2 * SMALL_SWIN["embed_dim"]}
    config.write_text(f"model: swin\nmodel_conf: {json.dumps(wide)}\n")
    out = tmp_path / "init.pth"
    options = ["--checkpoint", str(path), "--config", str(config), "--num_classes", "100"]
    assert checkpoint.main([*options, "--out", str(out)]) == 1  # the config's own widths: refused
    assert "in the checkpoint" in capsys.readouterr().err and not out.exists()
    narrow = ["--", "--model_conf", f"embed_dim={SMALL_SWIN['embed_dim']}", "--max_epoch", "2"]
    assert checkpoint.main([*options, "--out", str(out), *narrow]) == 0
    init = torch.load(out, weights_only=True)
    torch.testing.assert_close(
        init["backbone.patch_embed.proj.weight"], imagenet.state_dict()["patch_embed.proj.weight"]
    )
