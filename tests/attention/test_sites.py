"""Per-site configuration: which attention modules are relaxed, and what is refused before training."""

import pytest
import torch
from espnet.nets.pytorch_backend.transformer.attention import MultiHeadedAttention
from espnet2.asr.decoder.transformer_decoder import TransformerDecoder
from espnet2.asr.encoder.transformer_encoder import TransformerEncoder

from espnet_ext.attention.relaxed import RelaxedMultiHeadedAttention
from espnet_ext.errors import ConfigError
from espnet_ext.nets.relaxed_transformer import (
    RelaxedCNNTransformerEncoder,
    RelaxedTransformerDecoder,
    RelaxedTransformerEncoder,
)

SMALL = dict(output_size=16, attention_heads=2, linear_units=32, num_blocks=2, use_flash_attn=False)
SMALL_DEC = dict(attention_heads=2, linear_units=32, num_blocks=2, use_flash_attn=False)


def test_decoder_relaxes_cross_attention_only_by_default():
    decoder = RelaxedTransformerDecoder(
        10, 16, attention_sites={"src_attn": {"gamma": 0.25}}, **SMALL_DEC
    )
    for layer in decoder.decoders:
        assert (
            isinstance(layer.src_attn, RelaxedMultiHeadedAttention) and layer.src_attn.gamma == 0.25
        )
        assert type(layer.self_attn) is MultiHeadedAttention


def test_encoder_self_attention_with_matched_inference():
    encoder = RelaxedTransformerEncoder(
        8, attention_sites={"self_attn": {"gamma": 0.01, "matched_inference": True}}, **SMALL
    )
    assert all(
        layer.self_attn.matched_inference and layer.self_attn.gamma == 0.01
        for layer in encoder.encoders
    )


def test_state_dict_and_initialisation_identical_to_plain_espnet():
    torch.manual_seed(3)
    plain = TransformerDecoder(10, 16, **SMALL_DEC)
    torch.manual_seed(3)
    relaxed = RelaxedTransformerDecoder(
        10, 16, attention_sites={"src_attn": {"gamma": 0.1}}, **SMALL_DEC
    )
    assert list(plain.state_dict()) == list(relaxed.state_dict())
    assert all(
        torch.equal(a, b)
        for a, b in zip(plain.state_dict().values(), relaxed.state_dict().values())
    )
    # A plain checkpoint loads strictly into the relaxed model, and both agree at inference (train-only relaxation).
    relaxed.load_state_dict(plain.state_dict(), strict=True)
    plain.eval(), relaxed.eval()
    memory, tokens = torch.randn(2, 5, 16), torch.tensor([[1, 2, 3], [4, 5, 0]])
    lengths = torch.tensor([3, 2])
    out_plain, _ = plain(memory, torch.tensor([5, 4]), tokens, lengths)
    out_relaxed, _ = relaxed(memory, torch.tensor([5, 4]), tokens, lengths)
    assert torch.equal(out_plain, out_relaxed)


def test_cnn_encoder_variant_builds_and_runs():
    encoder = RelaxedCNNTransformerEncoder(
        20,
        attention_sites={"self_attn": {"smooth_focus": True}},
        conv_channels=(4, 4, 8, 8),
        **SMALL,
    )
    out, lengths, _ = encoder(torch.randn(2, 40, 20), torch.tensor([40, 30]))
    assert out.shape[0] == 2 and torch.isfinite(out).all()


@pytest.mark.parametrize(
    "sites, message",
    [
        ({"src_attn": {"gamma": 0.1}}, "no attention site 'src_attn'"),
        ({"self_attn": {"gamma": 1.2}}, r"attention_sites.self_attn.gamma.*\[0, 1\]"),
        ({"self_attn": {"gama": 0.1}}, "unknown option"),
        ([0.1], "must map site names"),
    ],
)
def test_bad_site_configuration_is_refused_before_building(sites, message):
    with pytest.raises(ConfigError, match=message):
        RelaxedTransformerEncoder(8, attention_sites=sites, **SMALL)


def test_no_sites_is_plain_espnet():
    encoder = RelaxedTransformerEncoder(8, **SMALL)
    assert all(type(layer.self_attn) is MultiHeadedAttention for layer in encoder.encoders)
    assert isinstance(encoder, TransformerEncoder)
