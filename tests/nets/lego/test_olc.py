"""Output Length Controller (eqs. 15-19): lengths K, positional queries, and the block computation."""

import pytest
import torch
from espnet.nets.pytorch_backend.transformer.embedding import PositionalEncoding

from espnet_ext.errors import ConfigError
from espnet_ext.nets.lego.layers import sinusoidal_positions
from espnet_ext.nets.lego.olc import (
    OutputLengthController,
    olc_lengths,
    smallest_safe_ratio,
    too_short,
)


def test_fractional_up_and_down_sampling_with_a_maximum_length():
    t = torch.tensor([10, 7, 100, 1])
    # ceil(1.2 * T): 12 (not 13 from 12.000...02), 8.4 -> 9, 120 -> capped at 64, 1.2 -> 2.
    assert olc_lengths(t, 1.2, 64).tolist() == [12, 9, 64, 2]
    # "reduce by a factor 1.2" (Europarl phoneme module): 10/1.2 = 8.33 -> 9, 5.83 -> 6.
    assert olc_lengths(t, 1 / 1.2, 365).tolist() == [9, 6, 84, 1]
    assert olc_lengths(torch.tensor([3]), 0.01, 10).tolist() == [1]  # at least one unit


def test_bad_ratio_or_maximum_is_refused():
    with pytest.raises(ConfigError, match="olc.ratio"):
        OutputLengthController(8, ratio=0.0)
    with pytest.raises(ConfigError, match="olc.max_length"):
        OutputLengthController(8, ratio=1.0, max_length=0)


def test_sinusoidal_positions_equal_espnets_table():
    ref = PositionalEncoding(16, 0.0, max_len=50).pe[0, :20]
    assert torch.allclose(sinusoidal_positions(20, 16), ref, atol=1e-6)


def olc_by_hand(olc, states, k):
    """Eqs. (15)-(19) written out with the module's own sublayers, one block, no padding."""
    block = olc.blocks[0]
    h = (sinusoidal_positions(k, olc.dim) + olc.learnable_pe.weight[:k]).unsqueeze(0)
    hn = block.norm1(h)
    h = h + block.self_attn(hn, hn, hn, None)  # (16), (17): no causal mask among the queries
    hn = block.norm2(h)
    h = h + block.src_attn(hn, states, states, None)  # (18)
    h = h + block.feed_forward(block.norm3(h))  # (19)
    return olc.after_norm(h)


def test_forward_is_equations_15_to_19_and_ignores_batch_padding():
    torch.manual_seed(0)
    olc = OutputLengthController(
        16, ratio=1.5, max_length=32, attention_heads=2, linear_units=32
    ).eval()
    states = torch.randn(2, 6, 16)
    lengths = torch.tensor([6, 4])
    out, k = olc(states, lengths)
    assert k.tolist() == [9, 6] and out.shape == (2, 9, 16)
    assert torch.allclose(out[0], olc_by_hand(olc, states[:1], 9)[0], atol=1e-5)
    alone, _ = olc(states[1:, :4], lengths[1:])
    assert torch.allclose(out[1, :6], alone[0], atol=1e-5)  # padded frames and queries unseen
    out2, _ = olc(states + 1.0, lengths)
    assert not torch.allclose(out2, out)  # the queries read the encoder through cross-attention


def test_smallest_safe_ratio_and_too_short_counts_worked_by_hand():
    t = torch.tensor([10, 4, 8])
    needed = torch.tensor([12, 6, 8])
    assert smallest_safe_ratio(t, needed) == 1.5  # 6 / 4
    assert too_short(t, needed, 1.2, 100).tolist() == [False, True, False]  # 12, 5 (< 6), 10
    assert not too_short(t, needed, 1.5, 100).any()
    assert too_short(t, needed, 1.5, 10).tolist() == [True, False, False]  # capped: 10 < 12


def test_olc_check_tool_reports_the_short_utterances_and_fails(tmp_path, capsys):
    from espnet_ext.bin import lego_olc_check

    (tmp_path / "src").write_text("a 9\nb 3\nc 7\n")  # + <eos>: 10, 4, 8
    (tmp_path / "tgt").write_text("a 12,50\nb 6,50\nc 8,50\n")
    args = [
        "--input_shape_file",
        str(tmp_path / "src"),
        "--target_shape_file",
        str(tmp_path / "tgt"),
    ]
    assert (
        lego_olc_check.main([*args, "--ratio", "1.2", "--max_length", "100", "--input_offset", "1"])
        == 1
    )
    out = capsys.readouterr().out
    assert "1 utterances" in out and "  b\n" in out and "1.5000" in out
    assert (
        lego_olc_check.main([*args, "--ratio", "1.5", "--max_length", "100", "--input_offset", "1"])
        == 0
    )
    (tmp_path / "tgt").write_text("a 12\nb\n")
    assert lego_olc_check.main([*args, "--ratio", "1.5", "--max_length", "100"]) == 1
    assert "tgt:2: expected" in capsys.readouterr().err


def test_alignment_prior_centres_each_query_on_its_span_per_utterance():
    """With the scores' content zeroed (q, k projections 0), each query's cross-attention (eq. 18) peaks at
    the centre of its span of the input, c_k = (k + 1/2) T/K - 1/2, in every utterance of a padded batch."""
    torch.manual_seed(0)
    olc = OutputLengthController(
        16, ratio=1 / 3.5, max_length=64, attention_heads=2, linear_units=16, alignment_prior=0.5
    ).eval()
    attention = olc.blocks[0].src_attn
    with torch.no_grad():
        for linear in (attention.linear_q, attention.linear_k):
            linear.weight.zero_()
            linear.bias.zero_()
    lengths = torch.tensor([35, 21])
    _, k = olc(torch.randn(2, 35, 16), lengths)
    assert k.tolist() == [10, 6]
    weights = attention.attn  # ESPnet keeps the last call's attention: (B, heads, K, T)
    for b in range(2):
        span = float(lengths[b] / k[b])
        for q in range(int(k[b])):
            centre = (q + 0.5) * span - 0.5
            assert abs(int(weights[b, 0, q].argmax()) - centre) <= 0.5, (b, q)
            # a Gaussian of width sigma * span: one span away it has fallen to exp(-1/(2 sigma^2))
            near = int(round(centre))
            far = near + int(round(span))
            if far < lengths[b]:
                expected = torch.exp(
                    torch.tensor(
                        -0.5 * ((far - centre) ** 2 - (near - centre) ** 2) / (0.5 * span) ** 2
                    )
                )
                assert torch.isclose(
                    weights[b, 0, q, far] / weights[b, 0, q, near], expected, rtol=1e-4
                )
    assert weights[1, :, :, 21:].abs().max() == 0  # padded frames get nothing
    assert attention.prior is None  # not left behind for another caller


def test_alignment_prior_weight_is_learnt_and_both_options_off_by_default():
    olc = OutputLengthController(
        8, ratio=0.5, attention_heads=2, linear_units=8, alignment_prior=1.0
    )
    out, _ = olc(torch.randn(2, 9, 8), torch.tensor([9, 7]))
    out.sum().backward()
    assert olc.blocks[0].src_attn.prior_weight.grad.abs().sum() > 0
    plain = OutputLengthController(8, ratio=0.5)
    assert not any("prior_weight" in n for n, _ in plain.named_parameters())  # eq. 18 as written
    assert torch.equal(
        plain.queries(5, "cpu"), sinusoidal_positions(5, 8) + plain.learnable_pe.weight[:5]
    )
    with pytest.raises(ConfigError, match="olc.alignment_prior"):
        OutputLengthController(8, ratio=0.5, alignment_prior=-1.0)
    with pytest.raises(ConfigError, match="olc.query_scale"):
        OutputLengthController(8, ratio=0.5, query_scale=0.0)


def test_query_scale_scales_only_the_residual_stream_of_equation_15():
    """s * eq. (15): the self-/cross-attention queries see LayerNorm(h) and are unchanged; the residual
    that the attended content is added to is s times smaller."""
    torch.manual_seed(0)
    plain = OutputLengthController(16, ratio=1.0, attention_heads=2, linear_units=16).eval()
    scaled = OutputLengthController(
        16, ratio=1.0, attention_heads=2, linear_units=16, query_scale=0.1
    ).eval()
    scaled.load_state_dict(plain.state_dict())
    assert torch.allclose(scaled.queries(6, "cpu"), 0.1 * plain.queries(6, "cpu"))
    block = plain.blocks[0]
    h = plain.queries(6, "cpu")[None]
    assert torch.allclose(block.norm1(h), scaled.blocks[0].norm1(0.1 * h), atol=1e-4)
    states, lengths = torch.randn(1, 6, 16), torch.tensor([6])
    assert not torch.allclose(plain(states, lengths)[0], scaled(states, lengths)[0])
