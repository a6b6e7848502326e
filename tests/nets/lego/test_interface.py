"""CTC interface (eqs. 6, 7), the CTC length constraint, eq. (11) and greedy decoding of a module alone."""

import math

import pytest
import torch
from espnet2.asr.ctc import CTC

from espnet_ext.errors import ConfigError
from espnet_ext.nets.lego.interface import (
    CTCInterface,
    ctc_loss,
    ctc_min_length,
    greedy_decode,
    multi_module_loss,
    short_utterances,
)


def test_ctc_loss_worked_by_hand_on_two_frames():
    # V = {blank, a}, K = 2, uniform 1/2 per frame, target "a": paths aa, a-, -a -> 3/4.
    log_probs = torch.full((1, 2, 2), math.log(0.5))
    loss = ctc_loss(log_probs, torch.tensor([2]), torch.tensor([[1]]), torch.tensor([1]))
    assert loss.item() == pytest.approx(-math.log(0.75), rel=1e-6)


def test_interface_and_loss_equal_espnets_ctc_module_with_the_same_weights():
    torch.manual_seed(0)
    ours = CTCInterface(dim=8, vocab_size=6)
    ref = CTC(odim=6, encoder_output_size=8, dropout_rate=0.0, reduce=True)
    ref.ctc_lo.load_state_dict(ours.projection.state_dict())
    hidden = torch.randn(3, 9, 8)
    lengths = torch.tensor([9, 7, 5])
    targets = torch.tensor([[1, 2, 3, 2], [4, 4, 5, -1], [5, 1, -1, -1]])
    target_lengths = torch.tensor([4, 3, 2])
    expected = ref(hidden, lengths, targets, target_lengths)
    got = ctc_loss(ours(hidden), lengths, targets, target_lengths)
    assert got.item() == pytest.approx(expected.item(), rel=1e-5)
    assert torch.allclose(ours(hidden).exp().sum(-1), torch.ones(3, 9))  # eq. (6): a distribution


def test_ctc_min_length_counts_repeats_that_need_a_blank_between():
    targets = torch.tensor([[3, 3, 4, 0], [3, 4, 5, 5], [7, 7, 7, 7]])
    lengths = torch.tensor([3, 3, 4])  # the second row's repeat lies in the padding
    assert ctc_min_length(targets, lengths).tolist() == [4, 3, 7]


def test_short_output_is_refused_with_the_config_key_or_counted_when_asked():
    targets = torch.tensor([[1, 2, 3], [1, 1, 2]])
    target_lengths = torch.tensor([3, 3])
    k = torch.tensor([3, 3])  # the second needs 4
    with pytest.raises(ConfigError, match=r"encoder_conf.modules\[0\].olc.*K=3.*needing 4"):
        short_utterances(k, targets, target_lengths, "encoder_conf.modules[0].olc")
    short = short_utterances(k, targets, target_lengths, "x", policy="report")
    assert short.tolist() == [False, True]
    with pytest.raises(ConfigError, match="on_short_ctc"):
        short_utterances(k, targets, target_lengths, "x", policy="ignore")


def test_skipped_utterances_leave_the_loss_finite_and_out_of_the_sum():
    logits = torch.zeros(2, 2, 3, requires_grad=True)
    targets = torch.tensor([[1, -1, -1], [1, 2, 1]])
    target_lengths = torch.tensor([1, 3])
    skip = torch.tensor([False, True])
    loss = ctc_loss(
        logits.log_softmax(-1), torch.tensor([2, 2]), targets, target_lengths, skip=skip
    )
    # Alone, utterance 0: paths aa, a-, -a each (1/3)^2 -> -log(3/9); divided by the batch of 2.
    assert loss.item() == pytest.approx(-math.log(3 / 9) / 2, rel=1e-6)
    loss.backward()
    assert torch.isfinite(logits.grad).all() and (logits.grad[1] == 0).all()


def test_multi_module_loss_is_ce_plus_every_intermediate_ctc():
    ce = torch.tensor(2.5)
    assert multi_module_loss(ce, [torch.tensor(1.0), torch.tensor(0.25)]).item() == 3.75
    assert multi_module_loss(ce, []).item() == 2.5  # M = 1 modules before the decoder: eq. (10)


def test_greedy_decoding_merges_repeats_and_drops_blanks_within_the_length():
    path = torch.tensor([[1, 1, 0, 1, 2, 2, 3], [2, 0, 0, 2, 2, 1, 1]])
    log_probs = torch.nn.functional.one_hot(path, 4).float().log()
    assert greedy_decode(log_probs, torch.tensor([6, 5])) == [[1, 1, 2], [2, 2]]
