"""Additive attention (Bahdanau et al., 2015), attention entropy, and the REINFORCE pieces of hard/sharp
attention (the paper's eqs. 7 and 9)."""

from __future__ import annotations

import torch


class AdditiveAttention(torch.nn.Module):
    """α_t = softmax_i(w^T tanh(W x_i + U h_{t-1})) over the M input columns (eq. 7)."""

    def __init__(self, input_dim: int, query_dim: int, attention_dim: int = 256):
        super().__init__()
        self.keys = torch.nn.Linear(input_dim, attention_dim, bias=False)
        self.query = torch.nn.Linear(query_dim, attention_dim)
        self.score = torch.nn.Linear(attention_dim, 1, bias=False)

    def forward(
        self, keys_projected: torch.Tensor, query: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``keys_projected`` = self.keys(X) (B, M, A), computed once per sequence; returns α (B, M)."""
        energy = self.score(torch.tanh(keys_projected + self.query(query).unsqueeze(1))).squeeze(-1)
        if mask is not None:
            energy = energy.masked_fill(~mask, float("-inf"))
        return torch.softmax(energy, dim=-1)


def attention_entropy(alphas: torch.Tensor, step_mask: torch.Tensor) -> torch.Tensor:
    """Mean over valid steps of H[a_t] = -Σ_i α_ti log α_ti, per image: ``alphas`` (B, N, M), mask (B, N)."""
    entropy = -(alphas * torch.log(alphas.clamp(min=1e-12))).sum(-1)
    steps = step_mask.sum(-1).clamp(min=1)
    return (entropy * step_mask).sum(-1) / steps


class MovingAverageBaseline(torch.nn.Module):
    """b_j = 0.9 b_{j-1} + 0.1 · mean log p (eq. before 9), kept in the checkpoint; starts at the first mean."""

    def __init__(self, decay: float = 0.9):
        super().__init__()
        self.decay = decay
        self.register_buffer("value", torch.zeros(()))
        self.register_buffer("initialised", torch.zeros((), dtype=torch.bool))

    @torch.no_grad()
    def update(self, mean_log_likelihood: torch.Tensor) -> torch.Tensor:
        if not bool(self.initialised):
            self.value.copy_(mean_log_likelihood)
            self.initialised.fill_(True)
        else:
            self.value.mul_(self.decay).add_((1 - self.decay) * mean_log_likelihood)
        return self.value.clone()


def reinforce_surrogate(
    log_alpha_sampled: torch.Tensor,
    reward: torch.Tensor,
    baseline: torch.Tensor,
    step_mask: torch.Tensor,
) -> torch.Tensor:
    """A loss whose gradient is -Σ_t (r_t - b) ∂ log p(â_t)/∂θ (the REINFORCE part of eq. 9, summed over
    steps, averaged over samples): the reward is a constant, only the sampled choice's log-probability
    carries gradient."""
    advantage = (reward.detach() - baseline.detach()) * step_mask
    return -(advantage * log_alpha_sampled).sum() / step_mask.size(0)


def sample_regions(alpha: torch.Tensor, greedy: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """One region index per row from α (B, M) (argmax when ``greedy``) and log α of the choice."""
    index = alpha.argmax(-1) if greedy else torch.multinomial(alpha, 1).squeeze(-1)
    return index, torch.log(alpha.gather(-1, index.unsqueeze(-1)).squeeze(-1).clamp(min=1e-12))
