"""No host synchronisation in the forward and backward of the papers' modules.

On the CPU the operations that would make a GPU wait are recorded by name (``host_sync.HostSyncs``); on a
CUDA device (``-m gpu``) PyTorch's own sync debug mode raises on any. Each case runs its module twice in the
mode it is used in (training: Gumbel draws, fuzzy γ, Performer redraws on every call; inference), on a
padded batch."""

from __future__ import annotations

import pytest
import torch
from host_sync import HostSyncs

from espnet_ext.attention.head_selection import HeadSelectionAttention, set_task_id
from tests.attention.module_cases import CASES, D, padded


@pytest.mark.parametrize("name", CASES)
def test_forward_and_backward_read_nothing_back_to_the_host(name, local_paths):
    torch.manual_seed(0)
    step = CASES[name]("cpu")
    with HostSyncs() as syncs:
        for _ in range(2):
            step().backward()
    assert syncs.found == []


def test_the_recorder_sees_what_would_synchronise():
    x = torch.randn(5, requires_grad=True)
    with HostSyncs() as syncs:
        int(x.argmax())
        x[x > 0].sum().backward()
        torch.unique(x)
        x.tolist()
        torch.tensor([1, 2])
    found = " ".join(syncs.found)
    for op in ("__int__", "_local_scalar_dense", "aten.index", "index_put", "_unique2", "tolist",
               "lift_fresh"):  # fmt: skip
        assert op in found


# Cases whose CUDA run synchronises inside PyTorch itself, not in our code (pinned on the CPU above).
PYTORCH_SYNCS_ON_CUDA = {
    # aten's ctc_loss copies the length tensors to the host (it takes them as integer lists)
    "LegoNN interface CTC, short utterances counted": "PyTorch's CTC loss reads the lengths on the host",
}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", CASES)
def test_cuda_forward_and_backward_never_synchronise(name, local_paths):
    if name in PYTORCH_SYNCS_ON_CUDA:
        pytest.skip(PYTORCH_SYNCS_ON_CUDA[name])
    torch.manual_seed(0)
    step = CASES[name]("cuda")
    step().backward()  # first call: lazy initialisation (cuBLAS handles, kernels) is not the steady state
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(2):
            step().backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_decoding_steps_of_one_task_read_nothing_back_to_the_host(device):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    module = HeadSelectionAttention(4, D, 0.1, num_tasks=3, head_candidates=8).to(device).eval()
    x, _, mask = padded(device)
    set_task_id(module, torch.tensor([2], device=device))
    with torch.no_grad():
        module(x, x, x, mask)  # the first step gathers the task's heads
        with HostSyncs() as syncs:
            for _ in range(2):
                module(x, x, x, mask)
    assert syncs.found == []
