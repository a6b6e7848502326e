"""MHMA head kinds against their definitions (thesis §3.2.1, eq. 23), with padded batches."""

import math

import pytest
import torch
import torch.nn.functional as F
from espnet.nets.pytorch_backend.transformer.attention import MultiHeadedAttention
from espnet_averaging import espnet_average

from espnet_ext.attention import head_kinds, multi_attention
from espnet_ext.attention.multi_attention import (
    ConvHeads,
    FastHeads,
    FullHeads,
    HeadKind,
    LocalHeads,
    MultiHeadMultiAttention,
    parse_heads,
    parse_layer_heads,
)
from espnet_ext.attention.relaxed import RelaxedMultiHeadedAttention
from espnet_ext.errors import ConfigError

LENGTHS = torch.tensor([23, 17, 9])


def key_mask(lengths=LENGTHS, total=None):
    total = total or int(lengths.max())
    return (torch.arange(total)[None, :] < lengths[:, None]).unsqueeze(1)  # (B, 1, T)


def qkv(heads=2, d_k=8, lengths=LENGTHS, seed=0):
    g = torch.Generator().manual_seed(seed)
    shape = (len(lengths), heads, int(lengths.max()), d_k)
    return [torch.randn(shape, generator=g) for _ in range(3)]


def reference_attention(q, k, v, allowed):
    """ESPnet's own masked softmax attention with an explicit (B, L, T) mask."""
    espnet = MultiHeadedAttention(q.size(1), q.size(1) * q.size(-1), 0.0)
    espnet.linear_out = torch.nn.Identity()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    out = espnet.forward_attention(v, scores, allowed)  # (B, L, H·d_k)
    return out.reshape(q.size(0), q.size(2), q.size(1), q.size(3)).transpose(1, 2)


def real_queries(x, lengths=LENGTHS):
    return [x[b, :, :n] for b, n in enumerate(lengths.tolist())]


def assert_real_close(a, b, atol=1e-5):
    for x, y in zip(real_queries(a), real_queries(b)):
        torch.testing.assert_close(x, y, atol=atol, rtol=1e-5)


# ------------------------------------------------------------------------------------- Local


@pytest.fixture(params=["dense", "blocked"])
def local_path(request, monkeypatch):
    """Local heads through the masked dense attention (CUDA's, short utterances) or the blocked path."""
    if request.param == "blocked":
        monkeypatch.setattr(head_kinds, "LOCAL_DENSE_MAX_FRAMES", 0)
    else:
        monkeypatch.setattr(head_kinds, "LOCAL_DENSE_DEVICES", {"cpu", "cuda"})
    return request.param


@pytest.mark.parametrize("window,dilation", [(4, 1), (6, 1), (10, 1), (64, 1), (4, 2), (6, 3)])
def test_local_equals_full_attention_under_a_banded_mask(window, dilation, local_path):
    q, k, v = qkv()
    mask = key_mask()
    i = torch.arange(q.size(2))
    offset = i[None, :] - i[:, None]
    band = (offset.abs() <= window // 2 * dilation) & (offset % dilation == 0)
    expected = reference_attention(q, k, v, mask & band)
    got = head_kinds.local_attention(q, k, v, mask, window, dilation)
    assert_real_close(got, expected)


def test_local_sees_exactly_half_window_keys_each_side(local_path):
    # One-hot values: the weight a query gives each key is read from the output.
    length, window = 20, 6
    q = torch.zeros(1, 1, length, length)  # equal scores: uniform weights over the visible keys
    v = torch.eye(length)[None, None]
    weights = head_kinds.local_attention(q, q, v, None, window)[0, 0]
    for i in range(length):
        visible = [j for j in range(length) if abs(i - j) <= 3]
        expected = torch.zeros(length)
        expected[visible] = 1 / len(visible)
        torch.testing.assert_close(weights[i], expected)


def test_local_output_of_an_utterance_does_not_depend_on_the_batch_padding(local_path):
    q, k, v = qkv()
    batched = head_kinds.local_attention(q, k, v, key_mask(), 8, 2)
    n = int(LENGTHS[2])
    alone = head_kinds.local_attention(q[2:, :, :n], k[2:, :, :n], v[2:, :, :n], None, 8, 2)
    torch.testing.assert_close(batched[2, :, :n], alone[0])


@pytest.mark.parametrize("window,dilation", [(8, 1), (6, 3)])
def test_flex_mask_of_a_local_head_is_its_band_and_its_padding(window, dilation, local_path):
    """The FlexAttention mask (CUDA's path) evaluated densely, as attention's mask: the blocked path's
    result, with an empty utterance's queries at zero."""
    lengths = torch.tensor([23, 17, 0])
    q, k, v = qkv(lengths=lengths)
    keep = key_mask(lengths, total=23)[:, -1]
    b, i, j = (torch.arange(n).view(*[-1 if d == a else 1 for d in range(3)])
               for a, n in enumerate((3, 23, 23)))  # fmt: skip
    visible = head_kinds.local_mask_mod(keep, window // 2, dilation)(b, 0, i, j)  # (B, L, T)
    blocked = head_kinds.local_attention(q, k, v, keep[:, None], window, dilation)
    torch.testing.assert_close(reference_attention(q, k, v, visible), blocked, atol=1e-5, rtol=1e-5)
    assert blocked[2].eq(0).all()


def block_mask(length, size):
    """(L, T): query i sees key j when their blocks of ``size`` frames are the same or adjacent."""
    blocks = torch.arange(length) // size
    return (blocks[:, None] - blocks[None, :]).abs() <= 1


@pytest.mark.parametrize("window", [3, 6, 9, 16, 64])
def test_block_local_equals_full_attention_under_the_block_mask(window):
    q, k, v = qkv()
    mask = key_mask()
    expected = reference_attention(q, k, v, mask & block_mask(q.size(2), window // 3))
    assert_real_close(head_kinds.block_local_attention(q, k, v, mask, window), expected)


def test_block_local_sees_three_blocks_of_w_over_3_at_block_dependent_offsets():
    # Local(64) in the thesis' code: blocks of 21, 63 keys; one-hot values read back each weight.
    length = 100
    q = torch.zeros(1, 1, length, length)
    weights = head_kinds.block_local_attention(q, q, torch.eye(length)[None, None], None, 64)[0, 0]
    for i in range(length):
        visible = [j for j in range(length) if abs(j // 21 - i // 21) <= 1]
        expected = torch.zeros(length)
        expected[visible] = 1 / len(visible)
        torch.testing.assert_close(weights[i], expected)
    seen = [(weights[i] > 0).nonzero().flatten() - i for i in (21, 41)]
    assert [(int(o.min()), int(o.max()), len(o)) for o in seen] == [(-21, 41, 63), (-41, 21, 63)]


def test_block_local_equals_lucidrains_local_attention_as_the_thesis_code_calls_it():
    """mt-upc/fairseq multiformer, fairseq/modules/multihead_multiattention.py: LocalAttention(window_size=
    w // 3, look_backward=1, look_forward=1, autopad=True), rel_pos None, heads folded into the batch and
    the key mask tiled per head (real queries; padded ones are never read)."""
    local_attention = pytest.importorskip("local_attention")
    q, k, v = qkv(heads=3)
    batch, heads, length, d_k = q.shape
    keep = key_mask()[:, 0]
    theirs = local_attention.LocalAttention(
        window_size=9 // 3, causal=False, look_backward=1, look_forward=1, autopad=True
    )
    assert theirs.rel_pos is None

    def folded(x):
        return x.transpose(0, 1).reshape(heads * batch, length, d_k)

    out = theirs(folded(q), folded(k), folded(v), mask=keep.repeat(heads, 1))
    expected = out.reshape(heads, batch, length, d_k).transpose(0, 1)
    assert_real_close(head_kinds.block_local_attention(q, k, v, key_mask(), 9), expected)


def local_paths_agree(monkeypatch, settings, window, dilation, device="cpu", tol=1e-5):
    """Runs ``local_attention`` once per head_kinds setting in ``settings`` (dicts of module constants,
    the reference path's last) on one padded batch with an empty utterance; asserts every path's output
    and gradients equal the reference's and the empty utterance's context is zero (ESPnet's)."""
    total = 40 if device == "cpu" else 300
    lengths = torch.tensor([40, 33, 0, 7]) if device == "cpu" else torch.tensor([300, 211, 0, 129])
    keep = key_mask(lengths, total=total)[:, -1].to(device)
    shape = {} if device == "cpu" else {"heads": 4, "d_k": 32}
    inputs = [x.to(device) for x in qkv(lengths=lengths, **shape)]
    results = []
    for setting in settings:
        for name, value in setting.items():
            monkeypatch.setattr(head_kinds, name, value)
        q, k, v = (x.clone().requires_grad_() for x in inputs)
        out = head_kinds.local_attention(q, k, v, keep[:, None], window, dilation)
        weights = torch.linspace(-1, 1, out.numel(), device=device).view_as(out)
        (out * weights).sum().backward()
        results.append([out.detach(), q.grad, k.grad, v.grad])
    for result in results[:-1]:
        assert torch.isfinite(result[0]).all()
        for got, expected in zip(result, results[-1]):
            torch.testing.assert_close(got, expected, atol=tol, rtol=tol)
        assert result[0][2].eq(0).all()  # the empty utterance: zero context, as ESPnet's


@pytest.mark.parametrize("dilation", [1, 2, 3])
def test_dense_and_blocked_local_paths_agree_in_outputs_and_gradients(dilation, monkeypatch):
    monkeypatch.setattr(head_kinds, "LOCAL_DENSE_DEVICES", {"cpu", "cuda"})
    dense, blocked = ({"LOCAL_DENSE_MAX_FRAMES": n} for n in (head_kinds.LOCAL_DENSE_MAX_FRAMES, 0))
    local_paths_agree(monkeypatch, [dense, blocked], 8, dilation)


@pytest.mark.parametrize("dilation,chunk", [(1, 16), (1, 7), (2, 16), (3, 5), (1, 64)])
def test_chunked_and_blocked_local_paths_agree_in_outputs_and_gradients(
    dilation, chunk, monkeypatch
):
    """Chunks that divide T or not, smaller than the reach (5 < 3·4) or larger than T (one chunk)."""
    monkeypatch.setattr(head_kinds, "LOCAL_DENSE_MAX_FRAMES", 0)
    monkeypatch.setattr(head_kinds, "LOCAL_CHUNK_FRAMES", chunk)
    chunked, blocked = ({"LOCAL_CHUNK_DEVICES": d} for d in ({"cpu", "cuda"}, set()))
    local_paths_agree(monkeypatch, [chunked, blocked], 8, dilation)


def test_chunked_band_is_the_dense_band_cut_into_chunks():
    """Each chunk's window holds the dense band's rows for its queries, at the frames the window spans;
    windows are a multiple of 16 keys (the fused kernel's mask alignment)."""
    keep = key_mask(torch.tensor([37, 20]), total=37)[:, -1]
    half, dilation, chunk = 3, 2, 8
    visible, empty = head_kinds.chunked_band(keep, half, dilation, chunk)
    dense, dense_empty = head_kinds.local_band(keep, half, dilation)
    chunks, window = 5, 32  # ceil(37 / 8); 8 + 2·6 = 20 keys rounded up to 32
    assert visible.shape == (2 * chunks, 1, chunk, window)
    assert empty.shape == (2 * chunks, 1, chunk, 1)
    visible, empty = visible.view(2, chunks, chunk, window), empty.view(2, chunks, chunk)
    for i in range(chunks):
        for a in range(chunk):
            query = i * chunk + a
            if query >= 37:
                continue
            frames = torch.arange(window) + i * chunk - half * dilation
            inside = (frames >= 0) & (frames < 37)
            expected = torch.zeros(2, window, dtype=torch.bool)
            expected[:, inside] = dense[:, 0, query, frames[inside]]
            assert torch.equal(empty[:, i, a], dense_empty[:, 0, query, 0])
            rows = visible[:, i, a]
            assert torch.equal(rows[~empty[:, i, a]], expected[~empty[:, i, a]])
            assert rows[empty[:, i, a]].all()  # shown every key, zeroed afterwards


def test_flex_block_mask_is_built_once_per_padding_mask_and_rebuilt_when_it_changes():
    lengths = torch.tensor([300, 211, 0, 129])
    mask = key_mask(lengths, total=300)
    first = head_kinds.local_block_mask(mask[:, -1], 32, 1, mask)
    # the next layer of the same forward reads its own copy of the same padding mask
    assert head_kinds.local_block_mask(mask[:, -1].bool(), 32, 1, mask) is first
    assert head_kinds.local_block_mask(mask[:, -1], 32, 2, mask) is not first  # another head form
    batch = mask.clone()  # the next batch, equal in content
    second = head_kinds.local_block_mask(batch[:, -1], 32, 1, batch)
    assert second is not first
    batch[1, 0, 5:] = False  # changed in place
    third = head_kinds.local_block_mask(batch[:, -1], 32, 1, batch)
    assert third is not second
    b, i, j = (torch.arange(n) for n in (4, 300, 300))
    b, i, j = b[:, None, None], i[None, :, None], j[None, None, :]
    expected = head_kinds.local_mask_mod(batch[:, -1], 32)(b, 0, i, j)
    assert torch.equal(third.mask_mod(b, 0, i, j), expected)  # built from the changed mask
    # its blocks too: utterance 1 now has keys in its first block only
    assert not torch.equal(third.kv_num_blocks, second.kv_num_blocks)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dilation", [1, 2])
def test_cuda_flex_local_heads_equal_the_blocked_path(dilation, monkeypatch):
    monkeypatch.setattr(head_kinds, "LOCAL_DENSE_MAX_FRAMES", 0)  # these lengths would go dense
    flex = {"FLEX_ON_CUDA": True}
    blocked = {"FLEX_ON_CUDA": False, "LOCAL_CHUNK_DEVICES": set()}
    local_paths_agree(monkeypatch, [flex, blocked], 64, dilation, device="cuda", tol=2e-4)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dilation", [1, 2])
def test_cuda_chunked_local_heads_equal_the_blocked_path(dilation, monkeypatch):
    """On CUDA the chunks run through PyTorch's memory-efficient kernel, not the CPU's math."""
    monkeypatch.setattr(head_kinds, "LOCAL_DENSE_MAX_FRAMES", 0)
    chunked, blocked = ({"LOCAL_CHUNK_DEVICES": d} for d in ({"cuda"}, set()))
    local_paths_agree(monkeypatch, [chunked, blocked], 64, dilation, device="cuda", tol=2e-4)


# -------------------------------------------------------------------------------------- Conv


@pytest.mark.parametrize(
    "n,kernel,stride,frames", [(10, 5, 2, 5), (7, 5, 2, 4), (10, 7, 3, 4), (1, 5, 2, 1)]
)
def test_compressed_lengths_by_hand(n, kernel, stride, frames):
    assert int(head_kinds.conv_output_lengths(torch.tensor(n), kernel, stride)) == frames
    conv = torch.nn.Conv1d(1, 1, kernel, stride, padding=kernel // 2)
    assert conv(torch.zeros(1, 1, n)).size(-1) == frames  # PyTorch agrees for an unpadded sequence


@pytest.mark.parametrize("kernel,stride", [(5, 2), (7, 3)])
def test_conv_equals_full_attention_over_compressed_keys_and_values(kernel, stride):
    q, k, v = qkv()
    mask = key_mask()
    heads, d_k = q.size(1), q.size(-1)
    convs = [
        torch.nn.Conv1d(heads * d_k, heads * d_k, kernel, stride, kernel // 2, groups=heads)
        for _ in range(2)
    ]
    got, cmask = head_kinds.conv_attention(q, k, v, mask, *convs)
    # Reference: each utterance alone, unpadded, through the convolution; then plain attention.
    for b, n in enumerate(LENGTHS.tolist()):

        def compress(x, conv, b=b, n=n):
            y = conv(x[b : b + 1, :, :n].transpose(-2, -1).reshape(1, heads * d_k, n))
            return y.reshape(1, heads, d_k, -1).transpose(-2, -1)

        kc, vc = compress(k, convs[0]), compress(v, convs[1])
        assert int(cmask[b].sum()) == kc.size(2) == -(-n // stride)
        expected = reference_attention(q[b : b + 1, :, :n], kc, vc, None)
        torch.testing.assert_close(got[b, :, :n], expected[0], atol=1e-5, rtol=1e-5)


def test_conv_gives_an_empty_utterance_a_zero_context_as_full_heads_do():
    """A padded row with no frames: zeros like a Full head's query without keys, finite gradients, the
    other rows as alone (no host-side check of the lengths, which would stall a GPU)."""
    q, k, v = qkv(lengths=torch.tensor([5, 0]))
    mask = key_mask(torch.tensor([5, 0]))
    convs = [torch.nn.Conv1d(16, 16, 5, 2, 2, groups=2) for _ in range(2)]
    q, k, v = (x.requires_grad_() for x in (q, k, v))
    got, cmask = head_kinds.conv_attention(q, k, v, mask, *convs)
    assert cmask[1].sum() == 0 and got[1].eq(0).all()
    assert head_kinds.full_attention(q, k, v, mask)[0][1].eq(0).all()
    alone, _ = head_kinds.conv_attention(q[:1], k[:1], v[:1], mask[:1], *convs)
    torch.testing.assert_close(got[:1], alone)
    got.sum().backward()
    assert all(x.grad.isfinite().all() for x in (q, k, v))
    assert all(p.grad.isfinite().all() for conv in convs for p in conv.parameters())


def thesis_code_mask_length(n: int, kernel: int, stride: int) -> int:
    """``compute_conv_out_length`` of the thesis' code (fairseq/modules/conv_attention.py), in floats."""
    return math.floor((n + 2 * (stride // 2) - kernel) / stride + 1)


@pytest.mark.parametrize(
    "n,kernel,stride,frames",
    [(10, 5, 2, 4), (7, 7, 3, 1), (3, 5, 2, 1), (2, 5, 2, 0), (1, 7, 3, -1)],
)
def test_depthwise_mask_lengths_by_hand(n, kernel, stride, frames):
    # ⌊(n + 2⌊χ/2⌋ - κ)/χ + 1⌋: Conv(5, 2) keeps 4 of 10 frames, none of 2
    got = head_kinds.conv_output_lengths(torch.tensor(n), kernel, stride, stride // 2)
    assert int(got) == frames == thesis_code_mask_length(n, kernel, stride)
    if frames > 0:  # PyTorch agrees for an unpadded sequence
        conv = torch.nn.Conv1d(1, 1, kernel, stride, padding=stride // 2)
        assert conv(torch.zeros(1, 1, n)).size(-1) == frames


@pytest.mark.parametrize("kernel,stride", [(5, 2), (7, 3), (3, 1), (4, 2), (9, 5)])
def test_depthwise_mask_length_and_input_padding_are_the_thesis_codes(kernel, stride):
    lengths = torch.arange(0, 60)
    got = head_kinds.conv_output_lengths(lengths, kernel, stride, stride // 2)
    assert got.tolist() == [thesis_code_mask_length(n, kernel, stride) for n in range(60)]
    for t in range(1, 60):  # compute_pre_conv_length: κ + χ⌈(T - κ)/χ⌉, at least κ
        padded = kernel + stride * math.ceil((t - kernel) / stride) if t > kernel else kernel
        assert head_kinds.depthwise_input_length(t, kernel, stride) == padded


def thesis_conv_attention(q, k, v, k_conv, v_conv):
    """The thesis' code's ConvAttention for one utterance alone, (h, n, d_k) each: heads folded into the
    batch, K and V right-padded to κ + χ⌈(n - κ)/χ⌉ frames, one depthwise convolution (padding ⌊χ/2⌋)
    for every head, the first ⌊(n + 2⌊χ/2⌋ - κ)/χ + 1⌋ compressed frames attended."""
    n, d_k = k.size(1), k.size(2)
    kernel, stride = k_conv.kernel_size[0], k_conv.stride[0]
    target = kernel + stride * math.ceil((n - kernel) / stride) if n > kernel else kernel

    def compress(x, conv):
        x = F.pad(x, (0, 0, 0, target - n)).transpose(1, 2)  # (h, d_k, target)
        return F.conv1d(x, conv.weight, conv.bias, stride, stride // 2, groups=d_k).transpose(1, 2)

    kc, vc = compress(k, k_conv), compress(v, v_conv)
    scores = q @ kc.transpose(1, 2) / math.sqrt(d_k)
    scores[..., thesis_code_mask_length(n, kernel, stride) :] = -math.inf
    return torch.softmax(scores, dim=-1) @ vc


@pytest.mark.parametrize("kernel,stride", [(5, 2), (7, 3)])
def test_depthwise_conv_equals_the_thesis_codes_conv_attention_utterance_by_utterance(
    kernel, stride
):
    q, k, v = qkv(heads=3)
    convs = [torch.nn.Conv1d(8, 8, kernel, stride, stride // 2, groups=8) for _ in range(2)]
    got, cmask = head_kinds.depthwise_conv_attention(q, k, v, key_mask(), *convs)
    for b, n in enumerate(LENGTHS.tolist()):
        expected = thesis_conv_attention(q[b, :, :n], k[b, :, :n], v[b, :, :n], *convs)
        torch.testing.assert_close(got[b, :, :n], expected, atol=1e-5, rtol=1e-5)
        assert int(cmask[b].sum()) == thesis_code_mask_length(n, kernel, stride)


def test_depthwise_conv_gives_an_utterance_without_compressed_frames_a_zero_context():
    lengths = torch.tensor([9, 2])  # Conv(5, 2) keeps ⌊(2 + 2 - 5)/2 + 1⌋ = 0 frames of 2
    q, k, v = (x.requires_grad_() for x in qkv(lengths=lengths))
    convs = [torch.nn.Conv1d(8, 8, 5, 2, 1, groups=8) for _ in range(2)]
    got, cmask = head_kinds.depthwise_conv_attention(q, k, v, key_mask(lengths), *convs)
    assert cmask[1].sum() == 0 and got[1].eq(0).all()
    alone, _ = head_kinds.depthwise_conv_attention(q[:1], k[:1], v[:1], None, *convs)
    torch.testing.assert_close(got[:1], alone)
    got.sum().backward()
    assert all(x.grad.isfinite().all() for x in (q, k, v))


def test_depthwise_group_shares_one_convolution_where_dense_has_one_per_head():
    def conv_parameters(module):
        return sum(p.numel() for p in module.groups.parameters())

    dense = MultiHeadMultiAttention(4, 32, 0.0, ["4 x Conv(5, 2)"])
    depthwise = MultiHeadMultiAttention(4, 32, 0.0, ["4 x Conv(5, 2)"], conv_form="depthwise")
    assert conv_parameters(dense) == 4 * 2 * (8 * 8 * 5 + 8)  # d_k = 8: a K and a V conv per head
    assert conv_parameters(depthwise) == 2 * (8 * 5 + 8)  # one depthwise K and V conv per group
    conv = depthwise.groups[0].conv_k
    assert (conv.in_channels, conv.groups, conv.padding, conv.stride) == (8, 8, (1,), (2,))
    # s2t_transformer_s sizes (d_k 64): 768 parameters per group, as the thesis' code's ConvAttention
    paper = MultiHeadMultiAttention(
        4, 256, 0.0, ["2 x Local(64)", "2 x Conv(5, 2)"], conv_form="depthwise"
    )
    assert conv_parameters(paper) == 768


# -------------------------------------------------------------------------------------- Fast


def test_fast_converges_to_full_as_features_grow():
    q, k, v = (x * 0.5 for x in qkv(d_k=8))
    mask = key_mask()
    full = reference_attention(q, k, v, mask)
    errors = []
    for features in (8, 64, 512, 8192):
        g = torch.Generator().manual_seed(1)
        projection = head_kinds.orthogonal_gaussian(features, 8, generator=g)
        fast = head_kinds.fast_attention(q, k, v, mask, projection)
        errors.append(
            max((a - b).abs().mean().item() for a, b in zip(real_queries(fast), real_queries(full)))
        )
    assert errors[0] > errors[1] > errors[2] > errors[3]
    assert errors[-1] < 0.02


def test_fast_matches_performer_pytorch_with_the_same_features():
    performer = pytest.importorskip("performer_pytorch")
    q, k, v = qkv(lengths=torch.tensor([30, 30]))
    reference = performer.FastAttention(dim_heads=8, nb_features=32, causal=False)
    ours = head_kinds.fast_attention(q, k, v, None, reference.projection_matrix)
    torch.testing.assert_close(ours, reference(q, k, v), atol=1e-5, rtol=1e-4)


def test_fast_ignores_padded_keys():
    q, k, v = qkv()
    projection = head_kinds.orthogonal_gaussian(16, 8, generator=torch.Generator().manual_seed(0))
    batched = head_kinds.fast_attention(q, k, v, key_mask(), projection)
    n = int(LENGTHS[1])
    alone = head_kinds.fast_attention(q[1:2, :, :n], k[1:2, :, :n], v[1:2, :, :n], None, projection)
    torch.testing.assert_close(batched[1, :, :n], alone[0], atol=1e-5, rtol=1e-5)


def test_orthogonal_features_are_orthogonal_within_a_block():
    w = head_kinds.orthogonal_gaussian(8, 8, generator=torch.Generator().manual_seed(0))
    directions = w / w.norm(dim=1, keepdim=True)
    torch.testing.assert_close(directions @ directions.T, torch.eye(8), atol=1e-5, rtol=0)


# --------------------------------------------------------------------------------------- MHMA


def espnet_and_mhma(heads, d=32, n_head=4):
    torch.manual_seed(0)
    espnet = MultiHeadedAttention(n_head, d, 0.0).eval()
    mhma = MultiHeadMultiAttention.from_attention(
        MultiHeadedAttention(n_head, d, 0.0), heads, key="layers[0]"
    ).eval()
    mhma.load_state_dict(espnet.state_dict(), strict=False)
    return espnet, mhma


def test_all_full_layer_is_espnet_attention_bit_for_bit():
    espnet, mhma = espnet_and_mhma(["4 x Full"])
    x = torch.randn(3, 23, 32)
    mask = key_mask()
    assert set(mhma.state_dict()) == set(espnet.state_dict())
    assert torch.equal(mhma(x, x, x, mask), espnet(x, x, x, mask))
    mhma.all_full = False  # the per-head path computes the same to float rounding
    torch.testing.assert_close(mhma(x, x, x, mask), espnet(x, x, x, mask), atol=1e-6, rtol=1e-5)


def test_mixed_layer_concatenates_head_outputs_and_projects_with_one_w_o():
    _, mhma = espnet_and_mhma(["1 x Full", "1 x Local(4)", "1 x Conv(5, 2)", "1 x Fast(16)"])
    x = torch.randn(3, 23, 32)
    mask = key_mask()
    q, k, v = mhma.forward_qkv(x, x, x)
    heads = [
        head_kinds.full_attention(q[:, :1], k[:, :1], v[:, :1], mask)[0],
        head_kinds.local_attention(q[:, 1:2], k[:, 1:2], v[:, 1:2], mask, 4),
        head_kinds.conv_attention(
            q[:, 2:3], k[:, 2:3], v[:, 2:3], mask, mhma.groups[2].conv_k, mhma.groups[2].conv_v
        )[0],
        head_kinds.fast_attention(q[:, 3:], k[:, 3:], v[:, 3:], mask, mhma.groups[3].features),
    ]
    concat = torch.cat(heads, dim=1).transpose(1, 2).reshape(3, 23, 32)
    torch.testing.assert_close(mhma(x, x, x, mask), mhma.linear_out(concat))


def dense_head(group, index, q, k, v):
    """One head of ``group`` (its ``index``-th) on one unpadded utterance, (n, d_k) each, from the kind's
    definition with the group's parameters: explicit masks and convolutions, performer-pytorch for Fast."""
    n, d_k = q.shape
    kind, params = group.head.kind, group.head.params
    if kind == "conv" and group.form == "depthwise":
        return thesis_conv_attention(q[None], k[None], v[None], group.conv_k, group.conv_v)[0]
    if (
        kind == "conv"
    ):  # this head's own Conv1d(d_k, d_k, κ, χ, padding ⌊κ/2⌋) within the grouped conv
        heads = slice(index * d_k, (index + 1) * d_k)

        def compress(x, conv):
            y = F.conv1d(x.T[None], conv.weight[heads], conv.bias[heads], conv.stride, conv.padding)
            return y[0].T

        k, v = compress(k, group.conv_k), compress(v, group.conv_v)
    if kind == "fast":
        performer = pytest.importorskip("performer_pytorch")
        reference = performer.FastAttention(dim_heads=d_k, nb_features=group.features.size(0))
        reference.projection_matrix.copy_(group.features)
        return reference(q[None, None], k[None, None], v[None, None])[0, 0]
    allowed = torch.ones(n, k.size(0), dtype=torch.bool)
    i = torch.arange(n)
    if kind == "local" and group.form == "band":
        window, dilation = (*params, 1)[:2]
        offset = i[:, None] - i[None, :]
        allowed = (offset.abs() <= window // 2 * dilation) & (offset % dilation == 0)
    elif kind == "local":
        allowed = block_mask(n, params[0] // 3)
    scores = (q @ k.T / math.sqrt(d_k)).masked_fill(~allowed, -math.inf)
    return torch.softmax(scores, dim=-1) @ v


def dense_mhma(mhma, x, lengths):
    """Eq. 23 utterance by utterance: every head from ``dense_head``, concatenated, times W_o."""
    outputs = []
    for b, n in enumerate(lengths.tolist()):
        q, k, v = (
            linear(x[b, :n]).view(n, mhma.h, mhma.d_k).transpose(0, 1)
            for linear in (mhma.linear_q, mhma.linear_k, mhma.linear_v)
        )
        heads = [
            dense_head(group, h - group.first, q[h], k[h], v[h])
            for group in mhma.groups
            for h in range(group.first, group.stop)
        ]
        outputs.append(mhma.linear_out(torch.cat(heads, dim=-1)))
    return outputs


@pytest.mark.parametrize(
    "conv_form,local_form,dilated",
    [("dense", "band", "Local(4, 2)"), ("depthwise", "block", "Local(9)")],
)
def test_mixed_layer_equals_a_dense_computation_of_eq_23(conv_form, local_form, dilated):
    """A fixed-seed layer of every kind, padded batch, against the dense reference per utterance."""
    torch.manual_seed(0)
    heads = ["Full", "Local(6)", dilated, "2 x Conv(5, 2)", "Conv(7, 3)", "Fast(16)", "Full"]
    mhma = MultiHeadMultiAttention(
        8, 64, 0.0, heads, conv_form=conv_form, local_form=local_form
    ).eval()
    assert [type(g) for g in mhma.groups] == [FullHeads, LocalHeads, LocalHeads, ConvHeads,
                                              ConvHeads, FastHeads, FullHeads]  # fmt: skip
    x = torch.randn(3, 23, 64)
    got = mhma(x, x, x, key_mask())
    for b, expected in enumerate(dense_mhma(mhma, x, LENGTHS)):
        torch.testing.assert_close(got[b, : expected.size(0)], expected, atol=1e-5, rtol=1e-5)


def test_from_attention_leaves_the_module_it_copies_as_it_was():
    torch.manual_seed(0)
    source = MultiHeadedAttention(4, 32, 0.0).eval()
    tables = {name: dict(getattr(source, name)) for name in ("_modules", "_parameters", "_buffers")}
    keys = set(source.state_dict())
    x = torch.randn(3, 23, 32)
    before = source(x, x, x, key_mask())
    mhma = MultiHeadMultiAttention.from_attention(
        source, ["Full", "Local(4)", "Conv(5, 2)", "Fast(16)"], conv_form="depthwise"
    )
    for name, table in tables.items():
        assert getattr(source, name) == table and getattr(source, name) is not getattr(mhma, name)
    assert set(source.state_dict()) == keys and not hasattr(source, "groups")
    assert mhma.linear_q is source.linear_q  # the same Q/K/V/W_o parameters
    assert {k for k in mhma.state_dict() if k.startswith("groups.")} == {
        "groups.2.conv_k.weight", "groups.2.conv_k.bias", "groups.2.conv_v.weight",
        "groups.2.conv_v.bias", "groups.3.draw",
    }  # fmt: skip
    assert torch.equal(source(x, x, x, key_mask()), before)


# The parameters beyond ESPnet's as checkpoints written before the head groups named them.
OLD_KEYS = {
    "groups.2.conv_k.weight": "conv_k.2.weight",
    "groups.2.conv_k.bias": "conv_k.2.bias",
    "groups.2.conv_v.weight": "conv_v.2.weight",
    "groups.2.conv_v.bias": "conv_v.2.bias",
    "groups.3.draw": "fast_draw_3",
}


def test_checkpoints_written_before_the_head_groups_load_into_them(tmp_path):
    """Directly and through ESPnet's --init_param (how an ST encoder starts from an ASR model)."""
    from espnet2.torch_utils.load_pretrained_model import load_pretrained_model

    torch.manual_seed(0)
    heads = ["Full", "Local(4)", "Conv(5, 2)", "Fast(16)"]
    trained = torch.nn.ModuleDict({"att": MultiHeadMultiAttention(4, 32, 0.0, heads)}).eval()
    trained["att"].redraw_features()
    old = {
        "att." + OLD_KEYS.get(name[4:], name[4:]): value
        for name, value in trained.state_dict().items()
    }
    assert "att.fast_draw_3" in old and "att.conv_k.2.weight" in old
    fresh = torch.nn.ModuleDict({"att": MultiHeadMultiAttention(4, 32, 0.0, heads)}).eval()
    fresh.load_state_dict(old)  # strict: every old key has found its place
    x = torch.randn(3, 23, 32)
    expected = trained["att"](x, x, x, key_mask())
    assert torch.equal(fresh["att"](x, x, x, key_mask()), expected)
    torch.save(old, tmp_path / "old.pth")
    initialised = torch.nn.ModuleDict({"att": MultiHeadMultiAttention(4, 32, 0.0, heads)}).eval()
    load_pretrained_model(
        f"{tmp_path / 'old.pth'}:att:att", initialised, ignore_init_mismatch=False
    )
    assert torch.equal(initialised["att"](x, x, x, key_mask()), expected)


def test_fast_features_are_redrawn_on_schedule_in_training_only():
    _, mhma = espnet_and_mhma(["2 x Fast", "2 x Full"])
    mhma.redraw_interval = 2
    x = torch.randn(1, 5, 32)
    fast = mhma.groups[0]
    first = fast.features.clone()
    mhma.eval()
    for _ in range(4):
        mhma(x, x, x, None)
    assert torch.equal(fast.features, first)
    mhma.train()
    mhma(x, x, x, None), mhma(x, x, x, None)
    assert torch.equal(fast.features, first)
    mhma(x, x, x, None)  # the third call starts a new interval with new features
    assert not torch.equal(fast.features, first)
    # inference reuses the trained draw: the state dict holds it, loading regenerates its features
    assert "groups.0.draw" in mhma.state_dict() and "groups.0.features" not in mhma.state_dict()
    _, fresh = espnet_and_mhma(["2 x Fast", "2 x Full"])
    assert not torch.equal(fresh.groups[0].features, fast.features)
    fresh.load_state_dict(mhma.state_dict())
    assert torch.equal(fresh.groups[0].features, fast.features)


def test_a_resumed_training_redraws_fast_features_when_an_uninterrupted_one_would():
    _, uninterrupted = espnet_and_mhma(["2 x Fast", "2 x Full"])
    uninterrupted.redraw_interval = 3
    uninterrupted.train()
    x = torch.randn(1, 5, 32)
    for _ in range(5):  # stopped after 5 training calls: a redraw before the 4th, two calls since
        uninterrupted(x, x, x, None)
    checkpoint = {k: v.clone() for k, v in uninterrupted.state_dict().items()}
    assert int(checkpoint["redraw_calls"]) == 2
    _, resumed = espnet_and_mhma(["2 x Fast", "2 x Full"])
    resumed.redraw_interval = 3
    resumed.train().load_state_dict(checkpoint)
    for _ in range(4):  # the next redraw comes before the 7th call in both
        uninterrupted(x, x, x, None), resumed(x, x, x, None)
        assert torch.equal(resumed.groups[0].features, uninterrupted.groups[0].features)
    # a checkpoint from before the counter loads (strictly), counting from 0
    del checkpoint["redraw_calls"]
    resumed.load_state_dict(checkpoint)
    assert resumed.calls_since_redraw == 0
    _, no_fast = espnet_and_mhma(["2 x Local(2)", "2 x Full"])
    assert "redraw_calls" not in no_fast.state_dict()  # only layers with Fast heads count


def test_fast_features_of_an_espnet_averaged_model_are_one_proper_draw(tmp_path):
    _, mhma = espnet_and_mhma(["2 x Fast", "2 x Full"])
    states = []
    for _ in range(2):
        mhma.redraw_features()  # each epoch ends on another draw
        states.append({k: v.clone() for k, v in mhma.state_dict().items()})
    mhma.load_state_dict(espnet_average(states, tmp_path))
    features = mhma.groups[0].features  # (m, d_k) with m >= d_k: its first d_k rows are orthogonal
    block = features[: mhma.d_k]
    gram = block @ block.T
    off_diagonal = gram - torch.diag(torch.diag(gram))
    assert off_diagonal.abs().max() < 1e-3 * gram.diag().max()
    norms = block.norm(dim=1)  # χ(d_k) norms, about √d_k, not shrunk by averaging
    assert 0.7 * mhma.d_k**0.5 < norms.mean() < 1.3 * mhma.d_k**0.5


def test_relaxation_acts_on_full_heads_as_relaxed_attention():
    espnet, mhma = espnet_and_mhma(["4 x Full"])
    relaxed = RelaxedMultiHeadedAttention.from_attention(espnet, gamma=0.3, fused=False).train()
    mhma.configure(gamma=0.3)
    mhma.train()
    x = torch.randn(3, 23, 32)
    torch.testing.assert_close(mhma(x, x, x, key_mask()), relaxed(x, x, x, key_mask()))


def test_relaxation_leaves_non_full_heads_unchanged():
    _, plain = espnet_and_mhma(["2 x Local(4)", "2 x Full"])
    _, relaxed = espnet_and_mhma(["2 x Local(4)", "2 x Full"])
    relaxed.configure(gamma=0.5, matched_inference=True)
    x = torch.randn(3, 23, 32)
    q, k, v = plain.forward_qkv(x, x, x)
    a, _ = plain.groups[0](q[:, :2], k[:, :2], v[:, :2], key_mask(), plain.dropout)
    b, _ = relaxed.groups[0](q[:, :2], k[:, :2], v[:, :2], key_mask(), relaxed.dropout)
    assert torch.equal(a, b)
    assert not torch.allclose(plain(x, x, x, key_mask()), relaxed(x, x, x, key_mask()))


# -------------------------------------------------------------------------------- Bad configs


def test_head_notation_parses_counts_kinds_and_parameters():
    assert parse_heads("2 x Local(64)", "k") == [HeadKind("local", (64,))] * 2
    assert parse_heads("Conv(5, 2)", "k") == [HeadKind("conv", (5, 2))]
    assert (
        parse_layer_heads("2 x Full, 2 x Conv(7,3)", 4, "k")[2:] == [HeadKind("conv", (7, 3))] * 2
    )
    assert str(HeadKind("local", (64, 2))) == "Local(64, 2)"


@pytest.mark.parametrize(
    "entries,message",
    [
        (["3 x Full"], "gives 3 heads, the layer has 4"),
        (["4 x Linformer"], "unknown attention kind 'Linformer'"),
        (["4 x Local(0)"], "must be > 0"),
        (["4 x Local(-8)"], "cannot read|must be > 0"),
        (["4 x Conv(5)"], "takes 2..2 parameters"),
        (["4 x Local(a)"], "must be integers"),
    ],
)
def test_bad_head_lists_name_the_config_key(entries, message):
    with pytest.raises(ConfigError, match=message) as error:
        parse_layer_heads(entries, 4, "encoder_conf.layers[2].heads")
    assert "encoder_conf.layers[2].heads" in str(error.value)


@pytest.mark.parametrize(
    "heads,forms,message,key",
    [
        (["4 x Local(8, 2)"], dict(local_form="block"), "block form", "encoder_conf"),
        (["4 x Local(2)"], dict(local_form="block"), "block form", "encoder_conf"),
        (["4 x Full"], dict(local_form="blocks"), "must be one of", "encoder_conf.local_form"),
        (["4 x Full"], dict(conv_form="separable"), "must be one of", "encoder_conf.conv_form"),
    ],
)
def test_bad_head_forms_are_refused_naming_the_key(heads, forms, message, key):
    with pytest.raises(ConfigError, match=message) as error:
        MultiHeadMultiAttention(4, 32, 0.0, heads, key="encoder_conf", **forms)
    assert key in str(error.value)


def test_d_model_not_divisible_by_heads_is_refused():
    with pytest.raises(ConfigError, match="not divisible by 3 heads"):
        MultiHeadMultiAttention(3, 32, 0.0, ["3 x Full"], key="encoder_conf")


def test_attn_holds_the_full_heads_weights_for_espnet_plots():
    _, mhma = espnet_and_mhma(["2 x Local(4)", "2 x Full"])
    x = torch.randn(3, 23, 32)
    mhma(x, x, x, key_mask())
    q, k, v = mhma.forward_qkv(x, x, x)
    _, weights = head_kinds.full_attention(q[:, 2:], k[:, 2:], v[:, 2:], key_mask())
    torch.testing.assert_close(mhma.attn, weights)
    _, local_only = espnet_and_mhma(["4 x Local(4)"])
    local_only(x, x, x, key_mask())
    assert local_only.attn is None


def test_dilated_local_attention_passes_gradients(local_path):
    q, k, v = (t.requires_grad_() for t in qkv())
    head_kinds.local_attention(q, k, v, key_mask(), 4, 2).sum().backward()
    assert all(t.grad is not None and t.grad.abs().sum() > 0 for t in (q, k, v))


def test_masked_softmax_gives_espnets_zero_row_to_a_query_without_keys():
    scores = torch.randn(1, 1, 2, 3)
    keep = torch.tensor([[[True, False, True], [False, False, False]]]).unsqueeze(1)
    weights = head_kinds.masked_softmax(scores.clone(), keep)
    expected = torch.softmax(scores[0, 0, 0, [0, 2]], -1)
    torch.testing.assert_close(
        weights[0, 0, 0], torch.stack([expected[0], torch.tensor(0.0), expected[1]])
    )
    assert torch.equal(weights[0, 0, 1], torch.zeros(3))


def test_local_and_conv_heads_derive_their_mask_terms_once_per_mask(monkeypatch):
    """Every layer of a forward gets the same mask tensor: the dense band (Local) and the compressed
    lengths and masks (Conv) are made by the first layer and reused; another mask makes them anew.
    (Each group's own path: in eval; training computes the groups in one call, tested below.)"""
    monkeypatch.setattr(
        head_kinds, "LOCAL_DENSE_DEVICES", {"cpu", "cuda"}
    )  # the band path, as on CUDA
    head_kinds.MASK_TERMS.clear()
    calls = {"band": 0, "lengths": 0}
    band, lengths = head_kinds.local_band, head_kinds.conv_output_lengths

    def counted(name, fn):
        return lambda *a, **k: calls.__setitem__(name, calls[name] + 1) or fn(*a, **k)

    monkeypatch.setattr(head_kinds, "local_band", counted("band", band))
    monkeypatch.setattr(head_kinds, "conv_output_lengths", counted("lengths", lengths))
    torch.manual_seed(0)
    layers = [
        MultiHeadMultiAttention(
            4, 32, 0.0, ["2 x Local(4)", "2 x Conv(5, 2)"], conv_form=form
        ).eval()
        for form in ("depthwise", "dense")
    ]
    x = torch.randn(3, 23, 32)
    mask = key_mask()
    outputs = [layer(x, x, x, mask) for layer in layers]
    assert calls == {"band": 1, "lengths": 2}  # one band; one compression per form
    again = [layer(x, x, x, mask) for layer in layers]
    assert calls == {"band": 1, "lengths": 2}
    for got, expected in zip(again, outputs):
        torch.testing.assert_close(got, expected)
    next_mask = key_mask()  # the next batch's mask, equal in value
    fresh = [layer(x, x, x, next_mask) for layer in layers]
    assert calls == {"band": 2, "lengths": 4}
    for got, expected in zip(fresh, outputs):
        torch.testing.assert_close(got, expected)
    head_kinds.MASK_TERMS.clear()
    uncached = [layer(x, x, x, mask) for layer in layers]
    for got, expected in zip(uncached, outputs):
        torch.testing.assert_close(got, expected)


@pytest.mark.parametrize(
    "heads, conv_form",
    [
        (["2 x Local(4)", "2 x Conv(5, 2)"], "depthwise"),
        (["2 x Local(4)", "2 x Conv(5, 2)"], "dense"),
        (["2 x Full", "2 x Conv(7, 3)"], "depthwise"),
        (["Full", "Local(6, 2)", "2 x Conv(3, 2)"], "dense"),
        (["2 x Conv(5, 2)", "2 x Conv(3, 1)"], "depthwise"),
    ],
)
@pytest.mark.parametrize("lengths", [[23, 9, 2], [23, 0, 5]])
def test_training_computes_every_group_in_one_attention_call(
    heads, conv_form, lengths, monkeypatch
):
    """Training on short utterances: one fused attention call for all groups, the same outputs and
    gradients (input, projections, convolutions) as each group's own path, a Conv group keeping no frame
    (2 frames) and an utterance of none included; the mask made once per layout and padding mask."""
    monkeypatch.setattr(head_kinds, "LOCAL_DENSE_DEVICES", {"cpu", "cuda"})  # as on CUDA
    head_kinds.MASK_TERMS.clear()
    torch.manual_seed(0)
    layer = MultiHeadMultiAttention(4, 32, 0.0, heads, conv_form=conv_form).train()
    lengths = torch.tensor(lengths)
    x, mask = torch.randn(3, 23, 32), key_mask(lengths, 23)
    calls = []
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(
        F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or sdpa(*a, **k)
    )
    results = []
    for one_call in (True, False):
        monkeypatch.setattr(MultiHeadMultiAttention, "_one_call", lambda *a, on=one_call: on)
        layer.zero_grad()
        inputs = x.clone().requires_grad_()
        calls.clear()
        out = layer(inputs, inputs, inputs, mask)
        assert len(calls) == (1 if one_call else sum(g.head.kind != "full" for g in layer.groups))
        assert layer.attn is None or not one_call  # no weight matrix made
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        results.append((out.detach(), [inputs.grad] + [p.grad.clone() for p in layer.parameters()]))
    (got, got_grads), (expected, expected_grads) = results
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    for g, e in zip(got_grads, expected_grads):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)  # sums of many products
    monkeypatch.undo()
    # the real condition takes it; eval, long utterances and the CPU's default do not
    monkeypatch.setattr(head_kinds, "LOCAL_DENSE_DEVICES", {"cpu", "cuda"})
    q = torch.zeros(3, 4, 23, 8)
    assert layer._one_call(q, q, mask) and not layer.eval()._one_call(q, q, mask)
    causal = mask & torch.ones(23, 23, dtype=torch.bool).tril()  # (B, T, T): per query
    assert not layer.train()._one_call(q, q, causal)
    monkeypatch.setattr(multi_attention, "ONE_CALL_MAX_FRAMES", 16)
    assert not layer.train()._one_call(q, q, mask)
    monkeypatch.undo()
    assert not layer._one_call(q, q, mask)  # the CPU keeps each group's path (LOCAL_DENSE_DEVICES)
