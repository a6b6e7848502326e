"""egs/mustc/st1 (egs/TEMPLATE/st1/st.sh) end to end on tiny mini-corpus talks: the ST pipeline's one
end-to-end run, its encoder started from the ASR recipe's model (the session's run of ../asr1), BLEU
scored with sacrebleu's signature; then --asr_init with an ASR model of another architecture, which
must be refused before training.
"""

import re
from pathlib import Path

import pytest
import torch
import yaml
from recipe_fixture import MUSTC_SHARED_ARGS, MUSTC_TINY_MODEL, make_recipe_copy, run

from espnet_ext.registry import build_model

# on one worker with the other modules of its session fixture (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("mustc_asr_finished")

TINY_ST = MUSTC_TINY_MODEL + "model_conf: {lsm_weight: 0.1, report_bleu: false}\n"
ASR_MODEL = "../asr1/exp/asr_tiny_asr/valid.acc.ave.pth"
ST_ARGS = [
    "--st_config",
    "conf/tiny_st.yaml",
    "--inference_config",
    "conf/tiny_decode.yaml",
    "--src_nbpe",
    "30",
    "--tgt_nbpe",
    "30",
    "--inference_model",
    "valid.acc.best.pth",
    *MUSTC_SHARED_ARGS,
]


def _untrained_asr_model(st: Path, blocks: int, out: Path) -> Path:
    """An ESPnet ASR model whose encoder has ``blocks`` blocks, saved as ESPnet saves models."""
    config = yaml.safe_load(MUSTC_TINY_MODEL)
    config["encoder_conf"]["num_blocks"] = blocks
    config_file = out.with_suffix(".yaml")
    config_file.write_text(yaml.safe_dump(config))
    token_list = next((st / "data" / "token_list").glob("*_en/tokens.txt"))
    stats = next((st / "exp").glob("st_stats_*/train/feats_stats.npz"))
    model = build_model(
        "asr",
        [
            "--config",
            str(config_file),
            "--token_list",
            str(token_list),
            "--input_size",
            "80",
            "--normalize",
            "global_mvn",
            "--normalize_conf",
            f"stats_file={stats}",
        ],
    )
    torch.save(model.state_dict(), out)
    return out


@pytest.fixture(scope="module")
def finished(mustc_asr_finished):
    asr, _ = mustc_asr_finished
    st = asr.parent / "st1"
    (st / "conf" / "tiny_st.yaml").write_text(TINY_ST)
    (st / "conf" / "tiny_decode.yaml").write_text("beam_size: 2\nmaxlenratio: 0.0\n")
    out = run(st, [*ST_ARGS, "--asr_init", ASR_MODEL], env={"MUSTC": ""})
    assert out.returncode == 0, out.stderr[-4000:]
    return st, out


def test_st_data_dirs_hold_transcript_and_translation(finished):
    st, _ = finished
    data = st / "data" / "tst_COMMON"
    for name in ("segments", "text.en", "text.de", "text"):
        assert len((data / name).read_text().splitlines()) == 6


def test_encoder_and_normalisation_start_from_the_asr_recipe_model(finished):
    st, _ = finished
    exp = st / "exp" / "st_tiny_st_asrinit"
    config = yaml.safe_load((exp / "config.yaml").read_text())
    assert config["init_param"] == [
        f"{ASR_MODEL}:normalize:normalize",
        f"{ASR_MODEL}:encoder:encoder",
    ]
    # checked by a job (it builds the whole ST model), its answer beside its log
    init_log = (exp / "asr_init.log").read_text()
    assert "# Started at " in init_log and "# Ended (code 0)" in init_log
    assert (exp / "asr_init.opts").read_text().split() == [
        "--init_param",
        f"{ASR_MODEL}:normalize:normalize",
        f"{ASR_MODEL}:encoder:encoder",
    ]
    train_log = (exp / "train.log").read_text()
    assert f"Loading pretrained params from {ASR_MODEL}:normalize:normalize" in train_log
    assert f"Loading pretrained params from {ASR_MODEL}:encoder:encoder" in train_log
    # the source side (transcript) is the ST model's src_text, the target side its text
    data = {name: path for path, name, _ in config["train_data_path_and_name_and_type"]}
    assert data["text"].endswith("text.de") and data["src_text"].endswith("text.en")


def test_translations_scored_by_bleu_with_signature(finished):
    st, out = finished
    decode = st / "exp" / "st_tiny_st_asrinit" / "decode_tiny_decode" / "tst_COMMON"
    hyps = (decode / "text").read_text().splitlines()
    refs = (st / "data" / "tst_COMMON" / "text.de").read_text().splitlines()
    assert len(hyps) == 6 and [h.split()[0] for h in hyps] == [r.split()[0] for r in refs]
    result = (decode / "score_bleu" / "result.txt").read_text()
    assert re.search(r"BLEU", result)
    assert "signature: nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in result, result
    results_md = (st / "exp" / "RESULTS.md").read_text()
    assert "BLEU" in results_md and "st_tiny_st_asrinit" in results_md


def test_asr_model_of_another_architecture_is_refused(finished):
    st, _ = finished
    other = _untrained_asr_model(st, 2, st / "asr_other.pth")
    refused = run(
        st,
        [*ST_ARGS, "--asr_init", str(other), "--st_tag", "other", "--stop_stage", "6"],
        env={"MUSTC": ""},
    )
    assert refused.returncode != 0
    assert "asr_other.pth" in refused.stderr
    assert "checkpoint keys the ST model lacks: encoder.encoders.1." in refused.stderr
    assert not (st / "exp" / "st_other" / "checkpoint.pth").exists()


def test_asr_init_is_checked_by_the_training_stage_not_before(tmp_path):
    """The data stages run before ../asr1 has a model; a missing --asr_init stops stage 6 before training."""
    st = make_recipe_copy("mustc", "st1", tmp_path)
    missing = ["--asr_init", "../asr1/exp/none/valid.acc.ave.pth"]
    early = run(
        st, [*ST_ARGS, *missing, "--skip_data_prep", "true", "--stop_stage", "4"], {"MUSTC": ""}
    )
    assert early.returncode == 0, early.stderr[-2000:]
    refused = run(st, [*ST_ARGS, *missing, "--stage", "6", "--stop_stage", "6"], {"MUSTC": ""})
    assert refused.returncode != 0
    assert "--asr_init ../asr1/exp/none/valid.acc.ave.pth: no such file" in refused.stderr
    assert "Stage 6 (ST training) failed" in refused.stderr
    assert not list(st.glob("exp/st_*/train.log"))
