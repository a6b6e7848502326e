"""Fine-tuning a composed LegoNN model: one config merge for both recipes (the composed model's architecture,
the loss settings its modules were trained with, the fine-tuning's training settings), and a decoded model
that the fine-tuning's training keeps."""

import re
from pathlib import Path

import pytest
import yaml

from espnet_ext.bin import lego_finetune_config
from espnet_ext.decoding.checkpoint_average import training_args
from espnet_ext.errors import ConfigError

EGS = Path(__file__).resolve().parents[3] / "egs"
# what lego_compose writes: the architecture and the interface keys only
COMPOSED = {
    "model": "legonn",
    "encoder": "legonn",
    "decoder": "legonn",
    "encoder_conf": {"modules": [{"layers": 2}]},
    "decoder_conf": {"layers": 2},
    "model_conf": {"interface_text_keys": ["text"]},
    "optim": "adam",
    "max_epoch": 100,
}


def load(recipe, name):
    return yaml.safe_load((EGS / recipe / "conf" / name).read_text())


@pytest.mark.parametrize("trained", ["train_lego_wemb_deroen.yaml", "train_lego_wemb_mini.yaml"])
def test_wmt_fine_tuning_keeps_label_smoothing_and_the_short_ctc_policy(trained):
    settings = "finetune_lego.yaml" if "deroen" in trained else "finetune_lego_mini.yaml"
    config = lego_finetune_config.merge(
        COMPOSED, load("wmt/mt1", settings), load("wmt/mt1", trained), settings
    )
    assert config["model_conf"]["lsm_weight"] == 0.1  # the paper's label smoothing (§V), was 0
    assert (
        config["model_conf"]["on_short_ctc"] == "report"
    )  # was "error": one short sentence stopped a job
    assert config["model_conf"]["interface_text_keys"] == ["text"]
    # the De-En training ties its source and decoder tables (§V-B); the composed Ro-En encoder's
    # table (d 512) is its own
    assert "share_encoder_decoder_input_embed" not in config["model_conf"]
    assert config["encoder_conf"] == COMPOSED["encoder_conf"]
    assert config["max_epoch"] == load("wmt/mt1", settings)["max_epoch"]


def test_europarl_settings_win_over_the_training_config():
    trained = load("europarl/asr1", "train_legonn.yaml")
    settings = {"model_conf": {"lsm_weight": 0.2}, "optim": "sgd"}
    config = lego_finetune_config.merge(COMPOSED, settings, trained)
    assert config["model_conf"]["lsm_weight"] == 0.2
    assert config["model_conf"]["on_short_ctc"] == trained["model_conf"]["on_short_ctc"]
    assert config["model_conf"]["interface_text_keys"] == [
        "text"
    ]  # the composed model's, not [phn, text]
    assert config["optim"] == "sgd"
    real = lego_finetune_config.merge(COMPOSED, load("europarl/asr1", "finetune.yaml"), trained)
    assert (
        real["model_conf"]["lsm_weight"] == 0.1 and real["model_conf"]["on_short_ctc"] == "report"
    )


def test_settings_may_not_change_the_composed_architecture(tmp_path):
    with pytest.raises(ConfigError, match="belong to the composed model") as error:
        lego_finetune_config.merge(COMPOSED, {"encoder_conf": {}}, None, "f.yaml")
    assert error.value.path == "f.yaml" and error.value.key == "encoder_conf"


def test_cli_writes_only_when_the_content_changes(tmp_path):
    composed, settings, out = tmp_path / "config.yaml", tmp_path / "ft.yaml", tmp_path / "out.yaml"
    composed.write_text(yaml.safe_dump(COMPOSED))
    settings.write_text("max_epoch: 3\n")
    args = ["--composed", str(composed), "--settings", str(settings), "--out", str(out)]
    assert lego_finetune_config.main(args) == 0
    assert yaml.safe_load(out.read_text())["max_epoch"] == 3
    stamp = out.stat().st_mtime_ns
    assert lego_finetune_config.main(args) == 0 and out.stat().st_mtime_ns == stamp
    settings.write_text("model: other\n")
    assert lego_finetune_config.main(args) == 1  # refused, named on stderr


def test_both_recipes_use_the_one_merge():
    compose = (EGS / "wmt" / "mt1" / "local" / "compose.sh").read_text()
    legonn = (EGS / "europarl" / "asr1" / "local" / "legonn.sh").read_text()
    for script in (compose, legonn):
        assert "espnet_ext.bin.lego_finetune_config" in script and "yaml.safe_load" not in script
    assert "--trained" in compose and "--trained" in legonn
    assert not (EGS / "europarl" / "asr1" / "local" / "merge_config.py").exists()


def test_wmt_real_lego_modes_decode_models_their_trainings_keep():
    """The window of 10 epochs of the best valid BLEU for the lego trainings (§V); the 4-epoch fine-tuning of
    lego_compose decodes another model."""
    run_sh = (EGS / "wmt" / "mt1" / "run.sh").read_text()
    assert "--inference_model window10.valid.bleu.max.pth" in run_sh
    configs = [
        p
        for p in (EGS / "wmt" / "mt1" / "conf").glob("train_*.yaml")
        if re.fullmatch(r"train_(lego_wemb|lego_beamconv|encdec)_(ende|deroen)\.yaml", p.name)
    ]
    assert len(configs) == 6
    for config in configs:
        # raises when it cannot keep 10 epochs
        training_args(["--config", str(config)], "window10.valid.bleu.max.pth")
    finetune = str(EGS / "wmt" / "mt1" / "conf" / "finetune_lego.yaml")
    with pytest.raises(ConfigError, match="averages the last 10 epochs, but this training runs 4"):
        training_args(["--config", finetune], "last10.pth")
    (model,) = re.findall(r"--finetune_model (\S+)\)", run_sh)
    assert training_args(["--config", finetune], model) == []
    criterion = load("wmt/mt1", "finetune_lego.yaml")["best_model_criterion"][0]
    assert model == f"{'.'.join(criterion[:2])}.best.pth"  # a file ESPnet writes for that training
