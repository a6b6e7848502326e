"""Every real decoding config of a fairseq-based paper ranks hypotheses as fairseq does (``lenpen``: score /
length**lenpen), never with ESPnet's additive per-token bonus (``penalty``), and each inference entry point
its recipe decodes with takes those keys."""

from pathlib import Path

import pytest
import yaml

from espnet_ext.bin import vsr_inference
from espnet_ext.decoding import options
from espnet_ext.decoding.beam_search import FairseqRulesBatchBeamSearch

EGS = Path(__file__).resolve().parents[2] / "egs"

# (recipe, config): fairseq's lenpen, from the paper or the authors' fairseq command
LENPEN = {
    ("wmt/mt1", "decode_mt.yaml"): 0.6,  # LegoNN §V-B: beam 5, length penalty 0.6
    ("europarl/asr1", "decode.yaml"): 1.0,  # LegoNN §V-A: beam 20, length penalty 1.0
    ("iwslt14/mt1", "decode_mt.yaml"): 0.5,  # Shen et al.'s recipe, --lenpen 0.5
    ("librispeech/asr1", "decode_asr.yaml"): 1.0,  # espresso's recipe
    ("librispeech/asr1", "decode_asr_lm.yaml"): 1.0,
    ("lrs3/vsr1", "decode_vsr.yaml"): 1.0,  # AV-HuBERT's fairseq generator, default --lenpen 1
    ("mtedx/asr1", "decode_asr.yaml"): 1.0,  # fairseq-generate --beam 5 (attention_head_selection)
    ("mtedx/st1", "decode_st.yaml"): 1.0,
    ("mustc/asr1", "decode_asr.yaml"): 1.0,  # fairseq-generate --beam 5 (multiformer)
    ("mustc/st1", "decode_st.yaml"): 1.0,
}


def real_decode_configs():
    return sorted(
        (str(p.parent.parent.relative_to(EGS)), p.name)
        for p in EGS.glob("*/*/conf/decode*.yaml")
        if "mini" not in p.name and "TEMPLATE" not in str(p)
    )


def test_every_real_decode_config_is_listed():
    assert real_decode_configs() == sorted(LENPEN)


@pytest.mark.parametrize("recipe, name", sorted(LENPEN))
def test_fairseq_length_normalisation_not_an_additive_bonus(recipe, name):
    config = yaml.safe_load((EGS / recipe / "conf" / name).read_text())
    assert config.get("penalty", 0.0) == 0.0  # ESPnet's per-token bonus, not fairseq's lenpen
    assert config.get("lenpen") == LENPEN[recipe, name]
    assert config.get("fairseq_stop") is True  # fairseq's generator ends a sentence with the beam
    # what the asr/st/mt entry points take off the config
    ours = options.take_ours(dict(config), name)
    assert ours["lenpen"] == LENPEN[recipe, name]


def test_lip_reading_inference_takes_lenpen_from_its_config(tmp_path):
    base = ["--data_path_and_name_and_type", "x.scp,video,video", "--model_file", "m.pth",
            "--output_file", "out"]  # fmt: skip
    config = EGS / "lrs3" / "vsr1" / "conf" / "decode_vsr.yaml"
    args = vsr_inference.parse_args(base + ["--config", str(config)])
    assert (args.lenpen, args.fairseq_stop, args.eos_threshold) == (1.0, True, None)
    args = vsr_inference.parse_args(base + ["--config", str(config), "--lenpen", "0.5"])
    assert args.lenpen == 0.5  # the command line wins
    bad = tmp_path / "bad.yaml"
    bad.write_text("lenpen: much\n")
    with pytest.raises(options.ConfigError, match="bad.yaml.*lenpen|lenpen.*bad.yaml"):
        vsr_inference.parse_args(base + ["--config", str(bad)])


def test_lip_reading_beam_search_gets_the_rules():
    import torch
    from espnet.nets.scorer_interface import BatchScorerInterface

    class Decoder(torch.nn.Module, BatchScorerInterface):
        def batch_score(self, ys, states, xs):
            return torch.log_softmax(torch.zeros(len(ys), 4), -1), states

    class Model:
        decoder, ctc, eos, sos = Decoder(), None, 3, 3
        token_list = ["<blank>", "a", "b", "<sos/eos>"]

    base = [
        "--data_path_and_name_and_type",
        "x,video,video",
        "--model_file",
        "m",
        "--output_file",
        "o",
    ]
    rules = ["--ctc_weight", "0", "--lenpen", "0.6", "--fairseq_stop", "true"]
    args = vsr_inference.parse_args(base + rules)
    args.device = "cpu"
    search = vsr_inference.build_beam_search(Model(), args)
    assert type(search) is FairseqRulesBatchBeamSearch
    assert (search.lenpen, search.fairseq_stop) == (0.6, True)
