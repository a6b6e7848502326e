"""Cutoff augmentation (Shen et al., 2020): masks, the Jensen-Shannon consistency loss, the MT model."""

import math

import pytest
import torch

from espnet_ext.errors import ConfigError
from espnet_ext.nets.cutoff import check_rate, feature_cutoff, js_divergence, token_cutoff


def test_token_cutoff_erases_floor_rate_times_length_valid_positions():
    torch.manual_seed(0)
    feats = torch.randn(3, 10, 4) + 5.0  # no accidental zeros
    lengths = torch.tensor([10, 7, 3])
    out = token_cutoff(feats, lengths, 0.3)
    erased = (out == 0).all(-1)
    assert erased.sum(1).tolist() == [3, 2, 0]  # floor(0.3 * L)
    for i, length in enumerate(lengths.tolist()):
        assert not erased[i, length:].any()  # padding is never chosen
        kept = ~erased[i]
        assert torch.equal(out[i][kept], feats[i][kept])


def test_token_cutoff_positions_differ_between_draws():
    feats = torch.ones(1, 50, 2)
    a = (token_cutoff(feats, torch.tensor([50]), 0.2) == 0).all(-1)
    b = (token_cutoff(feats, torch.tensor([50]), 0.2) == 0).all(-1)
    assert a.sum() == b.sum() == 10 and not torch.equal(a, b)


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


def test_js_divergence_matches_the_definition_and_ignores_padding():
    torch.manual_seed(1)
    a, b = torch.randn(2, 3, 5), torch.randn(2, 3, 5)
    mask = torch.tensor([[True, True, False], [True, False, False]])
    pa, pb = a.softmax(-1), b.softmax(-1)
    m = (pa + pb) / 2
    per_token = 0.5 * ((pa * (pa / m).log()).sum(-1) + (pb * (pb / m).log()).sum(-1))
    expected = per_token[mask].mean()
    torch.testing.assert_close(js_divergence([a, b], mask), expected)
    assert js_divergence([a, a.clone()], mask).abs() < 1e-6
    # Bounded by log(N) for N distributions.
    assert js_divergence([a * 50, b * 50], mask) <= math.log(2) + 1e-5


MT_YAML = """\
model: cutoff
model_conf: {token_cutoff_rate: 0.2, feature_cutoff_rate: 0.1, num_augmented: 2, js_weight: 1.0, lsm_weight: 0.1}
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
    ce = (stats["loss_ce"] + 2 * stats["loss_ce_augmented"]) / 3
    torch.testing.assert_close(loss, ce + stats["loss_js"], rtol=1e-5, atol=1e-5)
    assert stats["loss_js"] > 0  # differently masked copies disagree
    loss.backward()
    # In eval mode it is ESPnet's MT model: no augmentation, plain cross entropy.
    model.eval()
    with torch.no_grad():
        eval_loss, eval_stats, _ = model(**batch)
    assert "loss_js" not in eval_stats


def test_rate_of_one_is_refused_when_the_model_is_built(mt_args, tmp_path):
    from espnet_ext.registry import build_model

    (tmp_path / "mt.yaml").write_text(
        MT_YAML.replace("token_cutoff_rate: 0.2", "token_cutoff_rate: 1.0")
    )
    with pytest.raises(ConfigError, match="token_cutoff_rate must be in"):
        build_model("mt", mt_args)
