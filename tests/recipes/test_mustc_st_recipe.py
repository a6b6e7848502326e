"""egs/mustc/st1 end to end on tiny mini-corpus talks: the ASR encoder of ../asr1 transferred, BLEU scored.

Known failure: ESPnet prints a flash_attn import notice on stdout, which utils/asr_init.py's output (the
--init_param options st.sh reads) then contains, so ST training with --asr_init stops at stage 6.
"""

import re

import pytest
import yaml
from recipe_fixture import make_recipe_copy, run

ENCODER = """\
encoder: transformer
encoder_conf: {output_size: 32, attention_heads: 2, linear_units: 64, num_blocks: 1, input_layer: conv2d,
               use_flash_attn: false}
decoder: transformer
decoder_conf: {attention_heads: 2, linear_units: 64, num_blocks: 1, use_flash_attn: false}
frontend: null
optim: adam
optim_conf: {lr: 0.002}
batch_type: folded
batch_size: 8
max_epoch: 1
best_model_criterion: [[valid, acc, max]]
keep_nbest_models: 1
num_workers: 0
use_tensorboard: false
use_matplotlib: false
num_att_plot: 0
"""
TINY_ASR = ENCODER + "model_conf: {ctc_weight: 0.3, lsm_weight: 0.1}\n"
TINY_ST = ENCODER + "model_conf: {lsm_weight: 0.1, report_bleu: false}\n"
DATA_OPTS = [
    "--local_data_opts",
    "--mini_splits train=40,dev=6,tst-COMMON=6 --mini_num_speakers 2 --mini_segments_per_talk 4:8",
]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    dest = tmp_path_factory.mktemp("recipes")
    asr = make_recipe_copy("mustc", "asr1", dest)
    st = make_recipe_copy("mustc", "st1", dest)
    (asr / "conf" / "tiny_asr.yaml").write_text(TINY_ASR)
    (st / "conf" / "tiny_st.yaml").write_text(TINY_ST)
    (st / "conf" / "tiny_decode.yaml").write_text("beam_size: 2\nmaxlenratio: 0.0\n")
    asr_run = run(
        asr,
        ["--asr_config", "conf/tiny_asr.yaml", "--nbpe", "30", "--stop_stage", "9", *DATA_OPTS],
        env={"MUSTC": ""},
    )
    assert asr_run.returncode == 0, asr_run.stderr[-4000:]
    st_args = ["--st_config", "conf/tiny_st.yaml", "--inference_config", "conf/tiny_decode.yaml"]
    st_args += ["--src_nbpe", "30", "--tgt_nbpe", "30", "--inference_model", "valid.acc.best.pth"]
    st_args += ["--asr_init", "../asr1/exp/asr_tiny_asr/valid.acc.ave.pth", *DATA_OPTS]
    st_run = run(st, st_args, env={"MUSTC": ""})
    assert st_run.returncode == 0, st_run.stderr[-4000:]
    return st, st_run


def test_st_data_dirs_hold_transcript_and_translation(finished):
    st, _ = finished
    data = st / "data" / "tst_COMMON"
    for name in ("segments", "text.en", "text.de", "text"):
        assert len((data / name).read_text().splitlines()) == 6


def test_encoder_starts_from_the_asr_recipe_model(finished):
    st, _ = finished
    config = yaml.safe_load((st / "exp" / "st_tiny_st_asrinit" / "config.yaml").read_text())
    model = "../asr1/exp/asr_tiny_asr/valid.acc.ave.pth"
    assert f"{model}:encoder:encoder" in config["init_param"]


def test_translations_scored_by_bleu(finished):
    st, out = finished
    decode = st / "exp" / "st_tiny_st_asrinit" / "decode_tiny_decode" / "tst_COMMON"
    assert len((decode / "text").read_text().splitlines()) == 6
    result = (decode / "score_bleu" / "result.txt").read_text()
    assert re.search(r"BLEU", result) and "nrefs:1" in result
    assert "st_tiny_st_asrinit" in (st / "exp" / "RESULTS.md").read_text()
