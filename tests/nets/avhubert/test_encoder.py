"""AV-HuBERT encoder: layers against PyTorch's own Transformer layer, the positional convolution against
torch's weight norm, the paper's sizes, LayerDrop, padding, relaxed self-attention, the task build."""

import pytest
import torch
import yaml
from compiled_check import eager_and_compiled, graph_breaks, graphs, same_step

from espnet_ext.attention.relaxed import RelaxedMultiHeadedAttention
from espnet_ext.errors import ConfigError
from espnet_ext.nets.avhubert.encoder import (
    AVHubertEncoder,
    AVHubertEncoderLayer,
    ConvPositionalEmbedding,
)
from espnet_ext.registry import build_model

TINY = dict(output_size=16, attention_heads=2, linear_units=24, num_blocks=3, conv_pos=4,
            conv_pos_groups=2)  # fmt: skip


def quiet(**options):
    """No dropout, no LayerDrop: deterministic in training mode too."""
    return {
        **TINY,
        "dropout_rate": 0.0,
        "activation_dropout_rate": 0.0,
        "layerdrop": 0.0,
        **options,
    }


@pytest.mark.parametrize("layer_norm_first", [True, False])
def test_layer_equals_torch_transformer_layer(layer_norm_first):
    torch.manual_seed(0)
    ours = AVHubertEncoderLayer(16, 4, 24, 0.0, 0.0, 0.0, layer_norm_first).eval()
    ref = torch.nn.TransformerEncoderLayer(
        16, 4, 24, dropout=0.0, activation="gelu", batch_first=True, norm_first=layer_norm_first
    ).eval()
    attn = ours.self_attn
    with torch.no_grad():
        ref.self_attn.in_proj_weight.copy_(
            torch.cat([attn.linear_q.weight, attn.linear_k.weight, attn.linear_v.weight])
        )
        ref.self_attn.in_proj_bias.copy_(
            torch.cat([attn.linear_q.bias, attn.linear_k.bias, attn.linear_v.bias])
        )
        pairs = [(ref.self_attn.out_proj, attn.linear_out), (ref.linear1, ours.fc1),
                 (ref.linear2, ours.fc2), (ref.norm1, ours.self_attn_layer_norm),
                 (ref.norm2, ours.final_layer_norm)]  # fmt: skip
        for dst, src in pairs:
            dst.weight.copy_(src.weight)
            dst.bias.copy_(src.bias)
    x = torch.randn(2, 7, 16)
    lengths = torch.tensor([7, 5])
    keep = torch.arange(7)[None, :] < lengths[:, None]
    with torch.no_grad():
        got = ours(x, keep[:, None, :])
        want = ref(x, src_key_padding_mask=~keep)
    torch.testing.assert_close(got[0], want[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[1, :5], want[1, :5], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kernel", [4, 5])
def test_positional_convolution_equals_weight_normed_conv1d(kernel):
    torch.manual_seed(0)
    ours = ConvPositionalEmbedding(8, kernel_size=kernel, groups=2)
    with torch.no_grad():
        ours.weight_g.mul_(torch.rand_like(ours.weight_g) + 0.5)  # g no longer equals ||v||
    conv = torch.nn.Conv1d(8, 8, kernel, padding=kernel // 2, groups=2)
    conv = torch.nn.utils.parametrizations.weight_norm(conv, name="weight", dim=2)
    with torch.no_grad():
        conv.parametrizations.weight.original0.copy_(ours.weight_g)
        conv.parametrizations.weight.original1.copy_(ours.weight_v)
        conv.bias.copy_(ours.bias)
    x = torch.randn(2, 9, 8)
    want = torch.nn.functional.gelu(conv(x.transpose(1, 2)))
    if kernel % 2 == 0:
        want = want[:, :, :-1]  # fairseq's SamePad
    torch.testing.assert_close(ours(x), want.transpose(1, 2))
    assert ours(x).shape == x.shape


def count_layer_parameters(d, ffn):
    """By hand: q, k, v, out projections (+ biases), two FFN linears, two layer norms."""
    return 4 * (d * d + d) + (d * ffn + ffn) + (ffn * d + d) + 2 * 2 * d


@pytest.mark.parametrize(
    "size,layers,dim,heads,ffn,pre_ln",
    [("base", 12, 768, 12, 3072, False), ("large", 24, 1024, 16, 4096, True)],
)
def test_paper_sizes(size, layers, dim, heads, ffn, pre_ln):
    with torch.device("meta"):  # the architecture only, no memory
        encoder = AVHubertEncoder(512, size=size)
    assert encoder.output_size() == dim and len(encoder.layers) == layers
    assert encoder.layers[0].self_attn.h == heads and encoder.layer_norm_first is pre_ln
    in_layers = sum(p.numel() for p in encoder.layers.parameters())
    assert in_layers == layers * count_layer_parameters(dim, ffn)
    # AV-HuBERT's dropouts 0.1 / 0.1 / 0.0 (residual, activation, attention) and LayerDrop.
    layer = encoder.layers[0]
    assert (layer.dropout.p, layer.activation_dropout.p, layer.self_attn.dropout_rate) == (
        0.1, 0.1, 0.0)  # fmt: skip
    assert encoder.layerdrop == 0.1
    with torch.device("meta"):
        smaller = AVHubertEncoder(512, size="large", num_blocks=2)
    assert len(smaller.layers) == 2 and smaller.output_size() == 1024


def test_shapes_and_padding():
    torch.manual_seed(0)
    encoder = AVHubertEncoder(10, **TINY).eval()
    x = torch.randn(2, 9, 10)
    lengths = torch.tensor([9, 6])
    with torch.no_grad():
        out, out_lengths, _ = encoder(x, lengths)
        alone, _, _ = encoder(x[1:, :6], lengths[1:])
    assert out.shape == (2, 9, 16) and out_lengths.tolist() == [9, 6]
    assert out[1, 6:].abs().max() == 0
    torch.testing.assert_close(out[1, :6], alone[0], atol=1e-5, rtol=1e-5)


def test_layerdrop_only_in_training():
    torch.manual_seed(0)
    encoder = AVHubertEncoder(10, **quiet(layerdrop=1.0, layer_norm_first=False))
    x, lengths = torch.randn(2, 5, 10), torch.tensor([5, 5])
    encoder.train()
    dropped, _, _ = encoder(x, lengths)
    with torch.no_grad():  # every layer dropped: only the input path is left
        h = encoder.post_proj(encoder.fuse_norm(torch.cat([0 * x[..., :1].expand(2, 5, 16),
                                                           encoder.video_proj(x)], -1)))  # fmt: skip
        h = encoder.layer_norm(h + encoder.pos_conv(h))
    torch.testing.assert_close(dropped, h)
    encoder.eval()
    with torch.no_grad():
        full, _, _ = encoder(x, lengths)
    assert (full - h).abs().max() > 1e-3  # at inference every layer runs
    # p = 0.5: the layers run in training vary from batch to batch
    encoder.layerdrop = 0.5
    encoder.train()
    outputs = {tuple(encoder(x, lengths)[0].detach().flatten()[:4].tolist()) for _ in range(20)}
    assert len(outputs) > 2


def test_relaxed_self_attention_gamma_zero_is_plain():
    x, lengths = torch.randn(2, 7, 10), torch.tensor([7, 4])
    outputs = {}
    for name, sites in [("plain", None), ("g0", {"self_attn": {"gamma": 0.0}}),
                        ("g", {"self_attn": {"gamma": 0.3}})]:  # fmt: skip
        torch.manual_seed(0)
        encoder = AVHubertEncoder(10, **quiet(attention_sites=sites, layer_norm_first=True))
        encoder.train()
        outputs[name] = encoder(x, lengths)[0].detach()
        encoder.eval()
        with torch.no_grad():
            outputs[name + "_eval"] = encoder(x, lengths)[0]
        if name == "g":
            assert isinstance(encoder.layers[0].self_attn, RelaxedMultiHeadedAttention)
            encoder.layers[0].self_attn.matched_inference = True
            with torch.no_grad():
                outputs["g_matched"] = encoder(x, lengths)[0]
    torch.testing.assert_close(outputs["g0"], outputs["plain"])
    assert (outputs["g"] - outputs["plain"]).abs().max() > 1e-4  # relaxed in training
    torch.testing.assert_close(outputs["g_eval"], outputs["plain_eval"])  # not at inference
    assert (outputs["g_matched"] - outputs["plain_eval"]).abs().max() > 1e-4


@pytest.mark.parametrize("sites", [None, {"self_attn": {"gamma": 0.25}}], ids=["plain", "relaxed"])
def test_sdpa_attention_equals_espnets_explicit_attention(sites):
    """``use_sdpa``: the same outputs and gradients in training and at inference, padded rows included; a
    relaxed site relaxes its own weights in training and takes the fused call at inference."""
    x, lengths = torch.randn(3, 9, 10), torch.tensor([9, 6, 1])
    results = []
    for use_sdpa in (True, False):
        torch.manual_seed(0)
        encoder = AVHubertEncoder(10, **quiet(layer_norm_first=True, attention_sites=sites,
                                              use_sdpa=use_sdpa))  # fmt: skip
        assert encoder.layers[0].self_attn.use_sdpa is use_sdpa
        inputs = x.clone().requires_grad_()
        out = encoder.train()(inputs, lengths)[0]
        out.pow(2).sum().backward()
        with torch.no_grad():
            inference = encoder.eval()(x, lengths)[0]
        results.append((out.detach(), inputs.grad, inference))
    for got, expected in zip(*results):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_bad_options():
    with pytest.raises(ConfigError, match="size"):
        AVHubertEncoder(10, size="huge")
    with pytest.raises(ConfigError, match="num_blocks"):
        AVHubertEncoder(10, output_size=16, attention_heads=2, linear_units=8)
    with pytest.raises(ConfigError, match="no attention site 'src_attn'"):
        AVHubertEncoder(10, **TINY, attention_sites={"src_attn": {"gamma": 0.1}})


def test_built_through_the_lip_reading_task(tmp_path):
    config = {
        "frontend": "conv3d_resnet18",
        "frontend_conf": {"relu_type": "relu", "resnet_stages": 1},
        "normalize": None,
        "encoder": "relaxed_avhubert",
        "encoder_conf": dict(TINY, attention_sites={"self_attn": {"gamma": 0.005}}),
        "decoder": "relaxed_transformer",
        "decoder_conf": {"attention_heads": 2, "linear_units": 24, "num_blocks": 1},
        "model_conf": {"ctc_weight": 0.1, "lsm_weight": 0.1},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "tokens.txt").write_text("<blank>\n<unk>\na\nb\n<sos/eos>\n")
    model = build_model(
        "espnet_ext.tasks.lip_reading:LipReadingTask",
        ["--config", str(tmp_path / "c.yaml"), "--token_list", str(tmp_path / "tokens.txt"),
         "--token_type", "char"],
    )  # fmt: skip
    assert isinstance(model.encoder, AVHubertEncoder)
    assert model.encoder.layers[2].self_attn.gamma == 0.005
    assert model.criterion_att.smoothing == 0.1
    loss, _, _ = model(
        video=torch.rand(2, 6, 24, 24),
        video_lengths=torch.tensor([6, 4]),
        text=torch.tensor([[2, 3], [3, -1]]),
        text_lengths=torch.tensor([2, 1]),
    )
    loss.backward()
    assert torch.isfinite(loss) and model.encoder.pos_conv.weight_g.grad is not None


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_compiled_layers_trace_whole_and_equal_the_eager_encoder(device):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    # the relaxed large config's layer kind (pre-LN, relaxed self-attention); lengths 9 and 11, not d
    options = quiet(layer_norm_first=True, attention_sites={"self_attn": {"gamma": 0.25}})
    eager, compiled = eager_and_compiled(
        lambda **extra: AVHubertEncoder(10, **options, **extra).train(), device
    )
    for lengths in ([9, 6], [11, 11]):
        x = torch.randn(2, max(lengths), 10, device=device)
        lengths = torch.tensor(lengths, device=device)
        same_step(eager, compiled, lambda encoder, x, n: encoder(x, n)[0], x, lengths)
    assert graph_breaks() == {} and graphs() == 1
