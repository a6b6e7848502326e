"""fairseq/espresso's beam-search rules on ESPnet's beam search: EOS threshold and length-normalised ranking.

EOS threshold (espresso's ``--eos-factor``, used with LM fusion in its LibriSpeech recipe): at a step,
a hypothesis may end only if the end-of-sentence score is at least ``f`` times its best step score,

    s(EOS) >= f · max_c s(c),    f >= 1,    s(c) = Σ_k w_k log p_k(c | y_<l, x)  (<= 0)

where the sum runs over the full scorers (decoder, LM); ESPnet's additive length bonus is a constant
per token, not a log-probability, and is left out. Otherwise EOS gets -inf at that step. The
forced EOS at the maximum length is not affected (as in fairseq).

Length-normalised ranking (fairseq's ``--lenpen``): the ended hypotheses are ranked by
``score / L**lenpen``, L = number of generated tokens including EOS (fairseq's ``normalize_scores``).
Pruning inside the beam still uses the raw accumulated scores, as fairseq does. ESPnet's own
``--penalty`` adds a per-token bonus instead; ESPnet's ``--normalize_length`` is the case lenpen = 1.
The hypotheses keep their raw ``score``; only the order changes.

fairseq's stopping (``fairseq_stop``): the search ends once ``beam_size`` hypotheses have ended, as
fairseq's generator finishes a sentence; ESPnet's goes on to the maximum length (or its end
detection), collecting more ended hypotheses than fairseq would rank.
"""

from __future__ import annotations

import logging
import math

import torch
from espnet.nets.batch_beam_search import BatchBeamSearch
from espnet.nets.beam_search import BeamSearch, Hypothesis

from espnet_ext.errors import ConfigError

# ESPnet's additive per-token bonus; not a log-probability, so not part of the EOS test.
LENGTH_BONUS = "length_bonus"


def eos_below_threshold(step_scores: torch.Tensor, eos: int, factor: float) -> torch.Tensor:
    """(..., V) step scores (log-domain, <= 0) -> (...) bool: True where EOS must not be chosen."""
    best = step_scores.max(dim=-1).values
    return step_scores[..., eos] < factor * best


def length_normalized(score: float, length: int, lenpen: float) -> float:
    """fairseq's final score: score / length**lenpen (length counts EOS, not SOS)."""
    return score / length**lenpen


def check_eos_threshold(factor: float | None) -> None:
    if factor is not None and not (factor >= 1.0 and math.isfinite(factor)):
        raise ConfigError(
            f"must be a finite number >= 1 (espresso's --eos-factor), got {factor}",
            key="eos_threshold",
        )


class FairseqRulesMixin:
    """Adds ``eos_threshold`` (None = off) and ``lenpen`` (None = ESPnet's ranking) to a beam search."""

    eos_threshold: float | None = None
    lenpen: float | None = None
    fairseq_stop: bool = False

    def score_full(self, hyp, x, pre_x=None):
        *hs, scores, states = super().score_full(hyp, x, pre_x=pre_x)
        if self.eos_threshold is not None:
            step = sum(self.weights[k] * scores[k] for k in scores if k != LENGTH_BONUS)
            blocked = eos_below_threshold(step, self.eos, self.eos_threshold)
            # -inf on one log-probability scorer removes EOS from the weighted sum of all.
            key = next(k for k in scores if k != LENGTH_BONUS)
            scores[key] = scores[key].clone()
            scores[key][..., self.eos] = torch.where(
                blocked,
                torch.full_like(blocked, -math.inf, dtype=scores[key].dtype),
                scores[key][..., self.eos],
            )
        return (*hs, scores, states)

    def post_process(self, i, maxlen, minlen, maxlenratio, running_hyps, ended_hyps):
        remained = super().post_process(i, maxlen, minlen, maxlenratio, running_hyps, ended_hyps)
        if self.fairseq_stop and len(ended_hyps) >= self.beam_size:
            return self._none_running(remained)  # the caller's loop ends on no running hypotheses
        return remained

    def _none_running(self, remained):
        return []

    def forward(self, x, maxlenratio=0.0, minlenratio=0.0, pre_x=None) -> list[Hypothesis]:
        nbest = super().forward(x, maxlenratio=maxlenratio, minlenratio=minlenratio, pre_x=pre_x)
        if self.lenpen is None:
            return nbest
        return sorted(
            nbest,
            key=lambda h: length_normalized(float(h.score), len(h.yseq) - 1, self.lenpen),
            reverse=True,
        )


class FairseqRulesBeamSearch(FairseqRulesMixin, BeamSearch):
    """ESPnet's BeamSearch with espresso's EOS threshold and fairseq's length normalisation."""


class FairseqRulesBatchBeamSearch(FairseqRulesMixin, BatchBeamSearch):
    """ESPnet's BatchBeamSearch with espresso's EOS threshold and fairseq's length normalisation."""

    def _none_running(self, remained):
        return self._batch_select(remained, [])


_OURS = {BeamSearch: FairseqRulesBeamSearch, BatchBeamSearch: FairseqRulesBatchBeamSearch}


def apply_rules(
    beam_search, eos_threshold: float | None, lenpen: float | None, fairseq_stop: bool = False
):
    """Switch an ESPnet beam search built by an inference class to ours (in place; returns it).

    ESPnet's inference classes build ``BeamSearch`` and may turn it into ``BatchBeamSearch`` by
    ``__class__``; we swap the class the same way, so scorers, weights and device stay as built.
    """
    check_eos_threshold(eos_threshold)
    if eos_threshold is None and lenpen is None and not fairseq_stop:
        return beam_search
    if beam_search is None:
        raise ConfigError(
            "eos_threshold/lenpen/fairseq_stop need an attention beam search; this model has none"
        )
    cls = type(beam_search)
    if cls not in _OURS and cls not in _OURS.values():
        raise ConfigError(
            f"eos_threshold/lenpen/fairseq_stop are implemented for ESPnet's BeamSearch and BatchBeamSearch, "
            f"not {cls.__name__}"
        )
    beam_search.__class__ = _OURS.get(cls, cls)
    beam_search.eos_threshold = eos_threshold
    beam_search.lenpen = lenpen
    beam_search.fairseq_stop = fairseq_stop
    logging.info(
        f"{type(beam_search).__name__}: eos_threshold={eos_threshold} lenpen={lenpen} "
        f"fairseq_stop={fairseq_stop}"
    )
    return beam_search
