"""Loading AV-HuBERT checkpoints: a model written with fairseq's parameter names (pre-trained and
fine-tuned layouts) gives the same encoder output after the name map; every misfit is listed."""

import argparse
import math
import os
import sys

import pytest
import torch
import torch.nn.functional as F
import yaml
from espnet2.asr.encoder.avhubert_encoder import ResEncoder
from espnet2.torch_utils.load_pretrained_model import load_pretrained_model
from omegaconf import OmegaConf

from espnet_ext.errors import ConfigError, InputError
from espnet_ext.nets.avhubert import checkpoint
from espnet_ext.nets.baselines.visual_frontend import LRS3_PIXEL_MEAN, LRS3_PIXEL_STD
from espnet_ext.registry import build_model
from tests.fairseq_pickles import fairseq_classes

# fairseq's checkpoints hold torch.nn.utils.weight_norm's names (weight_g, weight_v): use that API.
pytestmark = pytest.mark.filterwarnings("ignore:.*weight_norm.*:FutureWarning")

DIM, HEADS, FFN, LAYERS, KERNEL, GROUPS = 16, 2, 24, 2, 4, 2


class FairseqNamedLayer(torch.nn.Module):
    """fairseq's TransformerSentenceEncoderLayer names, computed with torch's own attention function."""

    def __init__(self, pre_ln):
        super().__init__()
        self.self_attn = torch.nn.Module()
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            setattr(self.self_attn, name, torch.nn.Linear(DIM, DIM))
        self.self_attn_layer_norm = torch.nn.LayerNorm(DIM)
        self.fc1, self.fc2 = torch.nn.Linear(DIM, FFN), torch.nn.Linear(FFN, DIM)
        self.final_layer_norm = torch.nn.LayerNorm(DIM)
        self.pre_ln = pre_ln

    def attend(self, x, padding):  # x (T, B, C)
        a = self.self_attn
        out, _ = F.multi_head_attention_forward(
            x, x, x, DIM, HEADS, None, torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias]),
            None, None, False, 0.0, a.out_proj.weight, a.out_proj.bias, training=False,
            key_padding_mask=padding, need_weights=False, use_separate_proj_weight=True,
            q_proj_weight=a.q_proj.weight, k_proj_weight=a.k_proj.weight,
            v_proj_weight=a.v_proj.weight,
        )  # fmt: skip
        return out

    def forward(self, x, padding):
        ln1, ln2 = self.self_attn_layer_norm, self.final_layer_norm
        if self.pre_ln:
            x = x + self.attend(ln1(x), padding)
            return x + self.fc2(F.gelu(self.fc1(ln2(x))))
        x = ln1(x + self.attend(x, padding))
        return ln2(x + self.fc2(F.gelu(self.fc1(x))))


class FairseqNamedAVHubert(torch.nn.Module):
    """AVHubertModel's parameter names (avhubert/hubert.py) and its video-only extract_finetune."""

    def __init__(self, pre_ln):
        super().__init__()
        self.feature_extractor_video = torch.nn.Module()
        self.feature_extractor_video.resnet = ResEncoder(relu_type="prelu", weights=None)
        self.feature_extractor_video.proj = torch.nn.Linear(512, DIM)
        self.feature_extractor_audio = torch.nn.Module()
        self.feature_extractor_audio.proj = torch.nn.Linear(104, DIM)
        self.layer_norm = torch.nn.LayerNorm(2 * DIM)
        self.post_extract_proj = torch.nn.Linear(2 * DIM, DIM)
        self.mask_emb = torch.nn.Parameter(torch.rand(DIM))
        self.encoder = torch.nn.Module()
        conv = torch.nn.Conv1d(DIM, DIM, KERNEL, padding=KERNEL // 2, groups=GROUPS)
        torch.nn.init.normal_(conv.weight, std=math.sqrt(4 / (KERNEL * DIM)))
        conv = torch.nn.utils.weight_norm(conv, name="weight", dim=2)  # weight_g, weight_v
        with torch.no_grad():
            conv.weight_g.mul_(1.5)
        self.encoder.pos_conv = torch.nn.Sequential(conv)
        self.encoder.layers = torch.nn.ModuleList(FairseqNamedLayer(pre_ln) for _ in range(LAYERS))
        self.encoder.layer_norm = torch.nn.LayerNorm(DIM)
        self.final_proj = torch.nn.Linear(DIM, 8)
        self.label_embs_concat = torch.nn.Parameter(torch.rand(5, 8))
        self.pre_ln = pre_ln

    def forward(self, video):  # (B, T, H, W) in [0, 1], full length
        x = (video - LRS3_PIXEL_MEAN) / LRS3_PIXEL_STD
        v = self.feature_extractor_video.proj(
            self.feature_extractor_video.resnet(x.unsqueeze(1)).transpose(1, 2)
        )
        x = self.post_extract_proj(self.layer_norm(torch.cat([torch.zeros_like(v), v], -1)))
        conv = F.gelu(self.encoder.pos_conv[0](x.transpose(1, 2))[:, :, :-1])  # SamePad
        x = x + conv.transpose(1, 2)
        if not self.pre_ln:
            x = self.encoder.layer_norm(x)
        x = x.transpose(0, 1)
        for layer in self.encoder.layers:
            x = layer(x, None)
        x = x.transpose(0, 1)
        return self.encoder.layer_norm(x) if self.pre_ln else x


def model_config(tmp_path, pre_ln, **encoder):
    config = {
        "frontend": "conv3d_resnet18",
        "normalize": None,
        "encoder": "relaxed_avhubert",
        "encoder_conf": {"output_size": DIM, "attention_heads": HEADS, "linear_units": FFN,
                         "num_blocks": LAYERS, "conv_pos": KERNEL, "conv_pos_groups": GROUPS,
                         "layer_norm_first": pre_ln, **encoder},
        "decoder": "relaxed_transformer",
        "decoder_conf": {"attention_heads": 2, "linear_units": 8, "num_blocks": 1},
    }  # fmt: skip
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "tokens.txt").write_text("<blank>\n<unk>\na\n<sos/eos>\n")
    return ["--config", str(tmp_path / "c.yaml"), "--token_list", str(tmp_path / "tokens.txt")]


def our_model(args):
    return build_model("espnet_ext.tasks.lip_reading:LipReadingTask", args).eval()


def encode(model, video):
    with torch.no_grad():
        lengths = torch.full((video.size(0),), video.size(1))
        features, lengths = model.frontend(video, lengths)
        return model.encoder(features, lengths)[0]


def fairseq_cfg(pre_ln, heads=HEADS):
    return {"encoder_layers": LAYERS, "encoder_embed_dim": DIM, "encoder_attention_heads": heads,
            "layer_norm_first": pre_ln, "modality_fuse": "concat"}  # fmt: skip


def save_checkpoint(path, state, cfg, finetuned=False):
    if finetuned:
        state = {checkpoint.FINETUNED_PREFIX + k: v for k, v in state.items()}
        state["decoder.embed_tokens.weight"] = torch.zeros(7, DIM)
        state["decoder.layers.0.fc1.weight"] = torch.zeros(4, DIM)
        cfg = {"model": {"w2v_args": {"model": cfg}}}
    else:
        cfg = {"model": cfg}
    torch.save({"model": state, "cfg": cfg}, path)
    return path


@pytest.mark.parametrize("pre_ln,finetuned", [(True, False), (False, True)])
def test_round_trip_gives_the_fairseq_model_outputs(tmp_path, pre_ln, finetuned):
    torch.manual_seed(0)
    reference = FairseqNamedAVHubert(pre_ln).eval()
    for module in reference.modules():  # non-trivial normalisation statistics
        if isinstance(module, torch.nn.BatchNorm3d | torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.1, 0.1)
            module.running_var.uniform_(0.5, 1.5)
    path = save_checkpoint(tmp_path / "avhubert.pt", reference.state_dict(),
                           fairseq_cfg(pre_ln), finetuned)  # fmt: skip
    model = our_model(model_config(tmp_path, pre_ln))
    ignored = checkpoint.load_avhubert(model, path)
    video = torch.rand(2, 5, 24, 24)
    with torch.no_grad():
        want = reference(video)
    torch.testing.assert_close(encode(model, video), want, atol=1e-4, rtol=1e-4)
    expected_ignored = {"feature_extractor_audio.proj.weight", "feature_extractor_audio.proj.bias",
                        "mask_emb", "label_embs_concat", "final_proj.weight", "final_proj.bias"}  # fmt: skip
    if finetuned:
        expected_ignored = {checkpoint.FINETUNED_PREFIX + k for k in expected_ignored}
        expected_ignored |= {"decoder.embed_tokens.weight", "decoder.layers.0.fc1.weight"}
    assert set(ignored) == expected_ignored


def test_init_file_for_espnet_init_param(tmp_path):
    torch.manual_seed(0)
    reference = FairseqNamedAVHubert(True).eval()
    path = save_checkpoint(tmp_path / "avhubert.pt", reference.state_dict(), fairseq_cfg(True))
    args = model_config(tmp_path, True)
    out = tmp_path / "init.pth"
    checkpoint.main(["--checkpoint", str(path), *args, "--out", str(out)])
    fresh = our_model(args)
    load_pretrained_model(str(out), fresh, ignore_init_mismatch=False)  # ESPnet's --init_param
    video = torch.rand(1, 4, 24, 24)
    with torch.no_grad():
        want = reference(video)
    torch.testing.assert_close(encode(fresh, video), want, atol=1e-4, rtol=1e-4)


def test_misfits_are_listed(tmp_path):
    torch.manual_seed(0)
    state = FairseqNamedAVHubert(True).state_dict()
    state["encoder.layers.0.self_attn.rel_bias"] = torch.zeros(3)  # a name we do not know
    del state["encoder.layers.1.fc2.bias"]
    path = save_checkpoint(tmp_path / "odd.pt", state, fairseq_cfg(True))
    model = our_model(model_config(tmp_path, True))
    with pytest.raises(InputError, match=r"odd\.pt.*encoder\.layers\.0\.self_attn\.rel_bias"):
        checkpoint.load_avhubert(model, path)
    del state["encoder.layers.0.self_attn.rel_bias"]
    save_checkpoint(path, state, fairseq_cfg(True))
    with pytest.raises(InputError, match=r"missing: encoder\.layers\.1\.fc2\.bias"):
        checkpoint.load_avhubert(model, path)


def test_shapes_that_do_not_match_the_config(tmp_path):
    torch.manual_seed(0)
    path = save_checkpoint(tmp_path / "a.pt", FairseqNamedAVHubert(True).state_dict(), {})
    wider = our_model(model_config(tmp_path, True, linear_units=32))
    with pytest.raises(InputError) as error:
        checkpoint.load_avhubert(wider, path)
    assert "shape of encoder.layers.0.fc1.weight: checkpoint (24, 16), model (32, 16)" in str(
        error.value
    )
    assert "encoder.layers.1.fc2.weight" in str(error.value)  # every misfit, not the first only
    deeper = our_model(model_config(tmp_path, True, num_blocks=3))
    with pytest.raises(InputError, match=r"missing: encoder\.layers\.2\.fc1\.bias"):
        checkpoint.load_avhubert(deeper, path)
    # Head count is invisible in shapes: the checkpoint's config is checked.
    save_checkpoint(path, FairseqNamedAVHubert(True).state_dict(), fairseq_cfg(True, heads=4))
    with pytest.raises(ConfigError, match="encoder_attention_heads: checkpoint 4, config 2"):
        checkpoint.load_avhubert(our_model(model_config(tmp_path, True)), path)


def test_not_a_checkpoint(tmp_path):
    bad = tmp_path / "x.pt"
    bad.write_bytes(b"not a pickle")
    model = our_model(model_config(tmp_path, True))
    with pytest.raises(InputError, match="x.pt"):
        checkpoint.load_avhubert(model, bad)
    torch.save({"weights": {}}, bad)
    with pytest.raises(InputError, match="no 'model' state dict"):
        checkpoint.load_avhubert(model, bad)


def fairseq_modules(pre_ln):
    """The classes a released checkpoint of this test's sizes pickles (tests/fairseq_pickles.py)."""
    return fairseq_classes(
        {
            "encoder_layers": LAYERS,
            "encoder_embed_dim": DIM,
            "encoder_attention_heads": HEADS,
            "layer_norm_first": pre_ln,
            "modality_fuse": "concat",
        }
    )


@pytest.mark.parametrize("finetuned", [False, True])
def test_a_checkpoint_with_fairseq_objects_loads_without_fairseq(tmp_path, monkeypatch, finetuned):
    torch.manual_seed(0)
    reference = FairseqNamedAVHubert(True).eval()
    path = tmp_path / "released.pt"
    with monkeypatch.context() as importable:  # fairseq "installed" while saving only
        modules = fairseq_modules(True)
        for name, module in modules.items():
            importable.setitem(sys.modules, name, module)
        model_cfg = OmegaConf.structured(modules["avhubert.hubert"].AVHubertConfig())
        if finetuned:
            model_cfg = OmegaConf.create({"w2v_path": "x.pt", "w2v_args": {"model": model_cfg}})
        dictionary = modules["fairseq.data.dictionary"].Dictionary(["<s>", "<pad>", "</s>", "a"])
        state = save_checkpoint(tmp_path / "plain.pt", reference.state_dict(), {}, finetuned)
        torch.save({
            "model": torch.load(state)["model"], "args": argparse.Namespace(arch="av_hubert"),
            "cfg": OmegaConf.create({"model": model_cfg, "task": {"labels": ["wrd"]}}),
            "task_state": {"dictionaries": [dictionary]}, "extra_state": {"epoch": 3},
        }, path)  # fmt: skip
    assert "fairseq" not in sys.modules and "avhubert" not in sys.modules
    weights, config = checkpoint.read_checkpoint(path)
    assert config["encoder_attention_heads"] == HEADS and config["layer_norm_first"] is True
    assert type(config["extractor_mode"]).__module__ == "fairseq.dataclass.constants"
    model = our_model(model_config(tmp_path, True))
    checkpoint.load_avhubert(model, path)  # the architecture check reads the omegaconf cfg
    video = torch.rand(1, 4, 24, 24)
    with torch.no_grad():
        want = reference(video)
    torch.testing.assert_close(encode(model, video), want, atol=1e-4, rtol=1e-4)


class RunsACommand:
    def __reduce__(self):
        return os.system, ("echo loaded",)


def test_a_checkpoint_that_would_run_code_is_refused(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"model": {}, "cfg": {"model": {}}, "hook": RunsACommand()}, path)
    with pytest.raises(InputError, match=r"evil\.pt.*refused to load (posix|nt)\.system"):
        checkpoint.read_checkpoint(path)
