"""--matched_inference: the built model is switched, ESPnet's builder and sys.argv are left as found."""

import sys

import pytest
import torch

from espnet_ext.attention import matched_inference
from espnet_ext.bin import inference_entry
from espnet_ext.errors import ConfigError
from espnet_ext.nets.relaxed_transformer import RelaxedTransformerDecoder


def decoder(gamma):
    sites = {"src_attn": {"gamma": gamma}} if gamma else None
    return RelaxedTransformerDecoder(
        5,
        8,
        attention_heads=2,
        linear_units=8,
        num_blocks=2,
        use_flash_attn=False,
        attention_sites=sites,
    )


class BaseTask:
    model = None

    @classmethod
    def build_model_from_file(cls, config, model_file, device):
        return cls.model, {"config": config}


class FakeTask(BaseTask):
    """Inherits the builder, as ESPnet2's tasks inherit AbsTask's."""


def test_matched_inference_switches_the_built_model_and_restores_the_builder():
    FakeTask.model = decoder(0.25)
    with matched_inference.applied_on_build(FakeTask, True):
        model, _ = FakeTask.build_model_from_file("c.yaml", "m.pth", "cpu")
    assert all(layer.src_attn.matched_inference for layer in model.decoders)
    model.eval()
    assert model.decoders[0].src_attn.relaxing
    assert "build_model_from_file" not in vars(FakeTask)  # inherited builder back in place
    assert FakeTask.build_model_from_file.__func__ is BaseTask.build_model_from_file.__func__

    FakeTask.model = decoder(0.0)
    refused = pytest.raises(ConfigError, match="no relaxed attention")
    with refused, matched_inference.applied_on_build(FakeTask, True):
        FakeTask.build_model_from_file("c.yaml", "m.pth", "cpu")
    assert "build_model_from_file" not in vars(FakeTask)  # restored after a failure too
    assert matched_inference.set_matched_inference(torch.nn.Linear(2, 2), False) == 0


def test_entry_point_passes_the_rest_to_espnet_main_and_leaves_sys_argv(monkeypatch):
    argv = ["prog", "--matched_inference", "true", "--output_dir", "out"]
    monkeypatch.setattr(sys, "argv", list(argv))
    FakeTask.model = decoder(0.25)
    seen = {}

    def espnet_main(cmd=None):
        seen["cmd"] = cmd
        seen["model"], _ = FakeTask.build_model_from_file("c.yaml", "m.pth", "cpu")

    inference_entry.run(espnet_main, FakeTask, "--mt_train_config")
    assert seen["cmd"] == ["--output_dir", "out"]
    assert seen["model"].decoders[0].src_attn.matched_inference
    assert sys.argv == argv
    assert "build_model_from_file" not in vars(FakeTask)
