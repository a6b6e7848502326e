"""PerMask: values derived from a padding mask, once per mask tensor and key."""

import math
import threading

import pytest
import torch
import torch.nn.functional as F

from espnet_ext.attention.mask_cache import BIAS_ALIGNMENT, PerMask, additive_mask, aligned_cat


def counting():
    calls = []

    def compute(value):
        def run():
            calls.append(value)
            return value

        return run

    return calls, compute


def test_each_mask_and_key_is_computed_once_until_the_mask_changes():
    cache, (calls, compute) = PerMask(), counting()
    mask = torch.ones(2, 1, 5, dtype=torch.bool)
    assert cache.get(mask, "a", compute(1)) == 1
    assert cache.get(mask, "a", compute(2)) == 1  # the next layer, the same tensor
    assert cache.get(mask, "b", compute(3)) == 3
    assert (
        cache.get(mask.clone(), "a", compute(4)) == 4
    )  # the next batch: equal content, another tensor
    mask[0, 0, 4] = False  # changed in place
    assert cache.get(mask, "a", compute(5)) == 5
    assert cache.get(None, "a", compute(6)) == 6 and cache.get(None, "a", compute(7)) == 7
    with torch.inference_mode():  # no version counter: never cached
        made = torch.ones(2, 1, 5, dtype=torch.bool)
        assert cache.get(made, "a", compute(8)) == 8 and cache.get(made, "a", compute(9)) == 9
    assert calls == [1, 3, 4, 5, 6, 7, 8, 9]


def test_the_masks_last_seen_are_kept_and_the_oldest_dropped():
    cache, (calls, compute) = PerMask(size=2), counting()
    self_mask, memory_mask, other = (torch.ones(1, 1, n, dtype=torch.bool) for n in (3, 4, 5))
    for _ in range(3):  # a decoder's layers alternate two masks: both stay cached
        cache.get(self_mask, "k", compute("self"))
        cache.get(memory_mask, "k", compute("memory"))
    assert calls == ["self", "memory"]
    cache.get(other, "k", compute("other"))  # a third evicts the least recent (self_mask)
    cache.get(memory_mask, "k", compute("memory again"))
    cache.get(self_mask, "k", compute("self again"))
    assert calls == ["self", "memory", "other", "self again"]


def test_threads_keep_their_own_values():
    cache = PerMask()
    mask = torch.ones(1, 1, 3, dtype=torch.bool)
    cache.get(mask, "k", lambda: "main")
    seen = []
    thread = threading.Thread(target=lambda: seen.append(cache.get(mask, "k", lambda: "thread")))
    thread.start()
    thread.join()
    assert seen == ["thread"] and cache.get(mask, "k", lambda: "other") == "main"


def aligned(tensor: torch.Tensor) -> bool:
    """What PyTorch's memory-efficient attention asks of an additive mask before it copies it."""
    strides = tensor.stride()
    return strides[-1] == 1 and all(s % BIAS_ALIGNMENT == 0 for s in strides[:-1])


@pytest.mark.parametrize("width", [1, 7, 8, 13])
def test_additive_masks_sit_in_aligned_rows(width):
    torch.manual_seed(0)
    visible = torch.rand(3, 2, 5, width) > 0.4
    bias = additive_mask(visible, torch.float32)
    expected = torch.zeros(visible.shape).masked_fill_(~visible, -math.inf)
    assert torch.equal(bias, expected) and aligned(bias)
    parts = [bias, torch.randn(3, 2, 5, 4), torch.randn(3, 2, 5, 3)]
    joined = aligned_cat(parts)
    assert torch.equal(joined, torch.cat(parts, dim=-1)) and aligned(joined)
    assert not aligned(torch.cat(parts, dim=-1)) or (width + 7) % BIAS_ALIGNMENT == 0


def test_every_mask_our_heads_give_the_fused_attention_is_aligned(monkeypatch):
    """The masks the Multiformer's heads (one call for a layer's groups, the dense band, the band in
    chunks, Conv groups) and relaxed attention's fused path pass PyTorch's fused attention, at lengths
    that are no multiples of 8: none would be copied into padded rows by the CUDA kernel's wrapper."""
    from espnet_ext.attention import head_kinds
    from espnet_ext.attention.multi_attention import MultiHeadMultiAttention
    from espnet_ext.attention.relaxed import RelaxedMultiHeadedAttention

    masks = []
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(
        F,
        "scaled_dot_product_attention",
        lambda *a, attn_mask=None, **k: (
            masks.append(attn_mask) or sdpa(*a, attn_mask=attn_mask, **k)
        ),
    )
    monkeypatch.setattr(head_kinds, "LOCAL_DENSE_DEVICES", {"cpu"})
    lengths = torch.tensor([23, 17, 9])
    x = torch.randn(3, 23, 32)
    mask = (torch.arange(23)[None, :] < lengths[:, None]).unsqueeze(1)
    layers = {
        "one call": MultiHeadMultiAttention(4, 32, 0.1, ["2 x Local(4)", "2 x Conv(5, 2)"]).train(),
        "groups": MultiHeadMultiAttention(4, 32, 0.0, ["2 x Local(4)", "2 x Conv(3, 2)"]).eval(),
        "relaxed": RelaxedMultiHeadedAttention(
            4, 32, 0.0, gamma=0.1, matched_inference=True
        ).eval(),
    }
    counts = {}
    for name, layer in layers.items():
        masks.clear()
        layer(x, x, x, mask)
        counts[name] = len(masks)
        assert all(m is not None and aligned(m) for m in masks), name
    monkeypatch.setattr(head_kinds, "LOCAL_DENSE_DEVICES", set())
    monkeypatch.setattr(head_kinds, "LOCAL_CHUNK_DEVICES", {"cpu"})
    monkeypatch.setattr(head_kinds, "LOCAL_CHUNK_FRAMES", 8)
    masks.clear()
    layers["groups"](x, x, x, mask)  # Local heads in chunks of 8 queries
    assert len(masks) == 2 and all(aligned(m) for m in masks)
    assert counts == {"one call": 1, "groups": 2, "relaxed": 1}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_fused_attention_takes_an_aligned_mask_as_it_is():
    """The control (a contiguous mask of 23 columns) is copied into padded rows inside the call."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(str(func.overloadpacket))
            return func(*args, **(kwargs or {}))

    q = torch.randn(3, 4, 23, 16, device="cuda")
    visible = torch.rand(3, 1, 23, 23, device="cuda") > 0.3
    visible[..., 0] = True
    padded = []
    for bias in (additive_mask(visible, q.dtype), additive_mask(visible, q.dtype).contiguous()):
        with Ops() as ops:
            F.scaled_dot_product_attention(q, q, q, attn_mask=bias)
        padded.append(any("pad" in name for name in ops.names))
    assert padded == [False, True]
