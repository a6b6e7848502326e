"""The training's feature normalisation comes from the config (espnet_ext.bin.normalize_opts)."""

import inspect
from pathlib import Path

import pytest
from espnet2.asr.espnet_model import ESPnetASRModel

from espnet_ext.bin.normalize_opts import main, normalize_opts
from espnet_ext.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
STATS = "exp/stats/train/feats_stats.npz"


def test_the_config_decides():
    assert normalize_opts({"normalize": "utterance_mvn"}, STATS) == []
    assert normalize_opts({"normalize": None}, STATS) == []
    assert normalize_opts({}, STATS) == [
        "--normalize",
        "global_mvn",
        "--normalize_conf",
        f"stats_file={STATS}",
    ]
    assert normalize_opts({"normalize": "global_mvn"}, STATS) == [
        "--normalize_conf",
        f"stats_file={STATS}",
    ]
    own = {"normalize": "global_mvn", "normalize_conf": {"stats_file": "x.npz"}}
    assert normalize_opts(own, STATS) == []
    with pytest.raises(ConfigError, match="normalize_conf"):
        normalize_opts({"normalize": "utterance_mvn", "normalize_conf": [1]}, STATS)


def test_specaugment_runs_once():
    """utterance_cmvn_specaug masks after its CMVN; ESPnet's own specaug slot would mask again before it."""
    conf = {"specaug_conf": {"apply_time_warp": False}}
    config = {"normalize": "utterance_cmvn_specaug", "normalize_conf": conf, "specaug": None}
    assert normalize_opts(config, STATS) == []
    with pytest.raises(ConfigError, match="specaug: null") as err:
        normalize_opts({**config, "specaug": "specaug"}, STATS, "conf/train.yaml")
    assert "conf/train.yaml" in str(err.value)


def test_command_prints_the_words(tmp_path, capsys):
    config = tmp_path / "train.yaml"
    config.write_text("normalize: utterance_mvn\nnormalize_conf:\n    norm_vars: true\n")
    assert main(["--config", str(config), "--stats_file", STATS]) == 0
    assert capsys.readouterr().out == "\n"
    config.write_text("encoder: transformer\n")
    assert main(["--config", str(config), "--stats_file", STATS]) == 0
    assert capsys.readouterr().out.split() == normalize_opts({}, STATS)
    assert main(["--config", str(tmp_path / "none.yaml"), "--stats_file", STATS]) == 1
    assert "none.yaml" in capsys.readouterr().err


def test_pipelines_ask_the_config():
    for script in ("egs/TEMPLATE/asr1/asr.sh", "egs/TEMPLATE/st1/st.sh"):
        text = (ROOT / script).read_text()
        assert "espnet_ext.bin.normalize_opts" in text
        assert "--normalize global_mvn" not in text


def test_espnet_normalises_after_specaugment():
    """Documented in normalize_opts: ESPnet's encode runs SpecAugment, then the normalisation (fairseq:
    CMVN, then SpecAugment)."""
    source = inspect.getsource(ESPnetASRModel.encode)
    assert source.index("self.specaug(") < source.index("self.normalize(")
