"""Head selection against eqs. (3)-(7) worked by hand and against ESPnet's MultiHeadedAttention."""

import math

import pytest
import torch
from espnet.nets.pytorch_backend.transformer.attention import MultiHeadedAttention
from espnet.nets.pytorch_backend.transformer.mask import subsequent_mask

from espnet_ext.attention import head_selection
from espnet_ext.attention.head_selection import (
    HeadSelectionAttention,
    bernoulli_kl,
    group_mask,
    gumbel_posterior,
    set_task_id,
    subset_mask,
)
from espnet_ext.errors import ConfigError, InputError

H, DIM = 2, 8  # 2 heads of width 4


def padding_mask(lengths):
    return (torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]).unsqueeze(1)


def layer(candidates=4, tasks=3, strategy="group", dropout=0.0, seed=0, logit_init="spread"):
    torch.manual_seed(seed)
    return HeadSelectionAttention(
        H, DIM, dropout, tasks, candidates, strategy, logit_init=logit_init
    )


def run(attn, x, task_id, mask=None):
    set_task_id(attn, torch.tensor(task_id))
    return attn(x, x, x, mask)


def test_gumbel_posterior_is_eq4_by_hand():
    # φ(0) = 0, φ(1) = (0, ln 3); ε(1) = (0.2, 0), ε(0) = (0, 0.1); τ = 0.5
    logits = torch.tensor([0.0, math.log(3.0)])
    noise = torch.tensor([[0.0, 0.1], [0.2, 0.0]])
    expected = [
        math.exp(0.2 / 0.5) / (math.exp(0.0) + math.exp(0.2 / 0.5)),
        math.exp(math.log(3.0) / 0.5) / (math.exp(0.1 / 0.5) + math.exp(math.log(3.0) / 0.5)),
    ]
    got = gumbel_posterior(logits, 0.5, noise)
    assert got.tolist() == pytest.approx(expected, rel=1e-6)
    # no noise (inference): σ(φ/τ); ln 3 / 1 -> 3 / 4
    assert gumbel_posterior(logits, 1.0).tolist() == pytest.approx([0.5, 0.75])


def test_kl_to_prior_by_hand():
    # q = 1/2, p = H/H' = 1/4: 1/2 ln 2 + 1/2 ln(2/3)
    expected = 0.5 * math.log(2.0) + 0.5 * math.log(0.5 / 0.75)
    assert float(bernoulli_kl(torch.tensor(0.5), 0.25)) == pytest.approx(expected)
    assert float(bernoulli_kl(torch.tensor(0.25), 0.25)) == pytest.approx(0.0, abs=1e-7)
    attn = layer(candidates=4, logit_init="zero")  # logits 0 -> q = 1/2 for all 4 heads, prior 2/4
    logits = attn.selection_logits
    assert attn.task_kl(logits, logits).detach().tolist() == pytest.approx([0.0] * 3, abs=1e-6)
    with torch.no_grad():
        attn.selection_logits[1] = math.log(3.0)  # q = 3/4 against p = 1/2
        attn.selection_logits[2, :2] = math.log(3.0)
    per_head = 0.75 * math.log(1.5) + 0.25 * math.log(0.5)
    # per task, the mean over the 4 heads (the authors divide by heads, not sum)
    kl = attn.task_kl(logits, logits).detach().tolist()
    assert kl == pytest.approx([0.0, per_head, per_head / 2], rel=1e-5)


def test_subset_and_group_masks_by_hand():
    q = torch.tensor([[0.9, 0.8, 0.1, 0.2], [0.1, 0.9, 0.5, 0.7]])
    assert subset_mask(q, 2).tolist() == [[1, 1, 0, 0], [0, 1, 0, 1]]
    assert group_mask(q, 2).tolist() == [[1, 0, 0, 1], [0, 1, 0, 1]]
    torch.manual_seed(0)
    q = torch.rand(5, 12)
    for n in (1, 2, 3, 4, 6):
        assert subset_mask(q, n).sum(-1).tolist() == [n] * 5
        grouped = group_mask(q, n).view(5, n, -1)
        assert grouped.sum(-1).eq(1).all()  # one head in every group


def espnet_from_heads(attn, heads):
    """ESPnet's H-head attention holding exactly the given candidate heads, in that order."""
    ref = MultiHeadedAttention(H, DIM, 0.0)
    rows = attn.head_rows(torch.tensor(heads))
    with torch.no_grad():
        for name in ("linear_q", "linear_k", "linear_v"):
            getattr(ref, name).weight.copy_(getattr(attn, name).weight[rows])
            getattr(ref, name).bias.copy_(getattr(attn, name).bias[rows])
        ref.linear_out.load_state_dict(attn.linear_out.state_dict())
    return ref.eval()


@pytest.mark.parametrize("training", [False, True])
def test_all_heads_equal_espnet_attention(training):
    attn = layer(candidates=H, tasks=2)
    ref = MultiHeadedAttention(H, DIM, 0.0)
    missing = ref.load_state_dict(attn.state_dict(), strict=False)
    assert missing.unexpected_keys == ["selection_logits"] and not missing.missing_keys
    attn.train(training)
    ref.eval()
    torch.manual_seed(1)
    x = torch.randn(3, 5, DIM)
    mask = padding_mask([5, 3, 1])
    torch.testing.assert_close(run(attn, x, [0, 1, 1], mask), ref(x, x, x, mask))
    causal = subsequent_mask(5).unsqueeze(0)
    torch.testing.assert_close(run(attn, x, [1, 0, 1], causal), ref(x, x, x, causal))
    if training:  # nothing to select: no KL (the prior p(z=1) = H/H' = 1 would make it infinite)
        assert attn.selection_kl.eq(0.0).all() and attn.selection_kl.shape == (3,)


@pytest.mark.parametrize(
    "strategy, logits, heads",
    [
        (
            "group",
            [0.0, 2.0, 1.0, -1.0],
            [1, 2],
        ),  # group {0,1} -> 1 in slot 0, {2,3} -> 2 in slot 1
        ("group", [3.0, 0.0, -1.0, 1.0], [0, 3]),
        ("subset", [2.0, -1.0, 0.0, 3.0], [0, 3]),  # top-2 are heads 3 and 0, concatenated as 0, 3
    ],
)
def test_selected_heads_fill_slots_in_head_order(strategy, logits, heads):
    attn = layer(candidates=4, strategy=strategy).eval()
    with torch.no_grad():
        attn.selection_logits[2] = torch.tensor(logits)
    x = torch.randn(2, 4, DIM)
    mask = padding_mask([4, 2])
    torch.testing.assert_close(
        run(attn, x, [2, 2], mask), espnet_from_heads(attn, heads)(x, x, x, mask)
    )


@pytest.mark.parametrize("training", [False, True])
def test_mixed_batch_equals_each_utterance_alone(training):
    attn = layer(candidates=6, tasks=3, strategy="subset").train(training)
    with torch.no_grad():
        attn.selection_logits.normal_()
        if training:  # logits 20 apart: a Gumbel draw flips two heads with probability ~e^-20
            for row in attn.selection_logits:
                row.copy_(20.0 * (torch.randperm(6) - 2.5))
            attn.temperature = 10.0  # keeps σ((φ + ε(1) - ε(0))/τ) of distinct heads distinct
    x = torch.randn(4, 5, DIM)
    lengths, tasks = [5, 2, 4, 3], [2, 0, 2, 1]
    mixed = run(attn, x, tasks, padding_mask(lengths))
    for i, (length, task) in enumerate(zip(lengths, tasks)):
        alone = run(attn, x[i : i + 1, :length], [task])
        torch.testing.assert_close(mixed[i, :length], alone[0])


def test_inference_is_deterministic_and_follows_the_logits():
    attn = layer(candidates=4, strategy="subset").eval()
    with torch.no_grad():
        attn.selection_logits[0] = torch.tensor([0.5, -2.0, 3.0, 0.0])
    heads, scale = attn.selection(0)
    assert heads.tolist() == [0, 2] and scale.tolist() == [1.0, 1.0]
    x = torch.randn(2, 3, DIM)
    assert torch.equal(run(attn, x, [0, 0]), run(attn, x, [0, 0]))
    assert attn.selection_kl is None


def test_inference_noise_draws_as_the_authors_selector():
    """The authors' AttnHeadSelector samples Gumbel noise in eval mode too: selections vary per call."""
    attn = HeadSelectionAttention(H, DIM, 0.0, 3, 4, "subset", inference_noise=True).eval()
    with torch.no_grad():
        attn.selection_logits.zero_()
    torch.manual_seed(2)
    picks = {tuple(attn.selection(0)[0].tolist()) for _ in range(50)}
    assert len(picks) > 1
    heads, scale = attn.selection(0)
    assert scale.tolist() == [1.0, 1.0]  # no straight-through outside training
    x = torch.randn(2, 3, DIM)
    run(attn, x, [0, 0])
    assert attn.selection_kl is None


def test_training_samples_and_straight_through_gradient_reaches_the_logits():
    attn = layer(candidates=4, tasks=3).train()
    x = torch.randn(2, 3, DIM)
    out = run(attn, x, [1, 1])
    (out.sum() + attn.selection_kl.sum()).backward()
    grad = attn.selection_logits.grad
    assert grad[1].abs().sum() > 0
    assert grad[0].eq(0).all() and grad[2].eq(0).all()  # tasks not in the batch
    # Gumbel noise makes selections vary between training forwards
    torch.manual_seed(3)
    picks = {tuple(attn.selection(1)[0].tolist()) for _ in range(50)}
    assert len(picks) > 1


def test_only_selected_heads_are_projected_and_attend(monkeypatch):
    """Self-attention: q, k and v of the selected heads in one product, of 3 H heads' width (not the H'
    candidates'); rows of several tasks: each row's weights gathered (one batched product); one task: its
    heads' rows alone (one matmul). Attention over the H selected heads."""
    attn = layer(candidates=8, tasks=2).train()
    widths, heads_attending = [], []
    real_linear, real_attention = torch.nn.functional.linear, attn.attention
    real_baddbmm = torch.baddbmm

    def recording_linear(x, weight, bias=None):
        widths.append(weight.shape[0])
        return real_linear(x, weight, bias)

    def recording_baddbmm(bias, x, weight):  # per-utterance weights (b, d, 3 H d_k)
        widths.append(("per row", weight.shape[-1]))
        return real_baddbmm(bias, x, weight)

    def recording_attention(q, k, v, mask, scale=None):
        heads_attending.append(q.size(1))
        return real_attention(q, k, v, mask, scale)

    monkeypatch.setattr(head_selection.F, "linear", recording_linear)
    monkeypatch.setattr(head_selection.torch, "baddbmm", recording_baddbmm)
    monkeypatch.setattr(attn, "attention", recording_attention)
    x = torch.randn(2, 3, DIM)
    set_task_id(attn, torch.tensor([0, 1]))  # rows of two tasks: gathered per row
    mixed = attn(x, x, x, None)
    assert widths == [("per row", 3 * H * attn.d_k), DIM] and heads_attending == [H]
    widths.clear()
    memory = torch.randn(2, 5, DIM)  # query apart from key and value: three products
    attn(x, memory, memory, None)
    assert widths == [("per row", H * attn.d_k)] * 3 + [DIM]
    # the same as each row's heads' weights applied alone (the general formula)
    torch.manual_seed(11)
    set_task_id(attn, torch.tensor([0, 1]))
    again = attn(x, x, x, None)
    torch.manual_seed(11)
    set_task_id(attn, torch.tensor([0, 1]))
    heads, scale = (t.index_select(0, torch.tensor([0, 1])) for t in attn.selections())
    rows = attn.head_rows(heads)
    expected = []
    for r in range(2):
        w = [lin.weight[rows[r]] for lin in attn.qkv]
        b = [lin.bias[rows[r]] for lin in attn.qkv]
        q, k, v = (
            real_linear(x[r : r + 1], wi, bi).unflatten(-1, (H, attn.d_k)).transpose(1, 2)
            for wi, bi in zip(w, b)
        )
        expected.append(real_attention(q, k, v, None, scale[r : r + 1]))
    torch.testing.assert_close(again, torch.cat(expected), rtol=1e-5, atol=1e-6)
    assert mixed.shape == again.shape
    widths.clear()
    set_task_id(attn, torch.tensor([1]))  # one task for every row
    torch.manual_seed(5)
    out = attn(x, x, x, None)
    assert widths == [3 * H * attn.d_k, DIM]
    out.sum().backward()
    torch.manual_seed(5)
    heads, _ = attn.selection(1)  # the same draw as in the forward
    unselected = torch.ones(8, dtype=torch.bool)
    unselected[heads] = False
    for lin in attn.qkv:
        per_head = lin.weight.grad.view(8, attn.d_k, DIM)
        assert per_head[unselected].eq(0).all()
        assert per_head[~unselected].abs().sum() > 0


def test_parameter_count_and_bad_input():
    attn = layer(candidates=6, tasks=5, strategy="subset")
    assert attn.selection_logits.numel() == 5 * 6
    with pytest.raises(ConfigError, match="head_candidates"):
        layer(candidates=5, strategy="group")
    with pytest.raises(ConfigError, match="selection_strategy"):
        layer(strategy="random")
    with pytest.raises(InputError, match="task_id.*task id 5 unknown"):
        set_task_id(attn.eval(), torch.tensor([0, 5]))
    with pytest.raises(InputError, match="task_id"):
        HeadSelectionAttention(H, DIM, 0.0, 2, 4)(torch.randn(1, 2, DIM), *[None] * 3)


def test_spread_logit_init_gives_each_task_a_stable_preference():
    zero = layer(candidates=8, tasks=3, strategy="subset", logit_init="zero")
    assert zero.selection_logits.eq(0).all()
    spread = layer(candidates=8, tasks=3, strategy="subset")  # the default
    logits = spread.selection_logits.detach()
    assert logits.min() >= math.log(0.01) and logits.max() <= 0.0 and logits.std() > 0.5
    preferred = [tuple(spread.eval().selection(t)[0].tolist()) for t in range(3)]
    assert len(set(preferred)) > 1  # tasks start from their own heads

    def share_of_preferred(attn, task, draws=400):
        attn.train()
        best = tuple(attn.eval().selection(task)[0].tolist())
        attn.train()
        return sum(tuple(attn.selection(task)[0].tolist()) == best for _ in range(draws)) / draws

    torch.manual_seed(1)
    # φ = 0: each of the C(4 of 8) = 70 subsets about equally likely in a training draw (1.4 %);
    # spread: the preferred subset is drawn several times as often (16-39 % over five seeds)
    zero_share = sum(share_of_preferred(zero, t) for t in range(3)) / 3
    spread_share = sum(share_of_preferred(spread, t) for t in range(3)) / 3
    assert zero_share < 0.05 and spread_share > 0.1 and spread_share > 4 * zero_share
    with pytest.raises(ConfigError, match="selection_logit_init"):
        HeadSelectionAttention(H, DIM, 0.0, 3, 8, "subset", 1.0, logit_init="normal")


def loop_over_tasks(attn, x, task_id, mask):
    """The layer as it was computed before it became sync-free: each task present in the batch in
    ascending order, its heads found by ``nonzero``, its rows split off and reassembled."""
    task_id = torch.tensor(task_id)
    outputs, order = [], []
    for t in torch.unique(task_id).tolist():
        logits = attn.selection_logits[t]
        noise = head_selection.sample_gumbel((2, *logits.shape), logits) if attn.training else None
        posterior = gumbel_posterior(logits, attn.temperature, noise)
        hard = head_selection.SELECTION_MASKS[attn.strategy](posterior, attn.h)
        heads = hard.nonzero().squeeze(1)
        scale = (hard + posterior - posterior.detach()) if attn.training else hard
        rows = (task_id == t).nonzero().squeeze(1)
        order.append(rows)
        proj = [
            torch.nn.functional.linear(
                x[rows], lin.weight[attn.head_rows(heads)], lin.bias[attn.head_rows(heads)]
            )
            .unflatten(-1, (attn.h, attn.d_k))
            .transpose(1, 2)
            for lin in attn.qkv
        ]
        scores = proj[0] @ proj[1].transpose(-2, -1) / math.sqrt(attn.d_k)
        blocked = mask[rows].unsqueeze(1).eq(0)
        weights = scores.masked_fill(blocked, torch.finfo(scores.dtype).min).softmax(-1)
        context = weights.masked_fill(blocked, 0.0) @ proj[2] * scale[heads].view(1, -1, 1, 1)
        outputs.append(attn.linear_out(context.transpose(1, 2).flatten(2)))
    return torch.cat(outputs).index_select(0, torch.argsort(torch.cat(order)))


@pytest.mark.parametrize("strategy", ["group", "subset"])
@pytest.mark.parametrize("training", [False, True])
def test_gathered_selection_equals_the_loop_over_tasks(strategy, training):
    """Every task in the batch (the loop drew the tasks' noise in the same order): same outputs, same
    gradients to the input, the projections and the selection logits."""
    attn = layer(candidates=8, tasks=3, strategy=strategy).train(training)
    x = torch.randn(5, 6, DIM)
    mask = padding_mask([6, 4, 5, 2, 6])
    task_id = torch.tensor([2, 0, 1, 2, 0])
    results = []
    for forward in (loop_over_tasks, run):
        attn.zero_grad()
        inputs = x.clone().requires_grad_()
        torch.manual_seed(7)
        out = forward(attn, inputs, task_id.tolist(), mask)
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        grads = [inputs.grad] + [p.grad.clone() for p in attn.parameters() if p.grad is not None]
        results.append((out.detach(), grads))
    (expected, expected_grads), (got, got_grads) = results
    torch.testing.assert_close(got, expected)
    assert len(got_grads) == len(expected_grads) == 1 + 6 + 2 + (1 if training else 0)
    for g, e in zip(got_grads, expected_grads):
        torch.testing.assert_close(g, e)


def test_selected_heads_are_the_ones_of_each_row_in_ascending_order():
    hard = torch.tensor([[0.0, 1, 1, 0, 0, 1], [1, 0, 0, 1, 1, 0]])
    assert head_selection.selected_heads(hard, 3).tolist() == [[1, 2, 5], [0, 3, 4]]
    torch.manual_seed(0)
    for strategy, select in head_selection.SELECTION_MASKS.items():
        hard = select(torch.rand(50, 12), 4)
        expected = [row.nonzero().squeeze(1).tolist() for row in hard]
        assert head_selection.selected_heads(hard, 4).tolist() == expected, strategy


def test_authors_kl_form_is_their_term_of_the_sample_that_selected(monkeypatch):
    """HeadSelectionLoss by hand: y (log(y + 1e-7) - log p), y = σ((φ + ε(1) - ε(0))/τ), averaged
    over the heads; the same y picks the heads (one draw per task)."""
    attn = HeadSelectionAttention(H, DIM, 0.0, 3, 4, "subset", 2.0, kl_form="authors").train()
    with torch.no_grad():
        attn.selection_logits.copy_(torch.tensor([[0.0, 1.0, -1.0, 2.0]] * 3))
        attn.selection_logits[2] = torch.tensor([3.0, 0.0, 0.0, -2.0])
    eps = torch.tensor([[[0.5, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 2.0], [1.0, 1.0, 0.0, 0.0]],
                        [[0.0, 1.0, 0.0, 0.0], [0.2, 0.0, 0.0, 0.0], [0.0, 0.0, 2.0, 0.0]]])  # fmt: skip
    monkeypatch.setattr(head_selection, "sample_gumbel", lambda shape, like: eps.transpose(0, 1))
    run(attn, torch.randn(2, 3, DIM), [2, 0])  # every task drawn, rows gathered
    for row, task in enumerate([2, 0]):
        phi = attn.selection_logits[task].detach()
        y = torch.sigmoid((phi + eps[1, task] - eps[0, task]) / 2.0)
        want = (y * (torch.log(y + 1e-7) - math.log(0.5))).mean()
        assert float(attn.selection_kl[row]) == pytest.approx(float(want), rel=1e-6)
    with pytest.raises(ConfigError, match="selection_kl_form"):
        HeadSelectionAttention(H, DIM, 0.0, 3, 4, kl_form="forward")


@pytest.mark.parametrize("task_id", [[1], [1, 0, 2]])
def test_inference_gathers_each_tasks_heads_once_and_again_when_a_parameter_changes(
    task_id, monkeypatch
):
    attn = layer(candidates=4).eval()
    x = torch.randn(3, 5, DIM)
    mask = padding_mask([5, 4, 2])
    set_task_id(attn, torch.tensor(task_id))
    with torch.enable_grad():  # with gradients: the general path, the reference
        expected = attn(x, x, x, mask).detach()
    gathers = []
    selections = attn.selections
    monkeypatch.setattr(attn, "selections", lambda *a: gathers.append(1) or selections(*a))
    with torch.no_grad():
        torch.testing.assert_close(attn(x, x, x, mask), expected, rtol=1e-6, atol=1e-6)
        attn(x, x, x, mask)  # the next beam step
        set_task_id(attn, torch.tensor(task_id))  # the next utterance
        torch.testing.assert_close(attn(x, x, x, mask), expected, rtol=1e-6, atol=1e-6)
        assert len(gathers) == 1
        attn.linear_v.weight.add_(1.0)  # a parameter changed in place (an optimizer step)
        changed = attn(x, x, x, mask)
        assert len(gathers) == 2 and not torch.allclose(changed, expected)
        attn.selection_logits[1] = torch.tensor([5.0, -5.0, -5.0, 5.0])  # a new selection
        reselected = attn(x, x, x, mask)
        assert len(gathers) == 3
    with torch.enable_grad():
        torch.testing.assert_close(attn(x, x, x, mask).detach(), reselected, rtol=1e-6, atol=1e-6)
        memory = torch.randn(3, 7, DIM)  # query apart from key and value (source attention)
        cross = attn(x, memory, memory, padding_mask([7, 6, 3])).detach()
    with torch.no_grad():  # q, k and v projected one by one, from the same gathered rows
        torch.testing.assert_close(
            attn(x, memory, memory, padding_mask([7, 6, 3])), cross, rtol=1e-6, atol=1e-6
        )
    with torch.enable_grad():
        attn(x, x, x, mask).sum().backward()  # the general path: the weights get gradients
    assert attn.linear_q.weight.grad is not None


def test_task_ids_are_checked_once_per_kind_of_module(monkeypatch):
    """Every layer of a stack shares one checked tensor (a check is kernels on a GPU); modules of another
    number of tasks get their own check, and an unknown id is still refused for the module it is unknown to."""
    calls = []
    check = head_selection.check_task_ids

    def counting(task_id, num_tasks, what="model"):
        calls.append((num_tasks, what))
        return check(task_id, num_tasks, what)

    monkeypatch.setattr(head_selection, "check_task_ids", counting)
    stack = torch.nn.ModuleList([layer(tasks=3) for _ in range(4)] + [layer(tasks=5)])
    assert set_task_id(stack, torch.tensor([2, 0])) == 5
    assert calls == [(3, "head-selection layer"), (5, "head-selection layer")]
    assert all(m.task_id is stack[0].task_id for m in stack[:4]) and stack[4].task_id.tolist() == [
        2,
        0,
    ]
    with pytest.raises(InputError, match="task id 4 unknown.*0..2"):
        set_task_id(stack, torch.tensor([4]))
    set_task_id(stack, None)
    assert all(m.task_id is None for m in stack)


def test_qkv_rows_are_the_heads_rows_of_q_k_and_v_side_by_side():
    attn = layer(candidates=8, tasks=3)
    width = 8 * attn.d_k  # rows of one of q, k, v
    torch.manual_seed(0)
    heads = torch.rand(2, 3, 8).topk(H, -1).indices.sort(-1).values  # (layers, tasks, H)
    rows = attn.head_rows(heads)
    expected = torch.cat([rows, rows + width, rows + 2 * width], -1)
    assert torch.equal(attn.qkv_rows(heads), expected)
    assert torch.equal(attn.qkv_rows(heads[0, 1]), expected[0, 1])  # any leading shape
    assert not list(attn.buffers())  # a constant: nothing for checkpoints or DDP to carry
