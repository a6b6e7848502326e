"""Multiformer encoder and the S2T conv1d front end: ESPnet parity, lengths by hand, configs refused."""

import pytest
import torch
from compiled_check import eager_and_compiled, graph_breaks, graphs, same_step
from espnet2.asr.encoder.transformer_encoder import TransformerEncoder

from espnet_ext.attention import head_kinds
from espnet_ext.errors import ConfigError
from espnet_ext.nets.multiformer_encoder import (
    MultiformerEncoder,
    S2TTransformerEncoder,
    parse_blocks,
)
from espnet_ext.nets.relaxed_transformer import RelaxedTransformerEncoder
from espnet_ext.nets.s2t_conv1d_subsampler import S2TConv1dSubsampler

TINY = dict(output_size=32, attention_heads=4, linear_units=64, use_flash_attn=False)


def batch(lengths=(40, 31, 12), feats=20, seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(lengths)
    xs = torch.randn(len(lengths), int(lengths.max()), feats, generator=g)
    xs = xs * (torch.arange(xs.size(1))[None, :, None] < lengths[:, None, None])  # zero padding
    return xs, lengths


# ------------------------------------------------------------------------------ S2T front end


@pytest.mark.parametrize("frames,expected", [(100, 25), (7, 2), (1, 1), (9, 3)])
def test_s2t_subsampler_lengths_by_hand(frames, expected):
    # Conv1d(k=5, s=2, p=2) keeps ⌊(T - 1)/2⌋ + 1 frames, twice.
    sub = S2TConv1dSubsampler(20, 32, 0.0, channels=16)
    out, lengths = sub(torch.randn(1, frames, 20), torch.tensor([frames]))
    assert out.shape == (1, expected, 32) and lengths.tolist() == [expected]


def test_s2t_subsampler_is_fairseqs_conv_glu_stack():
    sub = S2TConv1dSubsampler(20, 32, 0.0, channels=16).eval()
    # fairseq s2t_transformer_s: Conv1d(80, 1024, 5) and Conv1d(512, 2·256, 5), each with a bias.
    assert [tuple(c.weight.shape) for c in sub.convs] == [(16, 20, 5), (64, 8, 5)]
    x = torch.randn(1, 9, 20)
    h = torch.nn.functional.conv1d(x.transpose(1, 2), sub.convs[0].weight, sub.convs[0].bias, 2, 2)
    h = h[:, :8] * torch.sigmoid(h[:, 8:])  # GLU: first half gated by the second
    h = torch.nn.functional.conv1d(h, sub.convs[1].weight, sub.convs[1].bias, 2, 2)
    h = h[:, :32] * torch.sigmoid(h[:, 32:])
    expected = h.transpose(1, 2) * 32**0.5 + sub.pos_enc.pe[:, : h.size(-1)]
    torch.testing.assert_close(sub(x, torch.tensor([9]))[0], expected)


def test_s2t_subsampler_output_does_not_depend_on_batch_padding():
    sub = S2TConv1dSubsampler(20, 32, 0.0, channels=16).eval()
    xs, lengths = batch()
    out, out_lengths = sub(xs, lengths)
    n = int(out_lengths[2])
    alone, _ = sub(xs[2:, :12], lengths[2:])
    torch.testing.assert_close(out[2, :n], alone[0])


def test_no_downsampling_keeps_every_frame():
    enc = S2TTransformerEncoder(20, conv_channels=16, conv_strides=[1, 1], num_blocks=1, **TINY)
    out, lengths, _ = enc(*batch())
    assert out.size(1) == 40 and lengths.tolist() == [40, 31, 12]


def test_bad_front_end_options_are_refused():
    with pytest.raises(ConfigError, match="same"):
        S2TTransformerEncoder(20, conv_kernel_sizes=[5], conv_strides=[2, 2], **TINY)
    with pytest.raises(ConfigError, match="> 0"):
        S2TTransformerEncoder(20, conv_strides=[2, 0], **TINY)


# ---------------------------------------------------------------------------------- Encoder


def test_all_full_multiformer_is_espnets_transformer_encoder():
    torch.manual_seed(0)
    espnet = TransformerEncoder(20, input_layer="linear", num_blocks=2, **TINY).eval()
    ours = MultiformerEncoder(20, layers=["2 x (4 x Full)"], input_layer="linear", **TINY).eval()
    assert set(ours.state_dict()) == set(espnet.state_dict())
    ours.load_state_dict(espnet.state_dict())
    xs, lengths = batch()
    expected, expected_lengths, _ = espnet(xs, lengths)
    got, got_lengths, _ = ours(xs, lengths)
    assert torch.equal(got, expected) and torch.equal(got_lengths, expected_lengths)


def test_mixed_layers_run_forward_and_backward_with_padding():
    enc = MultiformerEncoder(
        20,
        layers=[
            {"layers": 1, "heads": ["4 x Conv(5, 2)"]},
            {"layers": 1, "heads": ["2 x Local(4)", "1 x Fast", "1 x Full"]},
            "1 x (2 x Full, 2 x Conv(7, 3))",
        ],
        conv_channels=16,
        **TINY,
    )
    assert [str(layer.self_attn.heads[0]) for layer in enc.encoders] == [
        "Conv(5, 2)",
        "Local(4)",
        "Full",
    ]
    xs, lengths = batch()
    out, out_lengths, _ = enc(xs, lengths)
    assert out.shape == (3, 10, 32) and out_lengths.tolist() == [10, 8, 3]
    out.sum().backward()
    conv = enc.encoders[0].self_attn.groups[0].conv_k
    assert conv.weight.grad is not None and conv.weight.grad.abs().sum() > 0


def test_relaxed_full_heads_through_attention_sites_equal_the_relaxed_encoder():
    sites = {"self_attn": {"gamma": 0.2}}
    torch.manual_seed(0)
    relaxed = RelaxedTransformerEncoder(
        20,
        input_layer="linear",
        num_blocks=2,
        dropout_rate=0.0,
        positional_dropout_rate=0.0,
        attention_sites=sites,
        **TINY,
    )
    ours = MultiformerEncoder(
        20,
        layers=["2 x (4 x Full)"],
        input_layer="linear",
        dropout_rate=0.0,
        positional_dropout_rate=0.0,
        attention_sites=sites,
        **TINY,
    )
    ours.load_state_dict(relaxed.state_dict())
    ours.train(), relaxed.train()
    xs, lengths = batch()
    torch.testing.assert_close(ours(xs, lengths)[0], relaxed(xs, lengths)[0], atol=1e-5, rtol=1e-5)
    ours.eval()
    plain = MultiformerEncoder(20, layers=["2 x (4 x Full)"], input_layer="linear", **TINY).eval()
    plain.load_state_dict(relaxed.state_dict())
    assert torch.equal(ours(xs, lengths)[0], plain(xs, lengths)[0])  # training only by default


@pytest.mark.parametrize(
    "kwargs,key,message",
    [
        (dict(layers=["2 x (3 x Full)"]), r"encoder_conf.layers\[0\].heads", "gives 3 heads"),
        (
            dict(layers=["2 x (4 x Sparse)"]),
            r"encoder_conf.layers\[0\].heads\[0\]",
            "unknown attention kind",
        ),
        (
            dict(layers=["2 x (4 x Local(0))"]),
            r"encoder_conf.layers\[0\].heads\[0\]",
            "must be > 0",
        ),
        (
            dict(layers=["2 x (4 x Conv(5, 0))"]),
            r"encoder_conf.layers\[0\].heads\[0\]",
            "must be > 0",
        ),
        (
            dict(layers=[{"layers": 0, "heads": ["4 x Full"]}]),
            r"encoder_conf.layers\[0\].layers",
            "> 0",
        ),
        (
            dict(layers=[{"layer": 2, "heads": ["4 x Full"]}]),
            r"encoder_conf.layers\[0\]",
            "exactly",
        ),
        (dict(layers=["2 x (4 x Full)"], num_blocks=3), "encoder_conf.num_blocks", "differs"),
        (
            dict(layers=["1 x (3 x Full)"], attention_heads=3),
            "encoder_conf.attention_heads",
            "divisible",
        ),
        (
            dict(layers=["1 x (4 x Local(8))"], attention_sites={"self_attn": {"gamma": 0.1}}),
            "encoder_conf.attention_sites.self_attn",
            "no layer has one",
        ),
        (dict(layers=["1 x (4 x Full)"], conv_form="normal"), "encoder_conf.conv_form", "one of"),
        (
            dict(layers=["1 x (4 x Full)"], local_form="sliding"),
            "encoder_conf.local_form",
            "one of",
        ),
        (
            dict(layers=["1 x (4 x Full)", "1 x (4 x Local(8, 2))"], local_form="block"),
            r"encoder_conf.layers \(encoder layer 1\)",
            "block form",
        ),
    ],
)
def test_bad_configs_are_refused_at_build_time_naming_the_key(kwargs, key, message):
    options = {**TINY, **kwargs}
    with pytest.raises(ConfigError, match=message) as error:
        MultiformerEncoder(20, conv_channels=16, **options)
    assert __import__("re").search(key, str(error.value))


def test_head_forms_reach_every_layer_and_train():
    enc = MultiformerEncoder(
        20,
        layers=["1 x (2 x Local(9), 2 x Conv(5, 2))", "1 x (4 x Conv(7, 3))"],
        conv_form="depthwise",
        local_form="block",
        conv_channels=16,
        **TINY,
    )
    forms = [[g.form for g in layer.self_attn.groups] for layer in enc.encoders]
    assert forms == [["block", "depthwise"], ["depthwise"]]
    out, _, _ = enc(*batch())
    out.sum().backward()
    conv = enc.encoders[1].self_attn.groups[0].conv_k  # one depthwise convolution for the 4 heads
    assert conv.weight.shape == (8, 1, 7) and conv.weight.grad.abs().sum() > 0


def test_block_strings_and_mappings_parse_alike():
    a = parse_blocks(["6 x (2 x Local(64), 2 x Conv(5, 2))"], 4)
    b = parse_blocks([{"layers": 6, "heads": ["2 x Local(64)", "2 x Conv(5,2)"]}], 4)
    assert a == b and len(a) == 6


def test_registered_in_the_asr_and_st_tasks():
    from espnet2.tasks.asr import ASRTask

    from espnet_ext.registry import install
    from espnet_ext.tasks.st import STTask

    install()

    for task in (ASRTask, STTask):  # STTask: ours (espnet_ext.tasks.st), on ESPnet's ST tables
        encoders = next(c for c in task.class_choices_list if c.name == "encoder")
        assert encoders.get_class("multiformer") is MultiformerEncoder
        assert encoders.get_class("s2t_transformer") is S2TTransformerEncoder


def test_an_empty_utterance_gets_a_zero_context_in_conv_heads_as_in_full_heads():
    # ESPnet's masks never hold an empty utterance and padding ⌊κ/2⌋ keeps ⌈n/χ⌉ >= 1 frames of n >= 1,
    # so only a hand-made mask reaches this. A Conv head treats it as Full heads treat a query without
    # keys (ESPnet's convention: zero weights), with no host-side check that would stall a GPU.
    enc = MultiformerEncoder(
        20, layers=["1 x (4 x Full)", "1 x (4 x Conv(5, 2))"], input_layer="linear", **TINY
    )
    x = torch.randn(2, 9, 32)
    mask = torch.tensor([[True] * 9, [False] * 9]).unsqueeze(1)
    for layer in enc.encoders:
        out = layer.self_attn(x, x, x, mask)
        torch.testing.assert_close(out[1], layer.self_attn.linear_out.bias.expand(9, -1))
        torch.testing.assert_close(out[:1], layer.self_attn(x[:1], x[:1], x[:1], mask[:1]))


# ------------------------------------------------------------------------------ compiled layers

TRAIN_ST_LAYERS = [
    "1 x (4 x Conv(5, 2))",
    "1 x (2 x Local(4), 2 x Conv(5, 2))",
    "1 x (2 x Full, 2 x Conv(7, 3))",
]


def encoder_output(encoder, xs, lengths):
    return encoder(xs, lengths)[0]


@pytest.mark.parametrize(
    "device,local_path",
    [
        ("cpu", "blocked"),
        ("cpu", "one-call"),
        ("cpu", "chunked"),
        pytest.param("cuda", "one-call", marks=pytest.mark.gpu),
        pytest.param("cuda", "chunked", marks=pytest.mark.gpu),
    ],
    ids=["per-group", "one-call", "chunked", "cuda", "cuda-chunked"],
)
def test_compiled_layers_trace_whole_and_equal_the_eager_encoder(device, local_path, monkeypatch):
    # train_st.yaml's three kinds of layer; "one-call": CUDA's path of short utterances (Local's dense band,
    # forced on the CPU); "chunked": CUDA's path of long ones (Local's band in chunks, of 8 frames here)
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    if local_path == "one-call":
        monkeypatch.setattr(head_kinds, "LOCAL_DENSE_DEVICES", {"cpu", "cuda"})
    if local_path == "chunked":
        monkeypatch.setattr(head_kinds, "LOCAL_DENSE_MAX_FRAMES", 0)
        monkeypatch.setattr(head_kinds, "LOCAL_CHUNK_DEVICES", {"cpu", "cuda"})
        monkeypatch.setattr(head_kinds, "LOCAL_CHUNK_FRAMES", 8)
    options = dict(layers=TRAIN_ST_LAYERS, conv_channels=16, dropout_rate=0.0, **TINY)
    options.update(positional_dropout_rate=0.0, attention_dropout_rate=0.0)
    eager, compiled = eager_and_compiled(
        lambda **extra: MultiformerEncoder(20, **options, **extra), device
    )
    assert list(compiled.state_dict()) == list(eager.state_dict())  # checkpoints load either way
    # another length: dynamic shapes, no retrace (the blocked Local path traces again for a length that
    # is a multiple of its block when the first was not: 10 and 12 frames are both even)
    for lengths in [(40, 31, 12), (48, 36, 20)]:
        xs, ilens = (x.to(device) for x in batch(lengths))
        same_step(eager, compiled, encoder_output, xs, ilens)
    assert graph_breaks() == {} and graphs() == 3  # one graph per kind of layer


def test_an_unknown_compile_backend_is_refused_naming_the_key():
    with pytest.raises(
        ConfigError, match="encoder_conf.compile_backend.*not a torch.compile backend"
    ):
        S2TTransformerEncoder(20, compile_layers=True, compile_backend="nope", **TINY)


def test_compiled_fast_heads_redraw_on_schedule_without_new_graphs():
    # Performer's redraw counter runs outside the compiled graph (one break), so calls add no graphs
    options = dict(layers=["2 x (2 x Fast(16), 2 x Full)"], conv_channels=16, redraw_interval=2)
    options.update(
        dropout_rate=0.0, positional_dropout_rate=0.0, attention_dropout_rate=0.0, **TINY
    )
    eager, compiled = eager_and_compiled(lambda **extra: MultiformerEncoder(20, **options, **extra))
    xs, ilens = batch()
    for call in range(5):  # redraws before calls 3 and 5
        same_step(eager, compiled, encoder_output, xs, ilens, seed=call)
        if call == 0:
            first = graphs()
    assert graphs() == first
    assert [layer.self_attn.calls_since_redraw for layer in compiled.encoders] == [1, 1]


def test_a_dataparallel_replica_of_compiled_layers_is_refused():
    # a replica's compiled layers would run the original's parameters (the compiled call is bound to them)
    encoder = S2TTransformerEncoder(20, compile_layers=True, compile_backend="aot_eager", **TINY)
    replica = encoder._replicate_for_data_parallel()
    with pytest.raises(ConfigError, match="DDP.*not torch.nn.DataParallel"):
        replica(*batch())
    assert encoder(*batch())[0].shape == (3, 10, 32)  # the module itself runs
