"""REINFORCE estimator and baseline (eq. 9), attention entropy (Table 3), additive attention."""

import math

import torch

from espnet_ext.nets.sharp.attention import (
    AdditiveAttention,
    MovingAverageBaseline,
    attention_entropy,
    reinforce_surrogate,
    sample_regions,
)


def test_entropy_of_known_distributions():
    alphas = torch.tensor([[[0.25] * 4, [1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])  # the third step is padding
    assert torch.allclose(attention_entropy(alphas, mask), torch.tensor([math.log(4) / 2]))


def test_baseline_moving_average():
    baseline = MovingAverageBaseline()
    assert baseline.update(torch.tensor(-2.0)).item() == -2.0  # first batch: the mean itself
    assert math.isclose(
        baseline.update(torch.tensor(-1.0)).item(), 0.9 * -2.0 + 0.1 * -1.0, rel_tol=1e-6
    )
    assert "value" in baseline.state_dict()  # resumes with the checkpoint


def test_reinforce_gradient_matches_the_analytic_expectation():
    """E_a[(r(a) - b) ∇ log p(a)] = Σ_a p(a)(r(a) - b)∇ log p(a), estimated with many samples."""
    torch.manual_seed(0)
    logits = torch.tensor([0.2, -0.5, 1.0, 0.0], requires_grad=True)
    reward = torch.tensor([1.0, -2.0, 0.5, 3.0])
    baseline = torch.tensor(0.7)
    exact = torch.autograd.grad(-(torch.softmax(logits, -1) * (reward - baseline)).sum(), logits)[
        0
    ]  # -∇ E[r]
    samples = 200_000
    alpha = torch.softmax(logits, -1).expand(samples, 4)
    index, log_alpha = sample_regions(alpha, greedy=False)
    loss = reinforce_surrogate(
        log_alpha.unsqueeze(1), reward[index].unsqueeze(1), baseline, torch.ones(samples, 1)
    )
    estimate = torch.autograd.grad(loss, logits)[0]
    assert torch.allclose(estimate, exact, atol=0.02), (estimate, exact)


def test_reward_carries_no_gradient_and_greedy_sampling_is_argmax():
    logits = torch.zeros(1, 3, requires_grad=True)
    reward = torch.tensor([[2.0]], requires_grad=True)
    index, log_alpha = sample_regions(torch.softmax(logits, -1), greedy=True)
    reinforce_surrogate(
        log_alpha.unsqueeze(1), reward, torch.tensor(0.0), torch.ones(1, 1)
    ).backward()
    assert reward.grad is None and logits.grad is not None
    assert sample_regions(torch.tensor([[0.1, 0.7, 0.2]]), greedy=True)[0].item() == 1


def test_additive_attention_is_a_distribution_over_columns():
    attention = AdditiveAttention(8, 4, 6)
    alpha = attention(attention.keys(torch.randn(2, 5, 8)), torch.randn(2, 4))
    assert alpha.shape == (2, 5) and torch.allclose(alpha.sum(-1), torch.ones(2))
