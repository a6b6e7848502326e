"""Every owned training config with attention dropout sets ``use_flash_attn: false`` explicitly.

ESPnet defaults to ``use_flash_attn: true``; where flash-attn is installed its fp32 training path skips
attention dropout in plain modules, while relaxed modules switch flash off and keep dropout. Only an
explicit ``false`` makes plain and relaxed sites drop attention weights alike.
"""

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted(
    path
    for recipe in ("librispeech/asr1", "iwslt14/mt1")
    for path in (ROOT / "egs" / recipe / "conf").glob("train_*.yaml")
    if not path.name.endswith("_mini.yaml") and "lm" not in path.name
)


def test_configs_found():
    assert {p.name for p in CONFIGS} >= {
        "train_asr_base.yaml",
        "train_asr_small.yaml",
        "train_mt_base.yaml",
    }


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_flash_attention_off_in_encoder_and_decoder(path):
    config = yaml.safe_load(path.read_text())
    for section in ("encoder_conf", "decoder_conf"):
        assert config[section].get("use_flash_attn") is False, f"{path.name}: {section}"
