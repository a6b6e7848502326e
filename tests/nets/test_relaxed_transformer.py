"""Relaxed encoders/decoders through ESPnet2's ASR and MT tasks, and LM shallow fusion in ESPnet's beam search."""

import pytest
import torch
import yaml
from compiled_check import eager_and_compiled, graph_breaks, graphs, same_step

from espnet_ext.attention.relaxed import RelaxedMultiHeadedAttention
from espnet_ext.errors import ConfigError
from espnet_ext.registry import build_model

TOKENS = ["<blank>", "<unk>", "a", "b", "c", "d", "<sos/eos>"]


def write_config(tmp_path, config, name="model.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config))
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("\n".join(TOKENS) + "\n")
    return ["--config", str(path), "--token_list", str(tokens), "--token_type", "char"]


def asr_config(encoder_sites=None, decoder_sites=None):
    return {
        "encoder": "relaxed_cnn_transformer",
        "encoder_conf": {
            "output_size": 16,
            "attention_heads": 2,
            "linear_units": 32,
            "num_blocks": 2,
            "conv_channels": [2, 2, 4, 4],
            "attention_sites": encoder_sites,
        },
        "decoder": "relaxed_transformer",
        "decoder_conf": {
            "attention_heads": 2,
            "linear_units": 32,
            "num_blocks": 1,
            "attention_sites": decoder_sites,
        },
        "frontend": None,
        "model_conf": {"ctc_weight": 0.3},
    }


def test_asr_task_builds_and_trains_relaxed_sites(tmp_path):
    args = write_config(
        tmp_path, asr_config({"self_attn": {"gamma": 0.01}}, {"src_attn": {"gamma": 0.25}})
    )
    model = build_model("asr", args + ["--input_size", "12"])
    assert model.encoder.encoders[0].self_attn.gamma == 0.01
    assert model.decoder.decoders[0].src_attn.gamma == 0.25
    loss, _, _ = model(
        speech=torch.randn(2, 24, 12),
        speech_lengths=torch.tensor([24, 17]),
        text=torch.tensor([[2, 3], [4, -1]]),
        text_lengths=torch.tensor([2, 1]),
    )
    loss.backward()
    assert torch.isfinite(loss)


def test_mt_task_cutoff_model_with_relaxed_self_attention(tmp_path):
    config = {
        "model": "cutoff",
        "model_conf": {"token_cutoff_rate": 0.1, "num_augmented": 1, "consistency_weight": 5.0},
        "frontend": "embed",
        "frontend_conf": {"embed_dim": 16, "positional_dropout_rate": 0.0},
        "encoder": "relaxed_transformer",
        "encoder_conf": {
            "output_size": 16,
            "attention_heads": 2,
            "linear_units": 32,
            "num_blocks": 1,
            "input_layer": None,
            "attention_sites": {"self_attn": {"gamma": 0.05, "matched_inference": True}},
        },
        "decoder": "relaxed_transformer",
        "decoder_conf": {
            "attention_heads": 2,
            "linear_units": 32,
            "num_blocks": 1,
            "attention_sites": {"src_attn": {"smooth_focus": True}},
        },
    }
    args = write_config(tmp_path, config)
    model = build_model("mt", args + ["--src_token_list", args[3], "--src_token_type", "char"])
    assert isinstance(model.encoder.encoders[0].self_attn, RelaxedMultiHeadedAttention)
    loss, _, _ = model(
        text=torch.tensor([[2, 3, 4]]),
        text_lengths=torch.tensor([3]),
        src_text=torch.tensor([[5, 4, 3, 2]]),
        src_text_lengths=torch.tensor([4]),
    )
    loss.backward()
    assert torch.isfinite(loss)


def test_bad_gamma_in_yaml_is_refused_when_the_model_is_built(tmp_path):
    args = write_config(tmp_path, asr_config(None, {"src_attn": {"gamma": 2.0}}))
    with pytest.raises(
        ConfigError, match="decoder relaxed_transformer: attention_sites.src_attn.gamma"
    ):
        build_model("asr", args + ["--input_size", "12"])


def test_lm_shallow_fusion_changes_hypotheses_as_the_weight_grows(tmp_path):
    """log P + λ log P_LM in ESPnet's beam search, with our tied Transformer LM."""
    from espnet.nets.batch_beam_search import BatchBeamSearch
    from espnet.nets.scorers.length_bonus import LengthBonus
    from espnet2.lm.espnet_model import ESPnetLanguageModel

    from espnet_ext.nets.tied_transformer_lm import TiedTransformerLM

    torch.manual_seed(0)
    asr = build_model(
        "asr",
        write_config(tmp_path, asr_config(None, {"src_attn": {"gamma": 0.25}}))
        + ["--input_size", "12"],
    ).eval()
    lm = TiedTransformerLM(len(TOKENS), embed_unit=16, att_unit=16, head=2, unit=32, layer=1).eval()
    with (
        torch.no_grad()
    ):  # peaked, deterministic preferences: the LM likes "d", the decoder does not
        lm.decoder.bias.zero_()
        lm.decoder.bias[TOKENS.index("d")] = 6.0
        lm.decoder.bias[TOKENS.index("<sos/eos>")] = 2.0
    encoded, _ = asr.encode(torch.randn(1, 40, 12), torch.tensor([40]))

    def lm_score(tokens):
        ys = torch.tensor([[len(TOKENS) - 1] + tokens])
        logp = torch.log_softmax(lm(ys, None)[0], dim=-1)[0]
        return sum(logp[i, t].item() for i, t in enumerate(tokens + [len(TOKENS) - 1]))

    def decode(weight):
        search = BatchBeamSearch(
            scorers={"decoder": asr.decoder, "lm": lm, "length_bonus": LengthBonus(len(TOKENS))},
            weights={"decoder": 1.0, "lm": weight, "length_bonus": 0.0},
            beam_size=3,
            vocab_size=len(TOKENS),
            sos=len(TOKENS) - 1,
            eos=len(TOKENS) - 1,
        )
        with torch.no_grad():
            best = search(encoded[0], maxlenratio=0.0, minlenratio=0.0)[0]
        return best.yseq[1:-1].tolist()

    assert isinstance(ESPnetLanguageModel(lm, len(TOKENS)).lm, TiedTransformerLM)
    hyps = {weight: decode(weight) for weight in (0.0, 0.3, 3.0)}
    assert hyps[0.0] != hyps[3.0]
    assert lm_score(hyps[3.0]) > lm_score(hyps[0.0])
    assert TOKENS.index("d") in hyps[3.0]


def test_compiled_decoder_layers_equal_the_eager_decoder_in_training_and_decoding():
    from espnet_ext.nets.relaxed_transformer import RelaxedTransformerDecoder

    sites = {"src_attn": {"gamma": 0.25}, "self_attn": {"gamma": 0.1}}
    options = dict(attention_heads=4, linear_units=64, num_blocks=2, dropout_rate=0.0)
    options.update(
        self_attention_dropout_rate=0.0, src_attention_dropout_rate=0.0, positional_dropout_rate=0.0
    )
    eager, compiled = eager_and_compiled(
        lambda **extra: RelaxedTransformerDecoder(50, 32, attention_sites=sites, **options, **extra)
    )
    built = [eager, compiled]

    def run(decoder, memory, memory_lengths, ys, ys_lengths):
        return decoder.train()(memory, memory_lengths, ys, ys_lengths)[0]

    for tokens, frames in ((7, 20), (9, 17)):  # lengths other than d (32) and the heads
        memory = torch.randn(3, frames, 32)
        memory_lengths = torch.tensor([frames, frames - 3, frames - 6])
        ys = torch.randint(1, 49, (3, tokens))
        ys_lengths = torch.tensor([tokens, tokens - 2, tokens - 4])
        same_step(eager, compiled, run, memory, memory_lengths, ys, ys_lengths)
    assert graph_breaks() == {} and graphs() == 1
    memory = torch.randn(2, 20, 32)  # step-by-step decoding with the layers' caches, two hypotheses
    steps = []
    for decoder in built:
        decoder.eval()
        ys, cache, scores = torch.full((2, 1), 49), None, []
        with torch.no_grad():
            for _ in range(5):
                causal = torch.ones(ys.size(1), ys.size(1), dtype=torch.bool).tril()[None]
                logp, cache = decoder.forward_one_step(ys, causal, memory, cache=cache)
                scores.append(logp)
                ys = torch.cat([ys, logp.argmax(-1, keepdim=True)], 1)
        steps.append((ys, scores))
    torch.testing.assert_close(steps[1], steps[0])
    assert graph_breaks() == {}
    with pytest.raises(ConfigError, match="decoder_conf.compile_layers"):  # a DataParallel replica
        compiled._replicate_for_data_parallel()(
            memory, torch.tensor([20, 20]), ys, torch.tensor([6, 6])
        )


@pytest.mark.parametrize(
    "sites",
    [None, {"src_attn": {"gamma": 0.25}, "self_attn": {"gamma": 0.1}}],
    ids=["plain", "relaxed"],
)
def test_sdpa_decoder_equals_espnets_explicit_attention(sites):
    """``use_sdpa``: the same outputs and gradients in training (causal self-attention, padded memory) and
    the same scores decoding step by step with the layers' caches."""
    from espnet_ext.nets.relaxed_transformer import RelaxedTransformerDecoder

    options = dict(attention_heads=4, linear_units=64, num_blocks=2, dropout_rate=0.0)
    options.update(
        self_attention_dropout_rate=0.0, src_attention_dropout_rate=0.0, positional_dropout_rate=0.0
    )
    memory, memory_lengths = torch.randn(3, 11, 32), torch.tensor([11, 8, 3])
    ys, ys_lengths = torch.randint(1, 49, (3, 6)), torch.tensor([6, 4, 2])
    results = []
    for use_sdpa in (True, False):
        torch.manual_seed(0)
        decoder = RelaxedTransformerDecoder(
            50, 32, attention_sites=sites, use_sdpa=use_sdpa, **options
        )
        assert all(layer.src_attn.use_sdpa is use_sdpa for layer in decoder.decoders)
        inputs = memory.clone().requires_grad_()
        out = decoder.train()(inputs, memory_lengths, ys, ys_lengths)[0]
        out.pow(2).sum().backward()
        decoder.eval()
        prefix, cache, scores = torch.full((2, 1), 49), None, []
        with torch.no_grad():
            for _ in range(4):
                causal = torch.ones(prefix.size(1), prefix.size(1), dtype=torch.bool).tril()[None]
                logp, cache = decoder.forward_one_step(prefix, causal, memory[:2], cache=cache)
                scores.append(logp)
                prefix = torch.cat([prefix, logp.argmax(-1, keepdim=True)], 1)
        results.append((out.detach(), inputs.grad, torch.stack(scores)))
    for got, expected in zip(*results):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
