"""Relaxed attention against eq. (1) of the paper and against ESPnet's own MultiHeadedAttention."""

import copy
import math

import pytest
import torch
from espnet.nets.pytorch_backend.transformer.attention import MultiHeadedAttention
from espnet.nets.pytorch_backend.transformer.mask import subsequent_mask

from espnet_ext.attention.relaxed import (
    RelaxedMultiHeadedAttention,
    masked_mean_values,
    relax_weights,
    unmasked_keys,
)
from espnet_ext.errors import ConfigError

HEADS, DIM = 4, 16


def padding_mask(lengths, max_len=None):
    max_len = max_len or max(lengths)
    return (torch.arange(max_len)[None, :] < torch.tensor(lengths)[:, None]).unsqueeze(
        1
    )  # (B, 1, T)


def espnet_attention(dropout=0.0, seed=0):
    torch.manual_seed(seed)
    return MultiHeadedAttention(HEADS, DIM, dropout)


def relaxed_copy(plain, **config):
    return RelaxedMultiHeadedAttention.from_attention(copy.deepcopy(plain), **config)


def reference_output(attention, x, memory, mask, gamma):
    """Eq. (1) written out: softmax over unmasked keys, mix with 1/T_unmasked, weighted sum, projection."""
    q, k, v = attention.forward_qkv(x, memory, memory)
    scores = q @ k.transpose(-2, -1) / math.sqrt(attention.d_k)
    out = torch.zeros_like(q)
    for b in range(x.size(0)):
        for i in range(x.size(1)):
            visible = mask[b, 0 if mask.size(1) == 1 else i].bool()
            weights = torch.softmax(scores[b, :, i, visible], dim=-1)
            relaxed = (1 - gamma) * weights + gamma / int(visible.sum())
            out[b, :, i] = (relaxed.unsqueeze(1) @ v[b, :, visible]).squeeze(1)
    return attention.linear_out(out.transpose(1, 2).reshape(x.size(0), x.size(1), -1))


def test_relaxed_weights_use_each_utterance_own_unmasked_length():
    torch.manual_seed(0)
    mask = padding_mask([5, 3])
    weights = torch.softmax(
        torch.randn(2, HEADS, 4, 5).masked_fill(~mask.unsqueeze(1), -1e9), dim=-1
    )
    relaxed = relax_weights(weights, 0.2, mask)
    # Utterance 2 has T = 3: its padded keys keep weight 0, the visible ones get + 0.2 / 3.
    assert torch.equal(relaxed[1, ..., 3:], torch.zeros(HEADS, 4, 2))
    assert torch.allclose(relaxed[1, ..., :3], 0.8 * weights[1, ..., :3] + 0.2 / 3)
    assert torch.allclose(relaxed[0], 0.8 * weights[0] + 0.2 / 5)
    assert torch.allclose(relaxed.sum(-1), torch.ones(2, HEADS, 4))


def test_causal_mask_gives_per_query_length():
    mask = subsequent_mask(4).unsqueeze(0)  # (1, 4, 4): query i sees i + 1 keys
    assert unmasked_keys(mask).flatten().tolist() == [1, 2, 3, 4]
    weights = torch.softmax(torch.randn(1, 1, 4, 4).masked_fill(~mask.unsqueeze(1), -1e9), dim=-1)
    relaxed = relax_weights(weights, 0.5, mask)
    assert torch.allclose(relaxed[0, 0, 2, :3], 0.5 * weights[0, 0, 2, :3] + 0.5 / 3)
    assert torch.all(relaxed[0, 0].triu(1) == 0)


def test_module_matches_equation_with_padding():
    plain = espnet_attention()
    relaxed = relaxed_copy(plain, gamma=0.3, fused=False).train()
    x, memory = torch.randn(2, 3, DIM), torch.randn(2, 6, DIM)
    mask = padding_mask([6, 2])
    assert torch.allclose(
        relaxed(x, memory, memory, mask), reference_output(plain, x, memory, mask, 0.3), atol=1e-6
    )


@pytest.mark.parametrize("training", [True, False])
def test_gamma_zero_is_espnet_attention_bit_for_bit(training):
    plain = espnet_attention(dropout=0.3)
    relaxed = relaxed_copy(plain, gamma=0.0, matched_inference=True)
    plain.train(training), relaxed.train(training)
    x, mask = torch.randn(3, 7, DIM), padding_mask([7, 5, 1])
    torch.manual_seed(1)
    expected = plain(x, x, x, mask)
    torch.manual_seed(1)
    assert torch.equal(relaxed(x, x, x, mask), expected)
    assert list(relaxed.state_dict()) == list(plain.state_dict())


@pytest.mark.parametrize("fused", [True, False])
def test_relaxed_code_path_at_gamma_zero_matches_espnet(fused):
    """The relaxed path itself (not the gamma=0 dispatch to ESPnet) reproduces ESPnet's attention."""
    plain = espnet_attention()
    relaxed = relaxed_copy(plain, gamma=0.0, fused=fused)
    plain.eval(), relaxed.eval()
    x, mask = torch.randn(3, 7, DIM), padding_mask([7, 5, 1])
    q, k, v = relaxed.forward_qkv(x, x, x)
    if fused:
        out = relaxed._fused_relaxed(q, k, v, mask)
    else:
        scores = q @ k.transpose(-2, -1) / math.sqrt(relaxed.d_k)
        out = relaxed.forward_attention(v, scores, mask)
    torch.testing.assert_close(out, plain(x, x, x, mask), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("build", ["constructor", "from_attention"])
def test_module_built_with_flash_gets_attention_dropout_back(build):
    """ESPnet gives a module built with use_flash_attn=True an nn.Identity dropout (the flash kernel drops
    internally). Relaxation switches flash off, so the weights path must drop with attention_dropout_rate:
    the same seed must give exactly the output of the same module built without flash."""
    torch.manual_seed(0)
    if build == "constructor":
        flash = RelaxedMultiHeadedAttention(HEADS, DIM, 0.5, gamma=0.5, use_flash_attn=True)
    else:
        flash = RelaxedMultiHeadedAttention.from_attention(
            MultiHeadedAttention(HEADS, DIM, 0.5, use_flash_attn=True), gamma=0.5
        )
    assert not flash.use_flash_attn
    assert isinstance(flash.dropout, torch.nn.Dropout) and flash.dropout.p == 0.5
    torch.manual_seed(0)
    plain = RelaxedMultiHeadedAttention(HEADS, DIM, 0.5, gamma=0.5)
    flash.train(), plain.train()
    x, mask = torch.randn(2, 6, DIM), padding_mask([6, 4])
    torch.manual_seed(3)
    expected = plain(x, x, x, mask)
    torch.manual_seed(3)
    assert torch.equal(flash(x, x, x, mask), expected)
    torch.manual_seed(4)
    assert not torch.allclose(flash(x, x, x, mask), expected)  # dropout really drops in training
    flash.eval(), plain.eval()
    assert torch.allclose(flash(x, x, x, mask), plain(x, x, x, mask), atol=1e-6)


def test_flash_module_left_plain_keeps_espnet_state():
    """gamma = 0 without smooth focus is ESPnet's module: flash and its Identity dropout stay as built."""
    flash = RelaxedMultiHeadedAttention(HEADS, DIM, 0.5, gamma=0.0, use_flash_attn=True)
    assert flash.use_flash_attn and isinstance(flash.dropout, torch.nn.Identity)


def test_from_attention_shares_parameters_and_consumes_no_randomness():
    plain = espnet_attention()
    state = torch.random.get_rng_state()
    relaxed = RelaxedMultiHeadedAttention.from_attention(plain, gamma=0.1)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert relaxed.linear_q.weight is plain.linear_q.weight
    with pytest.raises(ConfigError, match="MultiHeadedAttention"):
        from espnet.nets.pytorch_backend.transformer.attention import (
            RelPositionMultiHeadedAttention,
        )

        RelaxedMultiHeadedAttention.from_attention(
            RelPositionMultiHeadedAttention(HEADS, DIM, 0.0), gamma=0.1
        )


def test_train_only_relaxation_leaves_inference_untouched():
    plain = espnet_attention()
    relaxed = relaxed_copy(plain, gamma=0.25)
    x, mask = torch.randn(2, 5, DIM), padding_mask([5, 4])
    plain.eval(), relaxed.eval()
    assert torch.equal(relaxed(x, x, x, mask), plain(x, x, x, mask))
    relaxed.train()
    assert not torch.allclose(relaxed(x, x, x, mask), plain(x, x, x, mask), atol=1e-4)


def test_matched_inference_relaxes_at_test_time():
    plain = espnet_attention()
    matched = relaxed_copy(plain, gamma=0.25, matched_inference=True).eval()
    x, mask = torch.randn(2, 5, DIM), padding_mask([5, 4])
    expected = reference_output(plain, x, x, mask, 0.25)
    assert torch.allclose(matched(x, x, x, mask), expected, atol=1e-5)


@pytest.mark.parametrize("mask_kind", ["padding", "causal", "none"])
def test_fused_path_equals_explicit_path(mask_kind):
    plain = espnet_attention()
    fused = relaxed_copy(plain, gamma=0.4, matched_inference=True, fused=True).eval()
    explicit = relaxed_copy(plain, gamma=0.4, matched_inference=True, fused=False).eval()
    x = torch.randn(3, 6, DIM)
    mask = {
        "padding": padding_mask([6, 3, 1]),
        "causal": subsequent_mask(6).unsqueeze(0).expand(3, 6, 6) & padding_mask([6, 3, 1]),
        "none": None,
    }[mask_kind]
    assert torch.allclose(fused(x, x, x, mask), explicit(x, x, x, mask), atol=1e-5)


def test_masked_mean_of_values():
    v = torch.arange(12, dtype=torch.float32).view(1, 1, 4, 3)
    mean = masked_mean_values(v, padding_mask([2], max_len=4))
    assert torch.equal(mean, v[..., :2, :].mean(dim=-2, keepdim=True))


def test_attention_dropout_acts_on_relaxed_weights():
    plain = espnet_attention(dropout=0.5)
    relaxed = relaxed_copy(plain, gamma=0.3).train()
    x, mask = torch.randn(2, 4, DIM), padding_mask([4, 3])
    torch.manual_seed(7)
    out = relaxed(x, x, x, mask)
    weights = relaxed.attn  # the relaxed weights, before dropout
    assert torch.allclose(weights.sum(-1), torch.ones_like(weights.sum(-1)))
    _, _, v = relaxed.forward_qkv(x, x, x)
    torch.manual_seed(7)
    dropped = torch.nn.functional.dropout(weights, 0.5, training=True)
    expected = relaxed.linear_out((dropped @ v).transpose(1, 2).reshape(2, 4, DIM))
    assert torch.allclose(out, expected, atol=1e-6)


def test_relaxed_weights_have_a_floor_of_gamma_over_t():
    relaxed = relaxed_copy(espnet_attention(), gamma=0.3, fused=False).train()
    x, mask = torch.randn(2, 4, DIM) * 10, padding_mask([4, 3])
    relaxed(x, x, x, mask)
    assert relaxed.attn[0].min() >= 0.3 / 4 - 1e-7
    assert relaxed.attn[1, ..., :3].min() >= 0.3 / 3 - 1e-7


def test_gradients_flow_through_both_paths():
    relaxed = relaxed_copy(espnet_attention(), gamma=0.2, matched_inference=True)
    x = torch.randn(2, 4, DIM, requires_grad=True)
    for training in (True, False):
        relaxed.train(training)
        relaxed.zero_grad()
        relaxed(x, x, x, padding_mask([4, 2])).sum().backward()
        assert relaxed.linear_q.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("gamma", [-0.1, 1.5, float("nan")])
def test_gamma_outside_unit_interval_is_refused(gamma):
    with pytest.raises(ConfigError, match=r"\[0, 1\]"):
        RelaxedMultiHeadedAttention(HEADS, DIM, 0.0, gamma=gamma)
