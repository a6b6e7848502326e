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
