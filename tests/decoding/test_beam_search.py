"""EOS threshold and fairseq length normalisation against hand-worked scores, through ESPnet's beam search."""

from __future__ import annotations

import math

import pytest
import torch
from espnet.nets.batch_beam_search import BatchBeamSearch
from espnet.nets.beam_search import BeamSearch
from espnet.nets.scorer_interface import BatchScorerInterface

from espnet_ext.decoding.beam_search import (
    FairseqRulesBatchBeamSearch,
    FairseqRulesBeamSearch,
    apply_rules,
    eos_below_threshold,
    length_normalized,
)
from espnet_ext.errors import ConfigError

# vocabulary: 0 <blank>, 1 "a", 2 "b", 3 <sos/eos>
A, B, EOS = 1, 2, 3
# next-token probabilities by prefix (SOS left out). After the empty prefix EOS (0.35) is second to
# "a" (0.6): log 0.35 = -1.050 < 1.5 * log 0.6 = -0.766, so a factor of 1.5 refuses it, while 2.5
# (-1.277) accepts it. After "a" EOS (0.4) vs "b" (0.5): -0.916 >= 1.5 * -0.693 = -1.040, accepted.
AB_SCORE = math.log(0.6) + math.log(0.5) + math.log(0.9)  # -1.309
TABLE = {
    (): {A: 0.6, B: 0.05, EOS: 0.35},
    (A,): {A: 0.05, B: 0.5, EOS: 0.4},
    (A, B): {A: 0.05, B: 0.05, EOS: 0.9},
}


def _logp(prefix: tuple) -> torch.Tensor:
    probs = TABLE.get(prefix, {EOS: 0.98, A: 0.01, B: 0.01})
    out = torch.zeros(4, dtype=torch.float64)
    for token, p in probs.items():
        out[token] = p
    out[0] = max(
        1.0 - out.sum().item(), 1e-12
    )  # the rest to <blank>, so the listed values are exact
    return torch.log(out).float()


class TableDecoder(BatchScorerInterface, torch.nn.Module):
    """A decoder whose next-token log-probabilities come from TABLE (by prefix)."""

    def score(self, y, state, x):
        return _logp(tuple(y[1:].tolist())), None

    def batch_score(self, ys, states, xs):
        return torch.stack([_logp(tuple(y[1:].tolist())) for y in ys]), [None] * len(ys)


def _search(batch: bool, **rules):
    cls = BatchBeamSearch if batch else BeamSearch
    search = cls(
        scorers={"decoder": TableDecoder()},
        weights={"decoder": 1.0},
        beam_size=2,
        vocab_size=4,
        sos=EOS,
        eos=EOS,
    )
    apply_rules(
        search, rules.get("eos_threshold"), rules.get("lenpen"), rules.get("fairseq_stop", False)
    )
    return search(torch.zeros(10, 1), maxlenratio=0.5)


def _tokens(hyp) -> tuple:
    return tuple(hyp.yseq[1:-1].tolist())


def test_eos_mask_hand_worked():
    step = torch.log(torch.tensor([[1e-3, 0.6, 0.05, 0.35], [1e-3, 0.05, 0.5, 0.4]]))
    assert eos_below_threshold(step, EOS, 1.5).tolist() == [True, False]
    assert eos_below_threshold(step, EOS, 2.5).tolist() == [False, False]
    assert eos_below_threshold(step, EOS, 1.0).tolist() == [True, True]  # only a top EOS passes f=1


@pytest.mark.parametrize("batch", [False, True])
def test_eos_below_threshold_is_not_accepted(batch):
    # Without the threshold the empty hypothesis (log .35 = -1.050) beats "a b" (log .6+log .5+log .9).
    plain = _search(batch)
    assert _tokens(plain[0]) == ()
    blocked = _search(batch, eos_threshold=1.5)
    assert () not in [_tokens(h) for h in blocked]
    assert _tokens(blocked[0]) == (A, B)
    assert float(blocked[0].score) == pytest.approx(AB_SCORE, abs=1e-5)


@pytest.mark.parametrize("batch", [False, True])
def test_eos_above_threshold_is_accepted(batch):
    loose = _search(batch, eos_threshold=2.5)
    assert _tokens(loose[0]) == ()
    assert float(loose[0].score) == pytest.approx(math.log(0.35), abs=1e-5)


@pytest.mark.parametrize("batch", [False, True])
def test_lenpen_ranks_by_score_over_length_power(batch):
    # empty: -1.050 / 1**p; "a b": -1.309 / 3**p; "a": (log .6 + log .4) / 2**p = -1.427 / 2**p
    normalised = _search(batch, eos_threshold=2.5, lenpen=1.0)
    assert [_tokens(h) for h in normalised[:3]] == [(A, B), (A,), ()]
    raw = _search(batch, eos_threshold=2.5, lenpen=0.0)
    assert [_tokens(h) for h in raw[:3]] == [(), (A, B), (A,)]
    # between: p = 0.25 gives -1.050, -1.309/3**.25 = -0.995, -1.427/2**.25 = -1.200
    between = _search(batch, eos_threshold=2.5, lenpen=0.25)
    assert [_tokens(h) for h in between[:3]] == [(A, B), (), (A,)]


@pytest.mark.parametrize("batch", [False, True])
def test_fairseq_stop_ends_when_beam_size_hypotheses_ended(batch):
    # beam 2: step 1 ends the empty hypothesis, step 2 ends "a" (EOS -0.916 passes 2.5 x -0.693): two
    # ended, so "a b" is never finished; ESPnet's own loop goes on and finishes it.
    assert {_tokens(h) for h in _search(batch, eos_threshold=2.5)} >= {(), (A,), (A, B)}
    stopped = _search(batch, eos_threshold=2.5, fairseq_stop=True)
    assert [_tokens(h) for h in stopped] == [(), (A,)]
    # ranked by fairseq's normalised score: "a" (-1.427 / 2 = -0.714) over the empty one (-1.050)
    normalised = _search(batch, eos_threshold=2.5, fairseq_stop=True, lenpen=1.0)
    assert [_tokens(h) for h in normalised] == [(A,), ()]


def test_length_normalized_hand_worked():
    assert length_normalized(-2.0, 2, 1.0) == pytest.approx(-1.0)
    assert length_normalized(-2.7, 3, 1.0) == pytest.approx(-0.9)
    assert length_normalized(-2.0, 4, 0.5) == pytest.approx(-1.0)
    assert length_normalized(-2.0, 4, 0.0) == pytest.approx(-2.0)


def test_apply_rules_swaps_class_and_refuses_bad_values():
    search = BatchBeamSearch(
        scorers={"decoder": TableDecoder()},
        weights={"decoder": 1.0},
        beam_size=2,
        vocab_size=4,
        sos=EOS,
        eos=EOS,
    )
    assert apply_rules(search, None, None).__class__ is BatchBeamSearch
    assert apply_rules(search, 1.5, None).__class__ is FairseqRulesBatchBeamSearch
    plain = BeamSearch(
        scorers={"decoder": TableDecoder()},
        weights={"decoder": 1.0},
        beam_size=2,
        vocab_size=4,
        sos=EOS,
        eos=EOS,
    )
    assert apply_rules(plain, None, 1.0).__class__ is FairseqRulesBeamSearch
    with pytest.raises(ConfigError, match="eos_threshold"):
        apply_rules(plain, 0.5, None)
    with pytest.raises(ConfigError, match="attention beam search"):
        apply_rules(None, 1.5, None)
