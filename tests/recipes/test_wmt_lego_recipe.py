"""egs/wmt/mt1's LegoNN compose scenario end to end on tiny mini corpora: the Ro-En encoder + the De-En
decoder from the module inventory, decoded with no training, then fine-tuned from the composed weights.
The De-En model is the session's (conftest.py), shared with egs/europarl/asr1's tests."""

import json
import os
import re

import pytest
import torch
import yaml
from recipe_fixture import read_table, run
from wmt_fixture import LEGO_ARGS

# on one worker with the other modules of its session fixture (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("wmt_lego_deen")


@pytest.fixture(scope="module")
def composed(wmt_lego_deen):
    recipe = wmt_lego_deen
    for mode in ("lego_roen", "lego_compose"):  # lego_deen: the session's run
        out = run(recipe, ["--mode", mode, *LEGO_ARGS], {"WMT": ""})
        assert out.returncode == 0, out.stderr[-4000:]
    return recipe


def test_compose_uses_the_roen_encoder_and_deen_decoder_weights(composed):
    exp = composed / "exp"
    roen = torch.load(exp / "lego_roen/mt_tiny_lego/valid.acc.ave.pth", map_location="cpu")
    deen = torch.load(exp / "lego_deen/mt_tiny_lego/valid.acc.ave.pth", map_location="cpu")
    model = torch.load(exp / "lego_compose/mt_composed_tiny_lego/model.pth", map_location="cpu")
    assert set(model) == set(roen)
    for key, value in model.items():
        source = roen if key.startswith(("encoder.", "frontend.")) else deen
        assert torch.equal(value, source[key]), key
    # exported by a job of mt.sh (the model is GBs at WMT scale)
    log = (exp / "lego_deen/mt_tiny_lego/log/lego_export.log").read_text()
    assert "# Started at " in log and "# Ended (code 0)" in log
    decoder = torch.load(exp / "lego_deen/mt_tiny_lego/modules/decoder.pt", weights_only=False)
    tokens = (composed / "data/token_list/lego_mini/tokens.txt").read_text().split()
    assert decoder["input_vocab"] == tokens and decoder["kind"] == "decoder"
    # the joint dictionary was its own job (asking for SentencePiece's memory), not the data job's work
    assert "# Ended (code 0)" in (composed / "data/log/token_list_lego_mini.log").read_text()


def test_composed_model_decoded_before_and_after_fine_tuning(composed):
    exp = composed / "exp" / "lego_compose"
    refs = read_table(composed / "data" / "roen_test_wmttest" / "text.en")
    for tag in ("composed_tiny_lego", "composed_tiny_lego_finetuned"):
        decoded = exp / f"mt_{tag}" / "decode_decode_mt_mini" / "roen_test_wmttest"
        assert sorted(read_table(decoded / "text")) == sorted(refs) and len(refs) == 6
        assert json.loads((decoded / "score_bleu" / "result.json").read_text())["bleu"] >= 0
    tuned = exp / "mt_composed_tiny_lego_finetuned"
    config = yaml.safe_load((tuned / "config.yaml").read_text())
    assert config["init_param"] == [
        str(exp.relative_to(composed) / "mt_composed_tiny_lego/model.pth")
    ]
    assert (
        config["max_epoch"] == 3 and config["optim_conf"]["lr"] == 0.0002
    )  # finetune_lego_mini.yaml
    # the loss settings the modules were trained with (conf/tiny_lego.yaml), not the model's defaults
    assert config["model_conf"]["lsm_weight"] == 0.1
    assert config["model_conf"]["on_short_ctc"] == "report"
    before = torch.load(exp / "mt_composed_tiny_lego/model.pth", map_location="cpu")
    after = torch.load(tuned / "valid.acc.ave.pth", map_location="cpu")
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_the_scenario_keeps_to_the_stages_asked_for(composed):
    scoring_only = run(
        composed,
        ["--mode", "lego_compose", *LEGO_ARGS, "--stage", "11", "--stop_stage", "11"],
        {"WMT": ""},
    )
    assert scoring_only.returncode == 0, scoring_only.stderr[-4000:]
    assert set(re.findall(r"Stage (\d+): ", scoring_only.stderr)) == {"11"}, scoring_only.stderr
    tagged = run(composed, ["--mode", "lego_compose", *LEGO_ARGS, "--mt_tag", "x"], {"WMT": ""})
    assert (
        tagged.returncode == 1 and "--mt_tag: the scenario names its experiments" in tagged.stderr
    )


def test_a_stage_7_run_composes_again_from_newer_modules(composed):
    exp = composed / "exp"
    model = exp / "lego_compose/mt_composed_tiny_lego/model.pth"
    encoder = exp / "lego_roen/mt_tiny_lego/modules/encoder0.pt"
    os.utime(encoder, ns=(model.stat().st_mtime_ns + 10**9,) * 2)  # re-exported since
    out = run(
        composed,
        ["--mode", "lego_compose", *LEGO_ARGS, "--stage", "7", "--stop_stage", "7"],
        {"WMT": ""},
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert (
        model.stat().st_mtime_ns > encoder.stat().st_mtime_ns
    )  # the fine-tuning's --init_param is fresh
