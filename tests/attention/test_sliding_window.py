"""The sliding-window Function against autograd of the explicit banded softmax attention."""

import math

import pytest
import torch

from espnet_ext.attention import sliding_window
from espnet_ext.attention.sliding_window import block_window_attention, sliding_window_attention

LENGTHS = torch.tensor([13, 9, 4])


def inputs(heads=2, d_k=3, lengths=LENGTHS, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    shape = (len(lengths), heads, int(lengths.max()), d_k)
    q, k, v = (torch.randn(shape, generator=g, dtype=dtype).requires_grad_() for _ in range(3))
    keep = torch.arange(int(lengths.max()))[None, :] < lengths[:, None]
    return q, k, v, keep


def banded_reference(q, k, v, keep, half):
    """softmax over the keys j with |i - j| <= half that are real frames; zero rows without keys."""
    i = torch.arange(q.size(2))
    allowed = ((i[None, :] - i[:, None]).abs() <= half) & keep[:, None, None, :]
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).masked_fill(~allowed, -math.inf)
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v


def block_reference(q, k, v, keep, size):
    """softmax over the real keys of the query's block and its two neighbours (lucidrains' LocalAttention,
    look_backward = look_forward = 1); zero rows without keys."""
    blocks = torch.arange(q.size(2)) // size
    allowed = ((blocks[None, :] - blocks[:, None]).abs() <= 1) & keep[:, None, None, :]
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).masked_fill(~allowed, -math.inf)
    return torch.softmax(scores, dim=-1).nan_to_num(0.0) @ v


@pytest.fixture(params=[1 << 20, 40], ids=["one_chunk", "many_chunks"])
def chunk_scores(request, monkeypatch):
    monkeypatch.setattr(sliding_window, "CHUNK_SCORES", request.param)
    return request.param


@pytest.mark.parametrize("half", [1, 2, 3, 5, 16])
def test_output_and_gradients_equal_autograd_of_the_banded_softmax(half, chunk_scores):
    q, k, v, keep = inputs()
    upstream = torch.randn(q.shape, dtype=q.dtype)
    got = sliding_window_attention(q, k, v, keep, half)
    grads = torch.autograd.grad((got * upstream).sum(), (q, k, v))
    expected = banded_reference(q, k, v, keep, half)
    expected_grads = torch.autograd.grad((expected * upstream).sum(), (q, k, v))
    torch.testing.assert_close(got, expected)
    for a, b in zip(grads, expected_grads):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("size", [1, 2, 3, 5, 16])
def test_block_form_output_and_gradients_equal_autograd_of_the_block_softmax(size, chunk_scores):
    q, k, v, keep = inputs()
    upstream = torch.randn(q.shape, dtype=q.dtype)
    got = block_window_attention(q, k, v, keep, size)
    grads = torch.autograd.grad((got * upstream).sum(), (q, k, v))
    expected = block_reference(q, k, v, keep, size)
    expected_grads = torch.autograd.grad((expected * upstream).sum(), (q, k, v))
    torch.testing.assert_close(got, expected)
    for a, b in zip(grads, expected_grads):
        torch.testing.assert_close(a, b)


def test_gradients_with_dropout_pass_gradcheck(chunk_scores):
    # Reseeding before every call draws the same dropout mask, so the function is deterministic.
    q, k, v, keep = inputs(lengths=torch.tensor([11, 6]))

    def attention(q, k, v):
        torch.manual_seed(7)
        return sliding_window_attention(q, k, v, keep, 2, drop=0.3)

    assert torch.autograd.gradcheck(attention, (q, k, v))

    def block(q, k, v):
        torch.manual_seed(7)
        return block_window_attention(q, k, v, keep, 3, drop=0.3)

    assert torch.autograd.gradcheck(block, (q, k, v))


def test_dropout_drops_weights_at_its_rate_and_rescales_the_rest():
    # One-hot values read back each weight; equal scores give 1/5 to each of the 5 visible keys.
    length = 400
    q = torch.zeros(1, 1, length, 1)
    v = torch.eye(length)[None, None]
    keep = torch.ones(1, length, dtype=torch.bool)
    torch.manual_seed(0)
    weights = sliding_window_attention(q, q, v, keep, 2, drop=0.25)[0, 0]
    visible = weights[2:-2, :].flatten()
    nonzero = visible[visible > 0]
    torch.testing.assert_close(nonzero, torch.full_like(nonzero, 0.2 / 0.75))
    kept = nonzero.numel() / ((length - 4) * 5)
    assert abs(kept - 0.75) < 0.03


def test_backward_keeps_no_weight_matrix():
    # Saved: q, k, v (the inputs), the row log-sum-exp and the key mask -- O(T) beyond the inputs.
    q, k, v, keep = inputs(lengths=torch.tensor([64]), dtype=torch.float32)
    out = sliding_window_attention(q, k, v, keep, 8)
    saved = [t for t in out.grad_fn.saved_tensors if not any(t is x for x in (q, k, v))]
    inputs_ = {id(t) for t in (q, k, v)}
    assert {id(t) for t in out.grad_fn.saved_tensors} >= inputs_
    assert sum(t.numel() for t in saved) <= 2 * 64 * 2 + 64  # lse (B, h, T) and keep (B, T)


def test_query_without_visible_keys_gets_zeros():
    q, k, v, keep = inputs(lengths=torch.tensor([13, 3]))
    out = sliding_window_attention(q, k, v, keep, 2)
    # Utterance 2 has 3 frames: queries at 5 and later are more than 2 frames from all of them.
    assert out[1, :, 5:].abs().sum() == 0
    assert out[1, :, :5].abs().sum() > 0


def test_half_precision_inputs_follow_the_float32_result():
    q, k, v, keep = inputs(dtype=torch.float32)
    expected = sliding_window_attention(q, k, v, keep, 3)
    low = [t.detach().to(torch.bfloat16).requires_grad_() for t in (q, k, v)]
    got = sliding_window_attention(*low, keep, 3)
    got.sum().backward()
    assert got.dtype == torch.bfloat16 and all(t.grad.dtype == torch.bfloat16 for t in low)
    torch.testing.assert_close(got.float(), expected.detach(), atol=0.05, rtol=0.05)


def test_half_precision_gradients_with_dropout_follow_the_float32_ones(monkeypatch):
    # the backward scales the dropout mask in the weights' dtype: a float32 factor promoted the
    # gradients and the next product met bf16 keys (outside CUDA's autocast, which casts them back)
    q, k, v, keep = inputs(dtype=torch.float32)
    draw = torch.rand  # the same dropout mask in both precisions: uniform draws made in float32
    monkeypatch.setattr(torch, "rand_like", lambda t: draw(t.shape, device=t.device))
    grads = []
    for dtype in (torch.float32, torch.bfloat16):
        low = [t.detach().to(dtype).requires_grad_() for t in (q, k, v)]
        torch.manual_seed(3)  # the same dropout mask
        block_window_attention(*low, keep, 4, drop=0.2).float().sum().backward()
        assert all(t.grad.dtype == dtype for t in low)
        grads.append([t.grad.float() for t in low])
    for ours, reference in zip(*grads):  # bf16's 8 bits of mantissa, summed over a few keys
        assert float((ours - reference).norm() / reference.norm()) < 0.03
