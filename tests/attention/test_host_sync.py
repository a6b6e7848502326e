"""No host synchronisation in the forward and backward of the papers' modules.

On the CPU the operations that would make a GPU wait are recorded by name (``host_sync.HostSyncs``); on a
CUDA device (``-m gpu``) PyTorch's own sync debug mode raises on any. Each case runs its module twice in the
mode it is used in (training: Gumbel draws, fuzzy γ, Performer redraws on every call; inference), on a
padded batch."""

from __future__ import annotations

import pytest
import torch
from host_sync import HostSyncs

from espnet_ext.attention import head_kinds
from espnet_ext.attention.head_selection import HeadSelectionAttention, set_task_id
from espnet_ext.attention.multi_attention import MultiHeadMultiAttention
from espnet_ext.attention.relaxed import RelaxedMultiHeadedAttention
from espnet_ext.attention.window import WindowAttention
from espnet_ext.nets.avhubert.encoder import AVHubertEncoder
from espnet_ext.nets.lego.ingestors import BeamConvIngestor, WEmbIngestor
from espnet_ext.nets.lego.interface import ctc_loss, short_utterances
from espnet_ext.nets.lego.olc import OutputLengthController
from espnet_ext.nets.s2t_conv1d_subsampler import S2TConv1dSubsampler
from espnet_ext.nets.swin.classifier import SwinClassifier
from tests.nets.swin.small_swin import shifted_window_mask

B, T, D = 3, 24, 32
LENGTHS = [24, 17, 9]


def _padded(device, dim=D):
    x = torch.randn(B, T, dim, device=device, requires_grad=True)
    lengths = torch.tensor(LENGTHS, device=device)
    mask = (torch.arange(T, device=device)[None, :] < lengths[:, None]).unsqueeze(1)
    return x, lengths, mask


def self_attention(module, training=True, dim=D):
    def case(device):
        module.to(device).train(training)
        x, _, mask = _padded(device, dim)
        return lambda: module(x, x, x, mask).sum()

    return case


def head_selection(task_ids, training):
    def case(device):
        module = HeadSelectionAttention(4, D, 0.1, num_tasks=3, head_candidates=8).to(device)
        module.train(training)
        x, _, mask = _padded(device)
        tasks = torch.tensor(task_ids, device=device)
        set_task_id(module, tasks)  # ids on the host are checked there: no synchronisation

        def step():
            if tasks.is_cuda:  # ids on the device: checked there, as the model's forward gives them
                set_task_id(module, tasks)
            out = module(x, x, x, mask).sum()
            return out + module.selection_kl.sum() if training else out

        return step

    return case


def mhma(heads, **config):
    module = MultiHeadMultiAttention(4, D, 0.1, heads, redraw_interval=1)
    module.configure(**config)
    return self_attention(module)


def window_attention(**config):
    def case(device):
        module = WindowAttention(D, 4, 4, **config).to(device).train()
        mask = shifted_window_mask(8, 8, 4, 2).to(device)
        x = torch.randn(2 * mask.size(0), 16, D, device=device, requires_grad=True)
        return lambda: module(x, mask).sum()

    return case


def olc(device):
    module = OutputLengthController(D, 0.5, 64, attention_heads=4, linear_units=64,
                                    alignment_prior=0.5).to(device).train()  # fmt: skip
    x, lengths, _ = _padded(device)
    return lambda: module(x, lengths)[0].sum()


def ingestor(kind):
    def case(device):
        vocab = 11
        module = kind(vocab, D, receptive_field=3, num_blocks=1, attention_heads=4,
                      linear_units=64).to(device).train()  # fmt: skip
        logits = torch.randn(B, T, vocab, device=device, requires_grad=True)
        lengths = torch.tensor(LENGTHS, device=device)
        return lambda: module(logits.log_softmax(-1), lengths)[0].sum() + logits.sum()

    return case


def interface_ctc(device):
    """Eq. (7) over a batch with a too-short utterance, counted (``on_short_ctc: report``)."""
    logits = torch.randn(B, 6, 5, device=device, requires_grad=True)
    lengths = torch.tensor([6, 4, 2], device=device)
    targets = torch.tensor([[1, 2, 3], [2, 2, -1], [1, 2, 3]], device=device)
    target_lengths = torch.tensor([3, 2, 3], device=device)

    def step():
        short = short_utterances(lengths, targets, target_lengths, "olc", policy="report")
        return ctc_loss(logits.log_softmax(-1), lengths, targets, target_lengths, skip=short)

    return step


def s2t_subsampler(device):
    """The Multiformer's front end (fairseq's Conv1dSubsampler); ESPnet's encoder after it reads the
    lengths back itself (make_pad_mask), which no module of ours controls."""
    module = S2TConv1dSubsampler(D, D, 0.1, channels=16).to(device).train()
    x, lengths, _ = _padded(device)
    return lambda: module(x, lengths)[0].sum()


def avhubert(use_sdpa=False):
    """The AV-HuBERT encoder after its front end (LayerDrop 0: its draw is the CPU generator's)."""

    def case(device):
        module = AVHubertEncoder(D, output_size=D, attention_heads=4, linear_units=64, num_blocks=2,
                                 layer_norm_first=True, layerdrop=0.0, conv_pos=8, conv_pos_groups=4,
                                 use_sdpa=use_sdpa)  # fmt: skip
        module.to(device).train()
        x, lengths, _ = _padded(device)
        return lambda: module(x, lengths)[0].sum()

    return case


def swin(device):
    model = SwinClassifier(num_classes=5, img_size=16, patch_size=2, embed_dim=8, depths=(2, 2),
                           num_heads=(1, 2), window_size=4, gamma=0.1, fuzzy_std=0.05,
                           drloc_weight=0.5, drloc_pairs=8, drloc_hidden=16, drloc_warmup_epochs=1,
                           drloc_decay_epochs=3, drloc_batches_per_epoch=1).to(device).train()  # fmt: skip
    images = torch.rand(4, 16, 16, 3, device=device)
    labels = torch.tensor([1, 4, 0, 2], device=device)
    return lambda: model.losses(images, labels)[0]


CASES = {
    "head selection, one task id (inference)": head_selection([2], training=False),
    "head selection, mixed tasks (inference)": head_selection([2, 0, 2], training=False),
    "head selection, mixed tasks (training)": head_selection([2, 0, 1], training=True),
    "MHMA Full + Local + Conv + Fast": mhma(["Full", "Local(8)", "Conv(5, 2)", "Fast(16)"]),
    "MHMA Local dilated": mhma(["2 x Local(4, 2)", "2 x Local(8)"]),
    "MHMA Full + Local + Conv, one attention call": mhma(["Full", "Local(8)", "2 x Conv(5, 2)"]),
    "MHMA Local dilated, blocked path": mhma(["2 x Local(4, 2)", "2 x Local(8)"]),
    "MHMA Local dilated, chunked path": mhma(["2 x Local(4, 2)", "2 x Local(8)"]),
    # heads of 16 dimensions: FlexAttention's least (head_kinds.FLEX_MIN_HEAD_DIM)
    "MHMA Local, inference (FlexAttention on CUDA)": self_attention(
        MultiHeadMultiAttention(4, 4 * 16, 0.1, ["2 x Local(8)", "2 x Local(4, 2)"]),
        training=False,
        dim=4 * 16,
    ),
    "MHMA relaxed Full": mhma(["2 x Full", "2 x Local(8)"], gamma=0.1),
    "MHMA smooth focus": mhma(["2 x Full", "2 x Conv(3, 2)"], smooth_focus=True),
    "relaxed attention, training": self_attention(
        RelaxedMultiHeadedAttention(4, D, 0.1, gamma=0.1)
    ),
    "relaxed attention, matched inference": self_attention(
        RelaxedMultiHeadedAttention(4, D, 0.1, gamma=0.1, matched_inference=True), training=False
    ),
    "smooth focus": self_attention(RelaxedMultiHeadedAttention(4, D, 0.1, smooth_focus=True)),
    "window attention, fuzzy relaxed": window_attention(gamma=0.1, fuzzy_std=0.05),
    "window attention, smooth focus": window_attention(smooth_focus=True),
    "OLC with alignment prior": olc,
    "WEmb ingestor": ingestor(WEmbIngestor),
    "BeamConv ingestor": ingestor(BeamConvIngestor),
    "LegoNN interface CTC, short utterances counted": interface_ctc,
    "Swin classifier, relaxed + L_drloc": swin,
    "S2T conv1d subsampler": s2t_subsampler,
    "AV-HuBERT encoder": avhubert(),
    "AV-HuBERT encoder, use_sdpa": avhubert(use_sdpa=True),
}


# Cases past the dense Local heads' length (these utterances are short): the blocked path, the chunked
# path, FlexAttention.
LONG_PATH = ("blocked path", "chunked path", "FlexAttention")


@pytest.fixture
def local_paths(request, monkeypatch):
    if any(word in request.node.callspec.params["name"] for word in LONG_PATH):
        monkeypatch.setattr(head_kinds, "LOCAL_DENSE_MAX_FRAMES", 0)
        name = request.node.callspec.params["name"]
        monkeypatch.setattr(head_kinds, "FLEX_ON_CUDA", "FlexAttention" in name)
        chunked = {"cpu", "cuda"} if "chunked path" in name else set()
        monkeypatch.setattr(head_kinds, "LOCAL_CHUNK_DEVICES", chunked)
        # chunks of 4 frames: several per utterance of these cases
        monkeypatch.setattr(head_kinds, "LOCAL_CHUNK_FRAMES", 4)
    else:  # short Local heads dense, as on CUDA, on the CPU too
        monkeypatch.setattr(head_kinds, "LOCAL_DENSE_DEVICES", {"cpu", "cuda"})


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
    x, _, mask = _padded(device)
    set_task_id(module, torch.tensor([2], device=device))
    with torch.no_grad():
        module(x, x, x, mask)  # the first step gathers the task's heads
        with HostSyncs() as syncs:
            for _ in range(2):
                module(x, x, x, mask)
    assert syncs.found == []
