"""The CTC-grounded interface of a LegoNN encoder module (§III-A, eqs. 6, 7, 11).

    P^{V_CTC}_{1:K} = softmax(h_{1:K} W_o)                                  (6)
    F_CTC = -log sum_{Z in Z(K, L)} prod_k P^{V_CTC}_k(z = z_k)              (7)
    F_obj = F_CE(decoder) + sum_{i=1}^{M-1} F_CTC(module i)                 (11)

Index 0 of every interface vocabulary is the CTC blank (ESPnet's ``<blank>`` convention). A CTC target of
length L with R adjacent repeats needs K >= L + R frames (the "CTC length constraint"): an OLC ratio that
gives fewer is a configuration error, refused loudly or, when asked, counted and reported, never silent.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from espnet_ext.errors import ConfigError

BLANK = 0
SHORT_POLICIES = ("error", "report")


class CTCInterface(torch.nn.Module):
    """Eq. (6): ``W_o`` projects (B, K, d) states onto the interface vocabulary; returns log-probabilities."""

    def __init__(self, dim: int, vocab_size: int):
        super().__init__()
        self.vocab_size = vocab_size
        self.projection = torch.nn.Linear(dim, vocab_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.projection(hidden).log_softmax(dim=-1)


def ctc_min_length(targets: torch.Tensor, target_lengths: torch.Tensor) -> torch.Tensor:
    """(B,) fewest frames CTC needs: L + the number of adjacent repeats (a blank must separate them)."""
    steps = torch.arange(targets.size(1), device=targets.device)
    valid = steps[None, :] < target_lengths[:, None]
    repeats = (targets[:, 1:] == targets[:, :-1]) & valid[:, 1:]
    return target_lengths + repeats.sum(dim=1)


def check_short_policy(policy: str) -> str:
    if policy not in SHORT_POLICIES:
        raise ConfigError(f"must be one of {SHORT_POLICIES}, not {policy!r}", key="on_short_ctc")
    return policy


def short_utterances(
    input_lengths: torch.Tensor,
    targets: torch.Tensor,
    target_lengths: torch.Tensor,
    where: str,
    policy: str = "error",
) -> torch.Tensor:
    """(B,) bool, True where K is too short for the CTC target; raises under ``policy="error"``."""
    check_short_policy(policy)
    needed = ctc_min_length(targets, target_lengths)
    short = input_lengths < needed
    if policy == "error" and bool(short.any()):
        i = int(short.nonzero()[0])
        raise ConfigError(
            f"{int(short.sum())} of {len(short)} utterances violate the CTC length constraint: "
            f"e.g. K={int(input_lengths[i])} output frames for a target needing {int(needed[i])} "
            "(length + repeats). Raise the OLC ratio / max_length, or set on_short_ctc: report",
            key=where,
        )
    return short


def ctc_loss(
    log_probs: torch.Tensor,
    lengths: torch.Tensor,
    targets: torch.Tensor,
    target_lengths: torch.Tensor,
    skip: torch.Tensor | None = None,
) -> torch.Tensor:
    """Eq. (7) summed over utterances and divided by the batch size (ESPnet's CTC reduction).

    ``log_probs`` (B, K, V), ``targets`` (B, L) padded with anything; ``skip`` (B,) utterances left out.
    """
    # ignore_id padding (-1) lies past the target lengths, so it is never read
    padded = targets.masked_fill(targets < 0, BLANK)
    per_utt = F.ctc_loss(
        log_probs.transpose(0, 1),
        padded,
        lengths,
        target_lengths,
        blank=BLANK,
        reduction="none",
        # an infeasible utterance's gradient is NaN, not merely unused; only infeasible (skipped)
        # utterances have an infinite loss, so asking whether any is skipped (a host sync) is not needed
        zero_infinity=skip is not None,
    )
    if skip is not None:
        per_utt = per_utt.masked_fill(skip, 0.0)
    return per_utt.sum() / log_probs.size(0)


def multi_module_loss(ce: torch.Tensor, ctc_losses: list[torch.Tensor]) -> torch.Tensor:
    """Eq. (11): the decoder's CE plus the CTC loss of every encoder module (unweighted)."""
    return ce + sum(ctc_losses, torch.zeros_like(ce))


def greedy_decode(log_probs: torch.Tensor, lengths: torch.Tensor) -> list[list[int]]:
    """Best path of an encoder module alone: argmax per frame, merge repeats, drop blanks."""
    best = log_probs.argmax(dim=-1)
    hyps = []
    for path, length in zip(best, lengths.tolist()):
        merged = torch.unique_consecutive(path[:length])
        hyps.append([int(t) for t in merged if int(t) != BLANK])
    return hyps
