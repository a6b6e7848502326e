"""Attention plots of a model that keeps no attention weights are refused before training
(espnet_ext.tasks.attention_plots)."""

import argparse
import importlib

import pytest
import torch
from espnet.nets.pytorch_backend.transformer.attention import MultiHeadedAttention
from espnet2.main_funcs.calculate_all_attentions import calculate_all_attentions

from espnet_ext.analysis.preflight import TASKS
from espnet_ext.attention.multi_attention import MultiHeadMultiAttention
from espnet_ext.attention.relaxed import RelaxedMultiHeadedAttention
from espnet_ext.errors import ConfigError
from espnet_ext.nets.relaxed_transformer import RelaxedTransformerDecoder
from espnet_ext.tasks.asr import ASRTask
from espnet_ext.tasks.attention_plots import AttentionPlotCheck, check_attention_plots


def plots(num_att_plot=3, use_matplotlib=True):
    return argparse.Namespace(
        num_att_plot=num_att_plot, use_matplotlib=use_matplotlib, config="conf/train.yaml"
    )


class SelfAttention(torch.nn.Module):
    """The smallest model ESPnet's attention plots run: one attention over its input."""

    def __init__(self, attention):
        super().__init__()
        self.attention = attention

    def forward(self, feats, feats_lengths):
        return self.attention(feats, feats, feats, None)


def test_espnets_plots_fail_on_an_attention_that_keeps_no_weights():
    # the failure the check prevents: ESPnet's hook reads ``attn``, which its own use_sdpa leaves None
    batch = {"feats": torch.randn(2, 5, 8), "feats_lengths": torch.tensor([5, 3])}
    kept = calculate_all_attentions(SelfAttention(MultiHeadedAttention(2, 8, 0.0)).eval(), batch)
    assert kept["attention"][0].shape == (2, 5, 5)  # heads x queries x keys of the first utterance
    fused = SelfAttention(MultiHeadedAttention(2, 8, 0.0, use_sdpa=True)).eval()
    with pytest.raises(AttributeError):
        calculate_all_attentions(fused, batch)


def decoder(**options):
    return RelaxedTransformerDecoder(
        20, 8, attention_heads=2, linear_units=16, num_blocks=2, **options
    )


def test_use_sdpa_is_refused_with_plots_naming_the_key_and_the_module():
    model = torch.nn.ModuleDict({"decoder": decoder(use_sdpa=True)})
    with pytest.raises(
        ConfigError, match=r"decoder\.decoders\.0\.self_attn: use_sdpa.*num_att_plot: 0"
    ) as e:
        check_attention_plots(model, plots())
    assert e.value.key == "num_att_plot" and e.value.path == "conf/train.yaml"
    check_attention_plots(model, plots(num_att_plot=0))
    check_attention_plots(model, plots(use_matplotlib=False))  # ESPnet plots nothing then
    check_attention_plots(torch.nn.ModuleDict({"decoder": decoder()}), plots())


@pytest.mark.parametrize(
    "heads,refused",
    [
        (["4 x Local(8)"], True),
        (["2 x Local(8)", "2 x Conv(5, 2)"], True),
        (["2 x Full", "2 x Local(8)"], False),
    ],
)
def test_multiformer_layers_without_full_heads_are_refused_with_plots(heads, refused):
    layer = MultiHeadMultiAttention.from_attention(MultiHeadedAttention(4, 16, 0.0), heads)
    if refused:
        with pytest.raises(ConfigError, match="without Full heads"):
            check_attention_plots(layer, plots())
    else:
        check_attention_plots(layer, plots())
        layer.eval()(torch.randn(1, 6, 16), torch.randn(1, 6, 16), torch.randn(1, 6, 16), None)
        assert layer.attn.shape == (1, 2, 6, 6)  # the Full heads' weights, for the plots


@pytest.mark.parametrize("fused,refused", [(True, True), (False, False)])
def test_relaxed_matched_inference_through_the_fused_path_is_refused_with_plots(fused, refused):
    attention = RelaxedMultiHeadedAttention.from_attention(
        MultiHeadedAttention(2, 8, 0.0), gamma=0.2, matched_inference=True, fused=fused
    )
    x = torch.randn(1, 4, 8)
    attention.eval()(x, x, x, None)
    assert (attention.attn is None) is refused  # what the plots would read
    if refused:
        with pytest.raises(ConfigError, match="matched inference"):
            check_attention_plots(attention, plots())
    else:
        check_attention_plots(attention, plots())


def test_every_training_task_checks_before_building_the_optimizers():
    for task, (target, _) in TASKS.items():
        module, name = target.split(":")
        cls = getattr(importlib.import_module(module), name)
        assert task == "lm" or issubclass(cls, AttentionPlotCheck), target
    asr_train = importlib.import_module("espnet_ext.bin.asr_train")
    assert asr_train.ASRTask is ASRTask
    # refused before ESPnet reads any optimizer option
    with pytest.raises(ConfigError, match="num_att_plot"):
        ASRTask.build_optimizers(plots(), torch.nn.ModuleDict({"decoder": decoder(use_sdpa=True)}))
