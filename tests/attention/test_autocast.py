"""The papers' modules under autocast: input gradients in fp16 and bf16 (CPU; on CUDA with ``-m gpu``)
against float32 with the same weights and inputs.

The yardstick is measured in the same test: ESPnet's own MultiHeadedAttention for one attention module
(its relative input-gradient error is about 6e-3 here), and for composite modules the ESPnet layers they are
built of. Tolerances: attention modules within 2x the control (FAVOR+ within 1.5x: its float32 region is
what keeps it there, 2x without), the OLC with its alignment prior within 1.5x the same OLC without the
prior (ESPnet's decoder layers), the WEmb ingestor's gradient to the incoming log-probabilities within
1.5x the error of its own Transformer layers' input gradient; and the float32 regions run in float32.
"""

from __future__ import annotations

import pytest
import torch
from espnet.nets.pytorch_backend.transformer.attention import MultiHeadedAttention

from espnet_ext.attention import head_kinds
from espnet_ext.attention.head_selection import HeadSelectionAttention, set_task_id
from espnet_ext.attention.multi_attention import MultiHeadMultiAttention
from espnet_ext.attention.relaxed import RelaxedMultiHeadedAttention
from espnet_ext.attention.window import WindowAttention
from espnet_ext.nets.lego.ingestors import WEmbIngestor
from espnet_ext.nets.lego.olc import OutputLengthController
from tests.nets.swin.small_swin import shifted_window_mask

B, T, D, VOCAB = 4, 128, 64, 50
LENGTHS = [128, 100, 77, 40]


def gradient_error(fn, inputs, device, dtype):
    """Relative error of d(out · g)/d(inputs) under autocast(dtype) against float32."""
    grads = []
    for enabled in (False, True):
        x = inputs.clone().requires_grad_()
        with torch.autocast(device, dtype=dtype, enabled=enabled):
            out = fn(x)
        weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(device)
        (out.float() * weight).sum().backward()
        grads.append(x.grad)
    return float((grads[1] - grads[0]).norm() / grads[0].norm())


def modules(device):
    torch.manual_seed(0)
    lengths = torch.tensor(LENGTHS, device=device)
    mask = (torch.arange(T, device=device)[None] < lengths[:, None]).unsqueeze(1)
    x = torch.randn(B, T, D, device=device)

    def attention(module, training=False):
        module.to(device).train(training)
        return lambda x: module(x, x, x, mask)

    def olc(sigma):
        module = OutputLengthController(D, 0.5, 256, attention_heads=4, linear_units=128,
                                        dropout_rate=0.0, alignment_prior=sigma)  # fmt: skip
        module.to(device).eval()
        return lambda x: module(x, lengths)[0]

    wemb = WEmbIngestor(VOCAB, D, receptive_field=5, num_blocks=1, attention_heads=4,
                        linear_units=128, dropout_rate=0.0, attention_dropout_rate=0.0)  # fmt: skip
    wemb.to(device).eval()
    log_probs = (3 * torch.randn(B, T, VOCAB, device=device)).log_softmax(-1)
    window_mask = shifted_window_mask(16, 16, 8, 4).to(device)
    windows = torch.randn(2 * window_mask.size(0), 64, D, device=device)

    def window(**config):
        module = WindowAttention(D, 4, 8, **config).to(device).eval()
        return lambda x: module(x, window_mask)

    control = attention(MultiHeadedAttention(4, D, 0.0))
    selecting = HeadSelectionAttention(4, D, 0.0, num_tasks=3, head_candidates=8)
    set_task_id(selecting, torch.tensor([2, 0, 1, 2], device=device))  # per-row weights
    return {  # name: (fn, inputs, control fn, control inputs, tolerance factor)
        "head selection, mixed tasks": (attention(selecting), x, control, x, 2.0),
        "MHMA Local(16)": (attention(MultiHeadMultiAttention(4, D, 0.0, ["4 x Local(16)"])),
                           x, control, x, 2.0),
        "MHMA Fast": (attention(MultiHeadMultiAttention(4, D, 0.0, ["4 x Fast"])), x, control, x,
                      1.5),
        "MHMA Conv(5, 2)": (attention(MultiHeadMultiAttention(4, D, 0.0, ["4 x Conv(5, 2)"])),
                            x, control, x, 2.0),
        "MHMA mixed kinds, relaxed Full": (attention(_relaxed_mixed()), x, control, x, 2.0),
        # training with every group in one attention call (on CUDA; the CPU test below forces it)
        "MHMA Full + Local + Conv, training": (attention(MultiHeadMultiAttention(
            4, D, 0.0, ["Full", "Local(16)", "2 x Conv(5, 2)"]), training=True), x, control, x, 2.0),
        "relaxed fused (matched inference)": (attention(RelaxedMultiHeadedAttention(
            4, D, 0.0, gamma=0.1, matched_inference=True)), x, control, x, 2.0),
        "smooth focus": (attention(RelaxedMultiHeadedAttention(4, D, 0.0, smooth_focus=True)),
                         x, control, x, 2.0),
        "window attention, relaxed": (window(gamma=0.1, matched_inference=True), windows,
                                      control, x, 2.0),
        "window attention, smooth focus": (window(smooth_focus=True), windows, control, x, 2.0),
        "OLC with alignment prior": (olc(0.5), x, olc(0.0), x, 1.5),
        "WEmb, gradient to the log-probabilities": (
            lambda lp: wemb(lp, lengths)[0], log_probs,
            lambda h: wemb.encoder(h, mask), x, 1.5),
    }  # fmt: skip


def _relaxed_mixed():
    module = MultiHeadMultiAttention(4, D, 0.0, ["Full", "Local(16)", "Conv(5, 2)", "Fast"])
    module.configure(gamma=0.1, matched_inference=True)
    return module


CASES = list(modules("cpu"))


def check(name, device, dtype):
    fn, inputs, control, control_inputs, factor = modules(device)[name]
    error = gradient_error(fn, inputs, device, dtype)
    reference = gradient_error(control, control_inputs, device, dtype)
    assert error <= factor * reference, f"{name}: {error:.2e} vs control {reference:.2e}"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("name", CASES)
def test_cpu_autocast_input_gradient_is_as_good_as_espnets(name, dtype):
    # fp16: what ESPnet's use_amp autocasts to on GPUs without bf16 (V100, T4)
    check(name, "cpu", dtype)


def test_bf16_input_gradient_of_one_attention_call_in_training(monkeypatch):
    monkeypatch.setattr(head_kinds, "LOCAL_DENSE_DEVICES", {"cpu", "cuda"})  # as on CUDA
    check("MHMA Full + Local + Conv, training", "cpu", torch.bfloat16)


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.parametrize(
    "device,dtype",
    [
        ("cpu", torch.bfloat16),
        pytest.param("cuda", torch.float16, marks=[pytest.mark.gpu, CUDA]),
        pytest.param("cuda", torch.bfloat16, marks=[pytest.mark.gpu, CUDA]),
    ],
    ids=["cpu-bf16", "cuda-fp16", "cuda-bf16"],
)
def test_autocast_input_gradient_of_local_heads_in_chunks(device, dtype, monkeypatch):
    # CUDA's path past the dense band (its fused kernel in half precision there)
    monkeypatch.setattr(head_kinds, "LOCAL_DENSE_MAX_FRAMES", 0)
    monkeypatch.setattr(head_kinds, "LOCAL_CHUNK_DEVICES", {"cpu", "cuda"})
    monkeypatch.setattr(head_kinds, "LOCAL_CHUNK_FRAMES", 16)  # several chunks of these utterances
    check("MHMA Local(16)", device, dtype)


def test_unstable_operations_run_in_float32_under_autocast():
    torch.manual_seed(0)
    lengths = torch.tensor(LENGTHS)
    olc = OutputLengthController(D, 0.5, 256, attention_heads=4, linear_units=128,
                                 alignment_prior=0.5).eval()  # fmt: skip
    weighted_sums = []
    olc.blocks[0].src_attn.linear_out.register_forward_pre_hook(
        lambda module, args: weighted_sums.append(args[0].dtype)
    )
    wemb = WEmbIngestor(VOCAB, D, receptive_field=3, num_blocks=1, attention_heads=4).eval()
    mhma = MultiHeadMultiAttention(4, D, 0.0, ["4 x Fast"]).eval()
    q = torch.randn(B, 4, T, D // 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        olc(torch.randn(B, T, D), lengths)
        embedded = wemb.embed(torch.randn(B, T, VOCAB).log_softmax(-1), torch.ones(B, 1, T).bool())
        fast, _ = mhma.groups[0](q, q, q, None, mhma.dropout)
        assert mhma.linear_q(q.transpose(1, 2).flatten(2)).dtype == torch.bfloat16  # autocast is on
    assert weighted_sums == [torch.float32] and embedded.dtype == torch.float32
    assert fast.dtype == q.dtype
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fast_bf16, _ = mhma.groups[0](q.bfloat16(), q.bfloat16(), q.bfloat16(), None, mhma.dropout)
    assert fast_bf16.dtype == torch.bfloat16  # returned in the heads' dtype for the concatenation


@pytest.mark.gpu
@CUDA
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("name", CASES)
def test_cuda_autocast_input_gradient_is_as_good_as_espnets(name, dtype):
    check(name, "cuda", dtype)
