"""--matched_inference: our inference classes switch the model they built; a model with nothing relaxed refuses
``true``."""

import pytest
import torch

from espnet_ext.attention import matched_inference
from espnet_ext.errors import ConfigError
from espnet_ext.nets.relaxed_transformer import RelaxedTransformerDecoder


def decoder(gamma):
    sites = {"src_attn": {"gamma": gamma}} if gamma else None
    return RelaxedTransformerDecoder(
        5,
        8,
        attention_heads=2,
        linear_units=8,
        num_blocks=2,
        use_flash_attn=False,
        attention_sites=sites,
    )


def test_matched_inference_switches_the_built_model():
    model = decoder(0.25)
    matched_inference.apply_matched_inference(model, True)
    assert all(layer.src_attn.matched_inference for layer in model.decoders)
    model.eval()
    assert model.decoders[0].src_attn.relaxing
    matched_inference.apply_matched_inference(model, None)  # absent: as it was
    assert model.decoders[0].src_attn.matched_inference
    matched_inference.apply_matched_inference(model, False)
    assert not any(layer.src_attn.matched_inference for layer in model.decoders)

    with pytest.raises(ConfigError, match="no relaxed attention"):
        matched_inference.apply_matched_inference(decoder(0.0), True)
    matched_inference.apply_matched_inference(decoder(0.0), False)  # nothing to switch off: fine
    assert matched_inference.set_matched_inference(torch.nn.Linear(2, 2), False) == 0


class FakeText2Text:
    """Stands for ESPnet's class: builds its model and beam search in __init__."""

    def __init__(self, model):
        self.mt_model = model
        self.beam_search = None


def test_our_inference_class_applies_the_option_to_its_model():
    from espnet_ext.bin.inference_entry import OurDecoding

    class Ours(OurDecoding, FakeText2Text):
        model_attr = "mt_model"

    assert (
        Ours(decoder(0.25), matched_inference=True).mt_model.decoders[0].src_attn.matched_inference
    )
    assert not Ours(decoder(0.25)).mt_model.decoders[0].src_attn.matched_inference  # as trained
    with pytest.raises(ConfigError, match="no relaxed attention"):
        Ours(decoder(0.0), matched_inference=True)
