"""Our MT task (espnet_ext.tasks.mt): a LegoNN model built without ESPnet's unused CTC head has the weights
ESPnet's own ``build_model`` gives it under the same seed; other models are ESPnet's build; what a LegoNN
model has no use for is refused."""

from __future__ import annotations

import copy
from argparse import Namespace

import espnet2.tasks.mt
import pytest
import torch

from espnet_ext.errors import ConfigError
from espnet_ext.tasks.mt import MTTask
from tests.nets.lego.tiny_lego import PHONE_VOCAB, TEXT_VOCAB, experiment_config, module_conf


def lego_config():
    modules = [
        module_conf(PHONE_VOCAB, olc_ratio=1.2),
        module_conf(TEXT_VOCAB, input_layer="wemb", olc_ratio=1.0),
    ]
    return experiment_config(modules, interface_text_keys=["phn", "text"])


def built(task, config, seed=0):
    torch.manual_seed(seed)
    args = Namespace(**copy.deepcopy(config))
    return task.build_model(args), args


@pytest.fixture
def ctc_heads(monkeypatch):
    """The CTC heads ESPnet's MT ``build_model`` constructs (its module's ``CTC``, counted)."""
    made = []
    espnet_ctc = espnet2.tasks.mt.CTC

    def counted(*args, **kwargs):
        made.append(kwargs)
        return espnet_ctc(*args, **kwargs)

    monkeypatch.setattr(espnet2.tasks.mt, "CTC", counted)
    return made


def assert_same_weights(ours, espnet):
    ours, espnet = ours.state_dict(), espnet.state_dict()
    assert list(ours) == list(espnet)
    for name, value in ours.items():
        assert torch.equal(value, espnet[name]), name


def test_legonn_model_has_espnet_s_weights_without_the_ctc_head(ctc_heads):
    config = lego_config()
    espnet_model, _ = built(espnet2.tasks.mt.MTTask, config)
    # ESPnet's head: vocabulary x the last interface vocabulary (here 13 x 13; 41k x 41k at WMT's size)
    assert ctc_heads == [dict(odim=len(TEXT_VOCAB), encoder_output_size=len(TEXT_VOCAB))]
    ours, args = built(MTTask, config)
    assert len(ctc_heads) == 1
    assert type(ours) is type(espnet_model)
    assert_same_weights(ours, espnet_model)
    assert args.token_list == TEXT_VOCAB and args.src_token_list == TEXT_VOCAB


def test_token_lists_given_as_files_are_stored_as_lists(tmp_path):
    config = lego_config()
    for key in ("token_list", "src_token_list"):
        path = tmp_path / f"{key}.txt"
        path.write_text("\n".join(config[key]) + "\n", encoding="utf-8")
        config[key] = str(path)
    _, args = built(MTTask, config)
    assert args.token_list == TEXT_VOCAB and args.src_token_list == TEXT_VOCAB


def test_other_models_are_espnet_s_build(ctc_heads):
    config = espnet2.tasks.mt.MTTask.get_default_config()
    config.update(
        token_list=list(TEXT_VOCAB),
        src_token_list=list(TEXT_VOCAB),
        frontend="embed",
        frontend_conf=dict(embed_dim=16),
        encoder="transformer",
        encoder_conf=dict(output_size=16, attention_heads=2, linear_units=32, num_blocks=1),
        decoder="transformer",
        decoder_conf=dict(attention_heads=2, linear_units=32, num_blocks=1),
        model_conf=dict(report_bleu=False),
    )
    ours, _ = built(MTTask, config)
    espnet_model, _ = built(espnet2.tasks.mt.MTTask, config)
    assert len(ctc_heads) == 2
    assert type(ours) is type(espnet_model)
    assert_same_weights(ours, espnet_model)


@pytest.mark.parametrize("key", ["specaug", "preencoder", "postencoder"])
def test_what_a_legonn_model_does_not_use_is_refused(key):
    config = lego_config() | {key: "anything", "config": "conf/train_lego.yaml"}
    with pytest.raises(ConfigError, match=f"conf/train_lego.yaml: key '{key}'"):
        built(MTTask, config)
