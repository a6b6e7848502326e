"""egs/europarl/asr1's training configs build, and the mini ones keep the LegoNN model and the baseline alike
but for what LegoNN adds (the same front end and width); the OLC's small-data options only in the mini."""

from pathlib import Path

import pytest
import yaml

from espnet_ext.nets.lego.olc import AlignmentPriorAttention
from espnet_ext.registry import build_model

RECIPE = Path(__file__).resolve().parents[2] / "egs" / "europarl" / "asr1"
TOKENS = ["<blank>", "<unk>", "a", "b", "<sos/eos>"]


def config(name: str) -> dict:
    return yaml.safe_load((RECIPE / "conf" / name).read_text())


@pytest.fixture
def token_lists(tmp_path, monkeypatch):
    """The interface token lists the LegoNN configs name, relative to the recipe dir (here tmp_path)."""
    for sub in ("phn", "bpe_unigram100", "bpe_unigram2000"):
        path = tmp_path / "data" / "token_list" / sub / "tokens.txt"
        path.parent.mkdir(parents=True)
        path.write_text("\n".join(TOKENS) + "\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "data" / "token_list" / "bpe_unigram100" / "tokens.txt"


@pytest.mark.parametrize(
    "name",
    [
        "train_legonn_mini.yaml",
        "train_legonn.yaml",
        "train_legonn_ctc.yaml",
        "train_baseline_mini.yaml",
        "train_baseline.yaml",
    ],
)
def test_every_training_config_builds(name, token_lists):
    args = ["--config", str(RECIPE / "conf" / name), "--token_list", str(token_lists)]
    model = build_model("asr", [*args, "--token_type", "bpe", "--input_size", "80"])
    prior_heads = [m for m in model.modules() if isinstance(m, AlignmentPriorAttention)]
    # both OLCs of the mini LegoNN model carry the alignment prior; the real config is eq. 18 as written
    assert len(prior_heads) == (2 if name == "train_legonn_mini.yaml" else 0)


def test_the_mini_baseline_has_the_legonn_front_end_and_width():
    lego = config("train_legonn_mini.yaml")["encoder_conf"]["modules"][0]
    baseline = config("train_baseline_mini.yaml")["encoder_conf"]
    assert lego["input_layer"] == "cnn"
    for key in ("conv_channels", "conv_strides", "output_size", "attention_heads", "linear_units"):
        assert lego[key] == baseline[key], key
    for key in ("batch_size", "optim_conf", "scheduler_conf"):  # trained alike
        assert config("train_legonn_mini.yaml")[key] == config("train_baseline_mini.yaml")[key], key
    for module in config("train_legonn_mini.yaml")["encoder_conf"]["modules"]:
        assert module["olc"]["query_scale"] == 0.1 and module["olc"]["alignment_prior"] > 0
    for module in config("train_legonn.yaml")["encoder_conf"]["modules"]:
        assert "query_scale" not in module["olc"] and "alignment_prior" not in module["olc"]
