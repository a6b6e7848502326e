"""Cutoff augmentation (Shen et al., 2020): Bernoulli <unk> masking, the reference's KL consistency loss."""

import math

import pytest
import torch

from espnet_ext.errors import ConfigError
from espnet_ext.nets.cutoff import bernoulli_unk, check_rate, consistency_kl, feature_cutoff


def test_bernoulli_unk_masks_each_token_independently_even_in_short_sentences():
    torch.manual_seed(0)
    tokens = torch.full((4000, 5), 7)  # 5-token sentences: a floor(0.05 * len) rule would mask none
    maskable = torch.ones_like(tokens, dtype=torch.bool)
    maskable[:, -1] = False  # padding
    out = bernoulli_unk(tokens, maskable, 0.05, unk_id=1)
    assert set(out.unique().tolist()) == {1, 7}
    assert (out[:, -1] == 7).all()
    rate = (out[:, :-1] == 1).float().mean().item()
    assert abs(rate - 0.05) < 0.005  # 16000 Bernoulli(0.05) draws: std 0.0017
    per_sentence = (out == 1).sum(1)
    assert per_sentence.max() >= 2 and (per_sentence == 0).any()  # counts vary, not a fixed floor


def test_consistency_kl_is_the_reference_mean_of_both_copies_divergences():
    # The reference criterion (fairseq_extension label_smoothed_cross_entropy_with_regularization.py):
    # (KL(m||p) + KL(m||q)) / 2, m = softmax of the mean logits. Two copies, vocabulary 2, one token, by hand:
    # p = softmax(0, 0) = (1/2, 1/2); q = softmax(ln 3, 0) = (3/4, 1/4); m = (√3, 1) / (√3 + 1).
    p_logits = torch.tensor([[[0.0, 0.0]]])
    q_logits = torch.tensor([[[math.log(3.0), 0.0]]])
    m1 = math.sqrt(3) / (math.sqrt(3) + 1)
    m2 = 1 / (math.sqrt(3) + 1)
    kl_p = m1 * math.log(m1 / 0.5) + m2 * math.log(m2 / 0.5)  # 0.634 ln 1.268 + 0.366 ln 0.732
    kl_q = m1 * math.log(m1 / 0.75) + m2 * math.log(m2 / 0.25)  # 0.634 ln 0.845 + 0.366 ln 1.464
    assert (kl_p, kl_q) == (pytest.approx(0.036341, abs=1e-5), pytest.approx(0.032996, abs=1e-5))
    expected = (kl_p + kl_q) / 2
    got = consistency_kl([p_logits, q_logits], torch.tensor([[True]]))
    assert got.item() == pytest.approx(expected, rel=1e-5)
    # Not KL(m||p) of the clean copy alone (this module's earlier form): the two differ here by 4.6 %.
    assert abs(got.item() - kl_p) > 0.04 * kl_p
    # Summed (not averaged) over unmasked tokens; padding ignored.
    two = consistency_kl(
        [p_logits.repeat(1, 3, 1), q_logits.repeat(1, 3, 1)], torch.tensor([[True, True, False]])
    )
    assert two.item() == pytest.approx(2 * expected, rel=1e-5)


def reference_criterion(ce_p, ce_q, p_logits, q_logits, pad, ntokens, weight=5.0):
    """The reference's loss / sample_size written out with torch's kl_div, pads zeroed as there."""
    m = torch.softmax((p_logits + q_logits) / 2, dim=-1)
    kl_p = torch.nn.functional.kl_div(p_logits.log_softmax(-1), m, reduction="none")
    kl_q = torch.nn.functional.kl_div(q_logits.log_softmax(-1), m, reduction="none")
    kl_p = kl_p.masked_fill(pad.unsqueeze(-1), 0.0).sum()
    kl_q = kl_q.masked_fill(pad.unsqueeze(-1), 0.0).sum()
    return (ce_p + ce_q + weight * (kl_p + kl_q) / 2) / (2 * ntokens)


def test_loss_and_gradients_of_both_copies_match_the_reference_criterion():
    torch.manual_seed(0)
    p_logits = torch.randn(2, 4, 7, requires_grad=True)
    q_logits = torch.randn(2, 4, 7, requires_grad=True)
    valid = torch.tensor([[True, True, True, True], [True, True, False, False]])
    ce_p, ce_q = torch.tensor(3.0), torch.tensor(4.0)
    ntokens = valid.sum()
    ours = (ce_p + ce_q + 5.0 * consistency_kl([p_logits, q_logits], valid)) / (2 * ntokens)
    ours_grads = torch.autograd.grad(ours, (p_logits, q_logits))
    reference = reference_criterion(ce_p, ce_q, p_logits, q_logits, ~valid, ntokens)
    ref_grads = torch.autograd.grad(reference, (p_logits, q_logits))
    torch.testing.assert_close(ours, reference)
    for got, want in zip(ours_grads, ref_grads):
        torch.testing.assert_close(got, want)
        assert (got[1, 2:] == 0).all()  # padded positions get no gradient
        assert got.abs().sum() > 0


def test_feature_cutoff_erases_the_same_dimensions_at_every_position():
    feats = torch.randn(2, 6, 20) + 5.0
    out = feature_cutoff(feats, 0.25)
    for i in range(2):
        erased_dims = (out[i] == 0).all(0)
        assert erased_dims.sum() == 5
        assert ((out[i] == 0) == erased_dims[None, :]).all()


def test_rates_of_one_or_more_are_refused():
    assert check_rate("token_cutoff_rate", 0.0) == 0.0
    for bad in (1.0, 1.5, -0.1):
        with pytest.raises(ConfigError, match="token_cutoff_rate"):
            check_rate("token_cutoff_rate", bad)


MT_YAML = """\
model: cutoff
model_conf: {token_cutoff_rate: 0.2, feature_cutoff_rate: 0.1, num_augmented: 2, consistency_weight: 5.0,
             lsm_weight: 0.1}
frontend: embed
frontend_conf: {embed_dim: 16, positional_dropout_rate: 0.0}
encoder: transformer
encoder_conf: {output_size: 16, attention_heads: 2, linear_units: 32, num_blocks: 1, input_layer: null,
               dropout_rate: 0.0, use_flash_attn: false}
decoder: transformer
decoder_conf: {attention_heads: 2, linear_units: 32, num_blocks: 1, dropout_rate: 0.0, use_flash_attn: false}
"""


@pytest.fixture()
def mt_args(tmp_path):
    tokens = ["<blank>", "<unk>", "a", "b", "c", "<sos/eos>"]
    (tmp_path / "tokens.txt").write_text("\n".join(tokens) + "\n")
    (tmp_path / "mt.yaml").write_text(MT_YAML)
    return [
        "--config",
        str(tmp_path / "mt.yaml"),
        "--token_list",
        str(tmp_path / "tokens.txt"),
        "--src_token_list",
        str(tmp_path / "tokens.txt"),
        "--token_type",
        "word",
        "--src_token_type",
        "word",
    ]


def test_cutoff_model_builds_through_the_mt_task_and_trains(mt_args):
    from espnet_ext.nets.cutoff import CutoffMTModel
    from espnet_ext.registry import build_model

    model = build_model("mt", mt_args)
    assert isinstance(model, CutoffMTModel)
    batch = dict(
        text=torch.tensor([[2, 3, 4], [4, 2, -1]]),
        text_lengths=torch.tensor([3, 2]),
        src_text=torch.tensor([[3, 3, 2, 4], [2, 4, -1, -1]]),
        src_text_lengths=torch.tensor([4, 2]),
    )
    model.train()
    loss, stats, weight = model(**batch)
    assert torch.isfinite(loss) and int(weight) == 2
    # Reference normalisation: (sum_i CE_i + 5 * mean_i sum_t KL(m||p_i)) / (copies * ntokens), ntokens = 5
    # target tokens (3 + 2) plus 2 <eos>; the stats are per token.
    expected = (stats["loss_ce"] + 2 * stats["loss_ce_augmented"] + 5.0 * stats["loss_kl"]) / 3
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-5)
    assert stats["loss_kl"] > 0  # differently masked copies disagree
    ys_in = torch.tensor([[5, 2, 3, 4], [5, 4, 2, -1]])
    torch.manual_seed(0)
    masked = torch.stack([model.augment_target(ys_in, torch.tensor([3, 2])) for _ in range(200)])
    assert (masked[:, :, 0] == 5).all() and (masked[:, 1, 3] == -1).all()  # <sos>, padding kept
    assert (masked[:, :, 1:] == 1).any()  # target tokens do become <unk>
    loss.backward()
    # In eval mode it is ESPnet's MT model: no augmentation, plain cross entropy.
    model.eval()
    with torch.no_grad():
        eval_loss, eval_stats, _ = model(**batch)
    assert "loss_kl" not in eval_stats


def test_rate_of_one_is_refused_when_the_model_is_built(mt_args, tmp_path):
    from espnet_ext.registry import build_model

    (tmp_path / "mt.yaml").write_text(
        MT_YAML.replace("token_cutoff_rate: 0.2", "token_cutoff_rate: 1.0")
    )
    with pytest.raises(ConfigError, match="token_cutoff_rate must be in"):
        build_model("mt", mt_args)
