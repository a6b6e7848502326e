"""eos_threshold / lenpen reach the beam search from the command line and from the --config YAML."""

from __future__ import annotations

from pathlib import Path

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
    """Builds a beam search as ESPnet's inference classes do; records what ESPnet's parser would see."""

    built: list = []

    def __init__(self, **kwargs):
        self.beam_search = BeamSearch(
            scorers={"decoder": TableDecoder()},
            weights={"decoder": 1.0},
            beam_size=2,
            vocab_size=4,
            sos=EOS,
            eos=EOS,
        )
        FakeText2Text.built.append(self)


def test_pop_from_argv_both_spellings():
    values, rest = options.pop_from_argv(
        ["--eos_threshold", "1.5", "--lenpen=0.6", "--beam_size", "4"]
    )
    assert values == {"eos_threshold": 1.5, "lenpen": 0.6}
    assert rest == ["--beam_size", "4"]
    with pytest.raises(ConfigError, match="lenpen"):
        options.pop_from_argv(["--lenpen", "long"])
    with pytest.raises(ConfigError, match="fairseq_stop"):
        options.pop_from_argv(["--fairseq_stop", "1.5"])


def test_config_keys_move_to_us_and_the_user_file_stays(tmp_path):
    conf = tmp_path / "decode.yaml"
    conf.write_text("beam_size: 10\neos_threshold: 1.5\nlenpen: 1.0\n")
    with options.split_config(["--config", str(conf), "--output_dir", "o"]) as (ours, argv):
        assert ours == {"eos_threshold": 1.5, "lenpen": 1.0}
        assert yaml.safe_load(Path(argv[1]).read_text()) == {"beam_size": 10}
        copy = argv[1]
    assert conf.read_text() == "beam_size: 10\neos_threshold: 1.5\nlenpen: 1.0\n"
    assert not Path(copy).exists()


def test_run_applies_rules_command_line_wins(tmp_path):
    conf = tmp_path / "decode.yaml"
    conf.write_text("beam_size: 10\neos_threshold: 1.5\nlenpen: 1.0\nfairseq_stop: true\n")
    seen = {}

    def espnet_main(cmd):
        seen["cmd"] = cmd
        seen["config"] = yaml.safe_load(Path(cmd[cmd.index("--config") + 1]).read_text())
        FakeText2Text()

    FakeText2Text.built.clear()
    original_init = FakeText2Text.__init__
    inference_entry.run(
        espnet_main,
        object,
        "--mt_train_config",
        FakeText2Text,
        argv=["--config", str(conf), "--lenpen", "0.6"],
    )
    assert seen["config"] == {"beam_size": 10}
    search = FakeText2Text.built[0].beam_search
    assert type(search) is FairseqRulesBeamSearch
    assert (search.eos_threshold, search.lenpen, search.fairseq_stop) == (1.5, 0.6, True)
    assert FakeText2Text.__init__ is original_init  # restored


def test_bad_threshold_exits_naming_the_key(tmp_path):
    conf = tmp_path / "decode.yaml"
    conf.write_text("eos_threshold: 0.5\n")
    with pytest.raises(SystemExit, match="eos_threshold"):
        inference_entry.run(
            lambda cmd: None,
            object,
            "--mt_train_config",
            FakeText2Text,
            argv=["--config", str(conf)],
        )
    with pytest.raises(SystemExit, match="not available"):
        inference_entry.run(
            lambda cmd: None, object, "--mt_train_config", None, argv=["--lenpen", "1"]
        )


def test_espnets_speech2text_decodes_with_the_rules(tmp_path):
    """ESPnet's own ASR inference class, built under the wrapper, searches with our class."""
    from espnet2.bin.asr_inference import Speech2Text
    from espnet2.tasks.asr import ASRTask

    from espnet_ext.registry import install

    install()  # registration, as in the entry points

    tokens = ["<blank>", "<unk>", "a", "b", "<sos/eos>"]
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
    rules = {"eos_threshold": 1.5, "lenpen": 1.0, "fairseq_stop": True}
    with options.applied_on_build(Speech2Text, rules):
        speech2text = Speech2Text(
            asr_train_config=str(tmp_path / "config.yaml"),
            asr_model_file=str(tmp_path / "model.pth"),
            beam_size=3,
            ctc_weight=0.0,
            maxlenratio=0.5,
        )
    search = speech2text.beam_search
    assert type(search).__name__ == "FairseqRulesBatchBeamSearch"
    assert (search.eos_threshold, search.lenpen, search.fairseq_stop) == (1.5, 1.0, True)
    text, tokens_out, *_ = speech2text(torch.randn(40, 8))[0]
    assert len(tokens_out) <= 20  # maxlenratio 0.5 of 40 encoder frames
