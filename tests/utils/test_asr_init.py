"""utils/asr_init.py: an ST encoder starts from an ASR model only if every key and shape matches."""

import importlib.util
from pathlib import Path

import pytest
import torch

from espnet_ext.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("asr_init", ROOT / "utils" / "asr_init.py")
asr_init = importlib.util.module_from_spec(spec)
spec.loader.exec_module(asr_init)

ST = {
    "normalize.mean": torch.zeros(80),
    "encoder.embed.weight": torch.zeros(32, 80),
    "encoder.layer0.weight": torch.zeros(32, 32),
    "decoder.embed.weight": torch.zeros(30, 32),
}


def test_matching_encoder_and_normalisation_are_copied_decoder_is_not():
    asr = {k: v for k, v in ST.items() if not k.startswith("decoder.")}
    asr["ctc.ctc_lo.weight"] = torch.zeros(20, 32)  # ASR-only parts are ignored
    asr["decoder.embed.weight"] = torch.zeros(20, 32)  # the ASR decoder has another vocabulary
    assert asr_init.check_init(asr, ST, "asr.pth") == ["normalize", "encoder"]


def test_other_architecture_is_refused_naming_file_and_keys():
    fewer_blocks = {k: v for k, v in ST.items() if k != "encoder.layer0.weight"}
    with pytest.raises(
        InputError, match=r"asr\.pth: .*missing from the checkpoint: encoder\.layer0"
    ):
        asr_init.check_init(fewer_blocks, ST, "asr.pth")
    wider = {**ST, "encoder.layer0.weight": torch.zeros(64, 32)}
    with pytest.raises(InputError, match=r"encoder\.layer0\.weight \(64, 32\) vs \(32, 32\)"):
        asr_init.check_init(wider, ST, "asr.pth")
    more = {**ST, "encoder.layer1.weight": torch.zeros(32, 32)}
    with pytest.raises(
        InputError, match="checkpoint keys the ST model lacks: encoder.layer1.weight"
    ):
        asr_init.check_init(more, ST, "asr.pth")
    no_normalize = {k: v for k, v in ST.items() if not k.startswith("normalize.")}
    with pytest.raises(InputError, match="normalize.mean"):
        asr_init.check_init(no_normalize, ST, "asr.pth")
    with pytest.raises(InputError, match="no encoder"):
        asr_init.check_init({"decoder.embed.weight": torch.zeros(30, 32)}, {}, "asr.pth")


def test_missing_model_file_is_named(tmp_path, capsys):
    args = ["--asr_model", str(tmp_path / "nothere.pth"), "--", "--config", "x.yaml"]
    assert asr_init.main(args) == 1
    assert f"error: {tmp_path / 'nothere.pth'}: no such ASR model file\n" in capsys.readouterr().err
