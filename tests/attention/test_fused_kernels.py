"""Every call our modules make to PyTorch's ``scaled_dot_product_attention`` can run a fused kernel.

Given inputs a fused kernel cannot take (q, k or v not 4-D, or without unit stride in their last dimension)
PyTorch falls back to its math path (scores, softmax, dropout and their backward as separate kernels, the
scores materialised), silently, on GPUs as on CPUs. Each call is recorded with the backend PyTorch picks
for it (``torch._fused_sdp_choice``). On the CPU, whose fused kernel has no dropout and no gradient for an
additive mask, the choice is asked without either (what is left are the layout conditions the CUDA
kernels share); on a CUDA device (``-m gpu``) as the call is made."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend

from tests.attention.module_cases import CASES

# The cases whose modules attend through PyTorch's fused call (the others compute their weights
# explicitly: head selection, smooth focus, the LegoNN modules' ESPnet attention, Fast heads' features).
FUSED_CASES = {
    "MHMA Full + Local + Conv + Fast": 2,  # Local's dense band, the Conv group
    "MHMA Local dilated": 1,
    "MHMA Conv, depthwise, every head": 1,  # train_st.yaml's first layers
    "MHMA Full + Local + Conv, one attention call": 1,
    "MHMA Local dilated, chunked path": 2,
    "MHMA relaxed Full": 1,  # the Local group; relaxed Full heads keep their weights
    "relaxed attention, matched inference": 1,
    "window attention, fuzzy relaxed": 1,
    "Swin classifier, relaxed + L_drloc": 4,  # 4 blocks
    "AV-HuBERT encoder, use_sdpa": 2,  # 2 layers
}


def record_choices(monkeypatch, on_cpu: bool) -> list[SDPBackend]:
    """Patch ``F.scaled_dot_product_attention`` to record the backend of each call in the returned list."""
    choices = []
    sdpa = F.scaled_dot_product_attention

    def recording(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
        asked = (query, key, value, attn_mask)
        if on_cpu:  # the CPU kernel's own limits set aside
            asked = tuple(None if t is None else t.detach() for t in asked)
        choice = torch._fused_sdp_choice(
            *asked, 0.0 if on_cpu else dropout_p, is_causal, scale=scale
        )
        choices.append(SDPBackend(choice))
        return sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale=scale)

    monkeypatch.setattr(F, "scaled_dot_product_attention", recording)
    return choices


def run_case(name: str, device: str, monkeypatch) -> list[SDPBackend]:
    torch.manual_seed(0)
    choices = record_choices(monkeypatch, on_cpu=device == "cpu")
    CASES[name](device)().backward()
    return choices


@pytest.mark.parametrize("name", FUSED_CASES)
def test_every_attention_call_can_take_the_fused_kernel(name, local_paths, monkeypatch):
    choices = run_case(name, "cpu", monkeypatch)
    assert choices == [SDPBackend.FLASH_ATTENTION] * FUSED_CASES[name]


def test_the_record_sees_the_math_fallback(monkeypatch):
    """The control: windows broadcast as a fifth dimension, and keys straight from a convolution's
    (channels, frames) output, are what the Swin and Conv paths gave the call before."""
    choices = record_choices(monkeypatch, on_cpu=True)
    q = torch.randn(2, 4, 3, 16, 8)
    F.scaled_dot_product_attention(q, q, q, attn_mask=torch.zeros(4, 3, 16, 16))
    keys = torch.randn(2, 3, 8, 16).transpose(-2, -1)  # (B, h, T', d_k) of unit frame stride
    F.scaled_dot_product_attention(q[:, 0], keys, keys)
    F.scaled_dot_product_attention(q[:, 0], keys.contiguous(), keys.contiguous())
    assert choices == [SDPBackend.MATH, SDPBackend.MATH, SDPBackend.FLASH_ATTENTION]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", FUSED_CASES)
def test_cuda_attention_calls_take_a_fused_kernel(name, local_paths, monkeypatch):
    """With dropout, and gradients for the additive masks (Swin's relative position bias)."""
    choices = run_case(name, "cuda", monkeypatch)
    assert len(choices) == FUSED_CASES[name] and SDPBackend.MATH not in choices, choices
