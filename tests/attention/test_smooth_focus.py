"""Smooth focus (Chorowski et al., eq. 4 of the relaxed-attention paper's appendix)."""

import math

import torch
from espnet.nets.pytorch_backend.transformer.attention import MultiHeadedAttention

from espnet_ext.attention.relaxed import RelaxedMultiHeadedAttention
from espnet_ext.attention.smooth_focus import smooth_focus_weights


def sigmoid(x):
    return 1 / (1 + math.exp(-x))


def test_known_values_and_compression_against_softmax():
    scores = torch.tensor([2.0, 0.0]).view(1, 1, 1, 2)
    weights = smooth_focus_weights(scores, None).flatten().tolist()
    expected = sigmoid(2) / (sigmoid(2) + 0.5)
    assert math.isclose(weights[0], expected, rel_tol=1e-6) and math.isclose(
        weights[1], 1 - expected, rel_tol=1e-6
    )
    # The sigmoid is bounded: a very large score cannot take more than 1/(1 + 0.5 * ...) of the mass.
    softmax_peak = torch.softmax(scores, -1).max()
    assert weights[0] < softmax_peak


def test_normalised_over_unmasked_keys_only():
    torch.manual_seed(0)
    scores = torch.randn(2, 3, 4, 5)
    mask = (torch.arange(5)[None, :] < torch.tensor([5, 2])[:, None]).unsqueeze(1)
    weights = smooth_focus_weights(scores, mask)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 3, 4))
    assert torch.equal(weights[1, ..., 2:], torch.zeros(3, 4, 3))
    gates = torch.sigmoid(scores[1, ..., :2])
    assert torch.allclose(weights[1, ..., :2], gates / gates.sum(-1, keepdim=True))


def test_query_without_visible_keys_gets_zero_weights_not_nan():
    weights = smooth_focus_weights(torch.randn(1, 1, 1, 3), torch.zeros(1, 1, 3, dtype=torch.bool))
    assert torch.equal(weights, torch.zeros(1, 1, 1, 3))


def test_attention_module_uses_smooth_focus_in_training_and_inference():
    torch.manual_seed(0)
    plain = MultiHeadedAttention(2, 8, 0.0)
    smooth = RelaxedMultiHeadedAttention.from_attention(plain, smooth_focus=True)
    x = torch.randn(1, 3, 8)
    for training in (True, False):
        smooth.train(training)
        smooth(x, x, x, None)
        q, k, _ = smooth.forward_qkv(x, x, x)
        gates = torch.sigmoid(q @ k.transpose(-2, -1) / math.sqrt(smooth.d_k))
        assert torch.allclose(smooth.attn, gates / gates.sum(-1, keepdim=True), atol=1e-6)
