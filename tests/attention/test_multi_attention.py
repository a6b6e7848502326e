"""MHMA head kinds against their definitions (thesis §3.2.1, eq. 23), with padded batches."""

import math

import pytest
import torch
from espnet.nets.pytorch_backend.transformer.attention import MultiHeadedAttention
from espnet_averaging import espnet_average

from espnet_ext.attention import head_kinds
from espnet_ext.attention.multi_attention import (
    HeadKind,
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


@pytest.mark.parametrize("window,dilation", [(4, 1), (6, 1), (10, 1), (64, 1), (4, 2), (6, 3)])
def test_local_equals_full_attention_under_a_banded_mask(window, dilation):
    q, k, v = qkv()
    mask = key_mask()
    i = torch.arange(q.size(2))
    offset = i[None, :] - i[:, None]
    band = (offset.abs() <= window // 2 * dilation) & (offset % dilation == 0)
    expected = reference_attention(q, k, v, mask & band)
    got = head_kinds.local_attention(q, k, v, mask, window, dilation)
    assert_real_close(got, expected)


def test_local_sees_exactly_half_window_keys_each_side():
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


def test_local_output_of_an_utterance_does_not_depend_on_the_batch_padding():
    q, k, v = qkv()
    batched = head_kinds.local_attention(q, k, v, key_mask(), 8, 2)
    n = int(LENGTHS[2])
    alone = head_kinds.local_attention(q[2:, :, :n], k[2:, :, :n], v[2:, :, :n], None, 8, 2)
    torch.testing.assert_close(batched[2, :, :n], alone[0])


@pytest.mark.parametrize("window,dilation", [(8, 1), (6, 3)])
def test_flex_mask_of_a_local_head_is_its_band_and_its_padding(window, dilation):
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


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dilation", [1, 2])
def test_cuda_flex_local_heads_equal_the_blocked_path(dilation, monkeypatch):
    lengths = torch.tensor([300, 211, 0, 129])
    keep = key_mask(lengths, total=300)[:, -1].cuda()
    inputs = [x.cuda() for x in qkv(heads=4, d_k=32, lengths=lengths)]
    results = []
    for flex in (True, False):
        monkeypatch.setattr(head_kinds, "FLEX_ON_CUDA", flex)
        q, k, v = (x.clone().requires_grad_() for x in inputs)
        out = head_kinds.local_attention(q, k, v, keep[:, None], 64, dilation)
        (out * torch.linspace(-1, 1, out.numel(), device="cuda").view_as(out)).sum().backward()
        results.append([out.detach(), q.grad, k.grad, v.grad])
    for got, expected in zip(*results):
        torch.testing.assert_close(got, expected, atol=2e-4, rtol=2e-4)


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
            q[:, 2:3], k[:, 2:3], v[:, 2:3], mask, mhma.conv_k["2"], mhma.conv_v["2"]
        )[0],
        head_kinds.fast_attention(q[:, 3:], k[:, 3:], v[:, 3:], mask, mhma.fast_features_3),
    ]
    concat = torch.cat(heads, dim=1).transpose(1, 2).reshape(3, 23, 32)
    torch.testing.assert_close(mhma(x, x, x, mask), mhma.linear_out(concat))


def test_fast_features_are_redrawn_on_schedule_in_training_only():
    _, mhma = espnet_and_mhma(["2 x Fast", "2 x Full"])
    mhma.redraw_interval = 2
    x = torch.randn(1, 5, 32)
    first = mhma.fast_features_0.clone()
    mhma.eval()
    for _ in range(4):
        mhma(x, x, x, None)
    assert torch.equal(mhma.fast_features_0, first)
    mhma.train()
    mhma(x, x, x, None), mhma(x, x, x, None)
    assert torch.equal(mhma.fast_features_0, first)
    mhma(x, x, x, None)  # the third call starts a new interval with new features
    assert not torch.equal(mhma.fast_features_0, first)
    # inference reuses the trained draw: the state dict holds it, loading regenerates its features
    assert "fast_draw_0" in mhma.state_dict() and "fast_features_0" not in mhma.state_dict()
    _, fresh = espnet_and_mhma(["2 x Fast", "2 x Full"])
    assert not torch.equal(fresh.fast_features_0, mhma.fast_features_0)
    fresh.load_state_dict(mhma.state_dict())
    assert torch.equal(fresh.fast_features_0, mhma.fast_features_0)


def test_fast_features_of_an_espnet_averaged_model_are_one_proper_draw(tmp_path):
    _, mhma = espnet_and_mhma(["2 x Fast", "2 x Full"])
    states = []
    for _ in range(2):
        mhma.redraw_features()  # each epoch ends on another draw
        states.append({k: v.clone() for k, v in mhma.state_dict().items()})
    mhma.load_state_dict(espnet_average(states, tmp_path))
    features = mhma.fast_features_0  # (m, d_k) with m >= d_k: its first d_k rows are orthogonal
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
    a = plain._run(0, HeadKind("local", (4,)), q[:, :2], k[:, :2], v[:, :2], key_mask())
    b = relaxed._run(0, HeadKind("local", (4,)), q[:, :2], k[:, :2], v[:, :2], key_mask())
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


def test_dilated_local_attention_passes_gradients():
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
