"""Our classes are buildable through ESPnet2's own tasks, in this process, a fresh one and a spawned worker."""

import subprocess
import sys
import textwrap

import pytest
import torch

ENCODER_YAML = """\
encoder: cnn_transformer
encoder_conf:
    output_size: 32
    attention_heads: 2
    linear_units: 64
    num_blocks: 2
    conv_channels: [4, 4, 8, 8]
    use_flash_attn: false
decoder: transformer
decoder_conf:
    attention_heads: 2
    linear_units: 64
    num_blocks: 1
    use_flash_attn: false
frontend: null
"""


@pytest.fixture()
def asr_args(tmp_path):
    config = tmp_path / "asr.yaml"
    config.write_text(ENCODER_YAML)
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("\n".join(["<blank>", "<unk>", "a", "b", "<sos/eos>"]) + "\n")
    return [
        "--config",
        str(config),
        "--token_list",
        str(tokens),
        "--input_size",
        "20",
        "--token_type",
        "char",
    ]


def test_registered_encoder_builds_through_asr_task(asr_args):
    from espnet_ext.nets.cnn_transformer_encoder import CNNTransformerEncoder
    from espnet_ext.registry import build_model

    model = build_model("asr", asr_args)
    assert isinstance(model.encoder, CNNTransformerEncoder)
    # It also trains: one forward/backward through ESPnet's ASR model.
    speech = torch.randn(2, 30, 20)
    loss, stats, _ = model(
        speech=speech,
        speech_lengths=torch.tensor([30, 21]),
        text=torch.tensor([[2, 3, 2], [3, 2, -1]]),
        text_lengths=torch.tensor([3, 2]),
    )
    loss.backward()
    assert torch.isfinite(loss)


def test_unregistered_name_is_refused(asr_args, tmp_path):
    from espnet_ext.registry import build_model

    bad = tmp_path / "bad.yaml"
    bad.write_text(ENCODER_YAML.replace("cnn_transformer", "no_such_encoder"))
    args = list(asr_args)
    args[1] = str(bad)
    with pytest.raises(ValueError, match="no_such_encoder"):
        build_model("asr", args)


def _build_in_child(args):
    # What a DDP worker re-imports (the entry point's module, as __mp_main__) and then builds
    from espnet2.tasks.asr import ASRTask

    import espnet_ext.bin.asr_train  # noqa: F401

    return type(ASRTask.build_model(ASRTask.get_parser().parse_args(args)).encoder).__name__


def test_fresh_subprocess_sees_registration(asr_args):
    code = textwrap.dedent(
        f"""
        from espnet_ext.registry import install
        install()  # the entry points' call
        from espnet2.tasks.asr import ASRTask
        args = ASRTask.get_parser().parse_args({asr_args!r})
        print(type(ASRTask.build_model(args).encoder).__name__)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "CNNTransformerEncoder"


def test_spawned_worker_sees_registration(asr_args):
    # DDP workers are started with "spawn": a new interpreter that only re-imports what it needs.
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        assert pool.apply(_build_in_child, (asr_args,)) == "CNNTransformerEncoder"


def test_cnn_subsampling_lengths_and_mask():
    from espnet_ext.nets.cnn_subsampling import Conv2dSubsampling4Layer

    layer = Conv2dSubsampling4Layer(80, 16, 0.0, channels=(2, 2, 4, 4)).eval()
    x = torch.randn(3, 17, 80)
    lengths = torch.tensor([17, 9, 1])
    mask = (torch.arange(17)[None, :] < lengths[:, None])[:, None, :]
    y, y_mask = layer(x, mask)
    assert y.shape == (3, 5, 16)  # ceil(ceil(17 / 2) / 2)
    assert y_mask.squeeze(1).sum(1).tolist() == [5, 3, 1]  # ceil(ceil(L / 2) / 2) per utterance
    # Padding must not change the valid frames' output: run utterance 2 alone, unpadded.
    alone, _ = layer(x[1:2, :9], mask[1:2, :, :9])
    torch.testing.assert_close(alone[0, :2], y[1, :2], atol=1e-5, rtol=1e-5)


def test_a_name_taken_by_another_class_is_refused(monkeypatch):
    import types

    from espnet_ext import registry
    from espnet_ext.errors import ConfigError

    task = types.ModuleType("fake_task")
    task.encoder_choices = types.SimpleNamespace(classes={"conv": torch.nn.Conv1d})
    monkeypatch.setitem(sys.modules, "fake_task", task)
    monkeypatch.setattr(registry, "REGISTRY", {})
    registry.register("fake_task", "encoder_choices", "Conv", "torch.nn:Conv1d")  # same class: fine
    with pytest.raises(
        ConfigError, match="^key 'conv': fake_task.encoder_choices already has a different class"
    ):
        registry.register("fake_task", "encoder_choices", "conv", "torch.nn:Linear")
    assert task.encoder_choices.classes["conv"] is torch.nn.Conv1d
