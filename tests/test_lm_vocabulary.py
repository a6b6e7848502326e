"""An LM whose vocabulary differs from the ASR/MT model's is refused before decoding."""

import subprocess
import sys

import pytest

from espnet_ext.errors import ConfigError
from espnet_ext.lm_vocabulary import check_lm_vocabulary, option_value


def config(tmp_path, name, tokens):
    path = tmp_path / f"{name}.yaml"
    path.write_text("token_list:\n" + "".join(f"- '{t}'\n" for t in tokens))
    return str(path)


def test_option_value_reads_both_spellings():
    assert option_value(["--a", "1", "--lm_train_config=x.yaml"], "--lm_train_config") == "x.yaml"
    assert option_value(["--lm_train_config", "y.yaml"], "--lm_train_config") == "y.yaml"
    assert option_value(["--other", "z"], "--lm_train_config") is None


def test_same_vocabulary_passes_and_differences_are_named(tmp_path):
    model = config(tmp_path, "asr", ["<blank>", "<unk>", "a", "b", "<sos/eos>"])
    check_lm_vocabulary(
        model, config(tmp_path, "lm_same", ["<blank>", "<unk>", "a", "b", "<sos/eos>"])
    )
    with pytest.raises(ConfigError, match="token id 2 is 'a' in the model but 'c' in the LM"):
        check_lm_vocabulary(
            model, config(tmp_path, "lm_other", ["<blank>", "<unk>", "c", "b", "<sos/eos>"])
        )
    with pytest.raises(ConfigError, match="5 tokens vs 4"):
        check_lm_vocabulary(
            model, config(tmp_path, "lm_short", ["<blank>", "<unk>", "a", "<sos/eos>"])
        )


def test_inference_entry_point_refuses_before_loading_anything(tmp_path):
    model = config(tmp_path, "asr", ["<blank>", "<unk>", "a", "<sos/eos>"])
    lm = config(tmp_path, "lm", ["<blank>", "<unk>", "b", "<sos/eos>"])
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "espnet_ext.bin.asr_inference",
            "--asr_train_config",
            model,
            "--lm_train_config",
            lm,
            "--output_dir",
            str(tmp_path / "out"),
            "--data_path_and_name_and_type",  # required by ESPnet's parser; never read
            f"{tmp_path / 'feats.scp'},speech,kaldi_ark",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode != 0
    assert "vocabulary differs" in out.stderr and lm in out.stderr
    assert not (tmp_path / "out").exists()
