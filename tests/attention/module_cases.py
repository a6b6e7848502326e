"""The papers' modules as cases for the tests that run each one's forward and backward on a padded batch
(host synchronisations, fused attention kernels): ``CASES[name](device)`` builds the module on ``device``
and returns a step, a function that runs the forward in the mode the module is used in and returns a
scalar to backpropagate; ``local_paths`` (a fixture) sends Local heads down the path a case names."""

from __future__ import annotations

import torch

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


def padded(device, dim=D):
    x = torch.randn(B, T, dim, device=device, requires_grad=True)
    lengths = torch.tensor(LENGTHS, device=device)
    mask = (torch.arange(T, device=device)[None, :] < lengths[:, None]).unsqueeze(1)
    return x, lengths, mask


def self_attention(module, training=True, dim=D):
    def case(device):
        module.to(device).train(training)
        x, _, mask = padded(device, dim)
        return lambda: module(x, x, x, mask).sum()

    return case


def head_selection(task_ids, training):
    def case(device):
        module = HeadSelectionAttention(4, D, 0.1, num_tasks=3, head_candidates=8).to(device)
        module.train(training)
        x, _, mask = padded(device)
        tasks = torch.tensor(task_ids, device=device)
        set_task_id(module, tasks)  # ids on the host are checked there: no synchronisation

        def step():
            if tasks.is_cuda:  # ids on the device: checked there, as the model's forward gives them
                set_task_id(module, tasks)
            out = module(x, x, x, mask).sum()
            return out + module.selection_kl.sum() if training else out

        return step

    return case


def mhma(heads, conv_form="dense", **config):
    module = MultiHeadMultiAttention(4, D, 0.1, heads, redraw_interval=1, conv_form=conv_form)
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
    x, lengths, _ = padded(device)
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
    x, lengths, _ = padded(device)
    return lambda: module(x, lengths)[0].sum()


def avhubert(use_sdpa=False):
    """The AV-HuBERT encoder after its front end (LayerDrop 0: its draw is the CPU generator's)."""

    def case(device):
        module = AVHubertEncoder(D, output_size=D, attention_heads=4, linear_units=64, num_blocks=2,
                                 layer_norm_first=True, layerdrop=0.0, conv_pos=8, conv_pos_groups=4,
                                 use_sdpa=use_sdpa)  # fmt: skip
        module.to(device).train()
        x, lengths, _ = padded(device)
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
    "MHMA Conv, depthwise, every head": mhma(["4 x Conv(5, 2)"], conv_form="depthwise"),
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


def use_local_path(name: str, monkeypatch) -> None:
    """Send the Local heads of case ``name`` down the path it names (short ones: the dense band)."""
    if any(word in name for word in LONG_PATH):
        monkeypatch.setattr(head_kinds, "LOCAL_DENSE_MAX_FRAMES", 0)
        monkeypatch.setattr(head_kinds, "FLEX_ON_CUDA", "FlexAttention" in name)
        chunked = {"cpu", "cuda"} if "chunked path" in name else set()
        monkeypatch.setattr(head_kinds, "LOCAL_CHUNK_DEVICES", chunked)
        # chunks of 4 frames: several per utterance of these cases
        monkeypatch.setattr(head_kinds, "LOCAL_CHUNK_FRAMES", 4)
    else:  # short Local heads dense, as on CUDA, on the CPU too
        monkeypatch.setattr(head_kinds, "LOCAL_DENSE_DEVICES", {"cpu", "cuda"})
