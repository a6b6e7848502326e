"""eos_threshold / lenpen reach the beam search from the command line and from the --config YAML."""

from __future__ import annotations

import pytest
import torch
import yaml
from espnet.nets.beam_search import BeamSearch

from espnet_ext.bin import inference_entry
from espnet_ext.decoding import options
from espnet_ext.decoding.beam_search import FairseqRulesBeamSearch
from espnet_ext.errors import ConfigError
from tests.decoding.test_beam_search import EOS, TableDecoder


class FakeText2Text:
    """Builds a beam search as ESPnet's inference classes do."""

    def __init__(self):
        self.mt_model = torch.nn.Linear(1, 1)
        self.beam_search = BeamSearch(
            scorers={"decoder": TableDecoder()},
            weights={"decoder": 1.0},
            beam_size=2,
            vocab_size=4,
            sos=EOS,
            eos=EOS,
        )


class OurText2Text(inference_entry.OurDecoding, FakeText2Text):
    model_attr = "mt_model"


def test_our_class_switches_the_beam_search_it_built():
    search = OurText2Text(eos_threshold=1.5, lenpen=0.6, fairseq_stop=True).beam_search
    assert type(search) is FairseqRulesBeamSearch
    assert (search.eos_threshold, search.lenpen, search.fairseq_stop) == (1.5, 0.6, True)
    assert type(OurText2Text().beam_search) is BeamSearch  # no rules: ESPnet's search
    assert type(FakeText2Text().beam_search) is BeamSearch


def test_options_from_the_config_and_the_command_line_which_wins(tmp_path):
    from espnet2.bin.mt_inference import get_parser

    conf = tmp_path / "decode.yaml"
    conf.write_text("beam_size: 10\neos_threshold: 1.5\nlenpen: 1.0\nfairseq_stop: true\n")
    parser = inference_entry.get_parser(get_parser)
    args = parser.parse_args(["--config", str(conf), "--lenpen", "0.6", *REQUIRED])
    assert (args.beam_size, args.eos_threshold, args.lenpen, args.fairseq_stop) == (
        10,
        1.5,
        0.6,
        True,
    )
    assert parser.parse_args(["--lenpen=none", *REQUIRED]).lenpen is None
    for bad in (["--lenpen", "long"], ["--fairseq_stop", "1.5"]):
        with pytest.raises(SystemExit):
            parser.parse_args(bad + REQUIRED)
    assert options.checked_value("1.5", "eos_threshold") == 1.5
    with pytest.raises(ConfigError, match="fairseq_stop"):
        options.checked_value(1.5, "fairseq_stop", str(conf))


def test_bad_threshold_exits_naming_the_key(tmp_path):
    from espnet2.tasks.mt import MTTask

    conf = tmp_path / "decode.yaml"
    conf.write_text("eos_threshold: 0.5\n")
    with pytest.raises(SystemExit, match="eos_threshold"):
        inference_entry.run(OurText2Text, MTTask, _mt_parser(), ["--config", str(conf), *REQUIRED])
    conf.write_text("fairseq_stop: 1.5\n")  # YAML values do not pass through argparse's type
    with pytest.raises(SystemExit, match="fairseq_stop"):
        inference_entry.run(OurText2Text, MTTask, _mt_parser(), ["--config", str(conf), *REQUIRED])
    assert not (tmp_path / "o").exists()


REQUIRED = ["--output_dir", "o", "--data_path_and_name_and_type", "text,src_text,text"]


def _mt_parser():
    from espnet2.bin.mt_inference import get_parser

    return get_parser


def tiny_speech2text(tmp_path, device="cpu", **rules):
    """Our ASR inference class over a tiny random ESPnet model saved as a training run leaves it."""
    from espnet2.tasks.asr import ASRTask

    from espnet_ext.bin.asr_inference import Speech2Text  # registers our classes on import

    tokens = ["<blank>", "<unk>", "a", "b", "<sos/eos>"]
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "tokens.txt").write_text("\n".join(tokens) + "\n")
    tiny = {"output_size": 8, "attention_heads": 2, "linear_units": 8, "num_blocks": 1}
    args = ASRTask.get_parser().parse_args(
        ["--token_list", str(tmp_path / "tokens.txt"), "--input_size", "8", "--normalize", "none"]
        + ["--encoder", "transformer", "--decoder", "transformer", "--model_conf", "ctc_weight=0.0"]
        + [a for k, v in tiny.items() for a in ("--encoder_conf", f"{k}={v}")]
        + ["--encoder_conf", "input_layer=linear", "--decoder_conf", "attention_heads=2"]
        + ["--decoder_conf", "linear_units=8", "--decoder_conf", "num_blocks=1"]
    )
    torch.manual_seed(0)
    torch.save(ASRTask.build_model(args).state_dict(), tmp_path / "model.pth")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({**vars(args), "token_list": tokens}))
    return Speech2Text(
        asr_train_config=str(tmp_path / "config.yaml"),
        asr_model_file=str(tmp_path / "model.pth"),
        beam_size=3,
        ctc_weight=0.0,
        maxlenratio=0.5,
        device=device,
        **rules,
    )


def test_espnets_speech2text_decodes_with_the_rules(tmp_path):
    """Our subclass of ESPnet's ASR inference class searches with our beam search class."""
    rules = {"eos_threshold": 1.5, "lenpen": 1.0, "fairseq_stop": True}
    speech2text = tiny_speech2text(tmp_path, **rules)
    search = speech2text.beam_search
    assert type(search).__name__ == "FairseqRulesBatchBeamSearch"
    assert (search.eos_threshold, search.lenpen, search.fairseq_stop) == (1.5, 1.0, True)
    text, tokens_out, *_ = speech2text(torch.randn(40, 8))[0]
    assert len(tokens_out) <= 20  # maxlenratio 0.5 of 40 encoder frames


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_speech2text_with_the_rules_decodes_on_cuda_as_on_the_cpu(tmp_path):
    """``--gpu_inference true``'s path: the rules' beam search on CUDA finds the CPU's hypotheses."""
    rules = {"eos_threshold": 1.5, "lenpen": 1.0, "fairseq_stop": True}
    speech = torch.randn(40, 8)
    results = [
        tiny_speech2text(tmp_path / device, device, **rules)(speech) for device in ("cpu", "cuda")
    ]
    for (_, cpu_tokens, _, cpu_hyp), (_, cuda_tokens, _, cuda_hyp) in zip(*results):
        assert cuda_tokens == cpu_tokens
        torch.testing.assert_close(
            float(cuda_hyp.score), float(cpu_hyp.score), atol=1e-4, rtol=1e-4
        )
