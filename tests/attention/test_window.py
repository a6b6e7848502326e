"""Relaxed window attention, eq. (3) of the relaxed-attention paper, on Swin's (shifted) windows."""

import pytest
import torch
from timm.models.swin_transformer import WindowAttention as TimmWindowAttention

from espnet_ext.attention.smooth_focus import smooth_focus_weights
from espnet_ext.attention.window import WindowAttention
from espnet_ext.errors import ConfigError
from tests.nets.swin.small_swin import shifted_window_mask

DIM, HEADS, M = 8, 2, 3
N = M * M


def make(**config):
    torch.manual_seed(0)
    return WindowAttention(DIM, HEADS, M, **config)


@pytest.fixture
def windows():
    """2 images x 4 windows of a 6x6 map shifted by 1: timm's shift mask and window tokens."""
    torch.manual_seed(1)
    mask = shifted_window_mask(6, 6, M, 1)
    assert (mask != 0).any()  # some windows mix regions
    return torch.randn(2 * mask.size(0), N, DIM), mask


def softmax_weights(attention, x, mask):
    """Swin's weights by hand: softmax(q k^T / sqrt(d) + R_pos - 100 * [other region])."""
    q, k, _ = attention.qkv(x).view(x.size(0), N, 3, HEADS, -1).permute(2, 0, 3, 1, 4)
    scores = q @ k.transpose(-2, -1) / (DIM // HEADS) ** 0.5
    table, index = attention.relative_position_bias_table, attention.relative_position_index
    bias = torch.stack([table[index[i]] for i in range(N)]).permute(2, 0, 1)
    scores = scores + bias + mask.repeat(x.size(0) // mask.size(0), 1, 1)[:, None]
    return scores.softmax(-1)


def test_relative_position_index_by_hand():
    index = WindowAttention(
        DIM, HEADS, 2
    ).relative_position_index  # 2x2: offsets in {-1, 0, 1}², table 3x3
    # token 0 = (0,0), token 3 = (1,1): offset of 0 from 3 is (-1,-1) -> (0,0) -> 0; of 3 from 0: 8
    assert index[0, 3] == 0 and index[3, 0] == 8 and index[1, 2] == 2 and index[0, 0] == 4


def test_eq3_per_window_and_rows_sum_to_one(windows):
    x, mask = windows
    attention = make(gamma=0.1).train()
    with torch.no_grad():
        weights = attention.attention_weights(x, mask)
        expected = 0.9 * softmax_weights(attention, x, mask) + 0.1 / N  # eq. (3) by hand
    torch.testing.assert_close(weights, expected, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(x.size(0), HEADS, N))


def test_masked_positions_get_only_the_uniform_share(windows):
    x, mask = windows
    with torch.no_grad():
        weights = make(gamma=0.2).train().attention_weights(x, mask)
    hidden = (mask != 0).repeat(2, 1, 1)[:, None].expand_as(weights)
    assert hidden.any()
    # eq. (3) spreads γ over all M² positions: the other-region keys get γ / M², not 0
    torch.testing.assert_close(weights[hidden], torch.full_like(weights[hidden], 0.2 / N))
    assert (weights[~hidden] >= 0.2 / N).all()


def test_fused_equals_explicit_weights(windows):
    x, mask = windows
    for config in (dict(gamma=0.0), dict(gamma=0.3)):
        fused, explicit = make(**config).train(), make(**config, fused=False).train()
        with torch.no_grad():
            torch.testing.assert_close(fused(x, mask), explicit(x, mask), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("shifted", [False, True])
def test_gamma_zero_is_timm_window_attention(windows, shifted):
    x, mask = windows
    mask = mask if shifted else None
    ours = make(gamma=0.0)
    reference = TimmWindowAttention(DIM, HEADS, window_size=M)
    assert isinstance(ours, TimmWindowAttention)
    reference.load_state_dict(ours.state_dict(), strict=True)  # timm's parameters, timm's names
    with torch.no_grad():
        torch.testing.assert_close(ours(x, mask), reference(x, mask), atol=1e-6, rtol=1e-5)


def test_relaxation_in_training_only_unless_matched(windows):
    x, mask = windows
    plain = make()
    relaxed, matched = make(gamma=0.1), make(gamma=0.1, matched_inference=True)
    for module in (plain, relaxed, matched):
        module.eval()
    with torch.no_grad():
        torch.testing.assert_close(relaxed(x, mask), plain(x, mask))
        torch.testing.assert_close(
            matched.attention_weights(x, mask),
            0.9 * softmax_weights(plain, x, mask) + 0.1 / N,
            atol=1e-6,
            rtol=1e-5,
        )


def test_fuzzy_gamma_statistics_and_clipping():
    torch.manual_seed(0)
    fuzzy = make(gamma=0.1, fuzzy_std=0.03).train()
    draws = torch.stack([fuzzy.current_gamma() for _ in range(5000)])
    assert abs(draws.mean().item() - 0.1) < 1e-3 and abs(draws.std().item() - 0.03) < 1e-3
    near_zero = make(gamma=0.01, fuzzy_std=0.05).train()
    draws = torch.stack([near_zero.current_gamma() for _ in range(5000)])
    assert draws.min().item() == 0.0 and (draws == 0).float().mean().item() > 0.3  # Φ(-0.2) = 0.42
    assert make(gamma=0.99, fuzzy_std=0.05).train().current_gamma().item() <= 1.0


def test_fuzzy_draws_per_forward_in_training_and_uses_gamma0_at_inference(windows):
    x, mask = windows
    fuzzy = make(gamma=0.1, fuzzy_std=0.03, matched_inference=True).train()
    with torch.no_grad():
        first, second = fuzzy(x, mask), fuzzy(x, mask)
        assert not torch.allclose(first, second)  # a new γ per forward pass
        fuzzy.eval()
        fixed = make(gamma=0.1, matched_inference=True).eval()
        torch.testing.assert_close(fuzzy(x, mask), fixed(x, mask))
        torch.testing.assert_close(fuzzy(x, mask), fuzzy(x, mask))


def test_fuzzy_gamma_weights_still_follow_eq3(windows):
    x, mask = windows
    fuzzy = make(gamma=0.1, fuzzy_std=0.03).train()
    torch.manual_seed(5)
    with torch.no_grad():
        weights = fuzzy.attention_weights(x, mask)
    torch.manual_seed(5)
    gamma = fuzzy.current_gamma().item()
    expected = (1 - gamma) * softmax_weights(fuzzy, x, mask) + gamma / N
    torch.testing.assert_close(weights, expected, atol=1e-6, rtol=1e-5)


def test_smooth_focus_uses_the_region_mask(windows):
    x, mask = windows
    attention = make(smooth_focus=True)
    with torch.no_grad():
        weights = attention.attention_weights(x, mask)
        q, k, _ = attention.qkv(x).view(x.size(0), N, 3, HEADS, -1).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / (DIM // HEADS) ** 0.5 + attention._get_rel_pos_bias()
        region = (mask == 0).repeat(2, 1, 1)
        expected = smooth_focus_weights(scores, region)
    torch.testing.assert_close(weights, expected)
    assert (weights[~region[:, None].expand_as(weights)] == 0).all()


def test_bad_options_are_refused():
    with pytest.raises(ConfigError, match="gamma"):
        make(gamma=1.5)
    with pytest.raises(ConfigError, match="fuzzy_std"):
        make(fuzzy_std=-0.1)
