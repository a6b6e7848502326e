"""eos_threshold / lenpen reach the beam search from the command line and from the --config YAML."""

from __future__ import annotations

from pathlib import Path

import pytest
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
