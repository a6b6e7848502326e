"""egs/TEMPLATE/st1/st.sh end to end on a tiny synthetic ST corpus (spoken English numbers -> German words).

One module-scoped fixture runs the pipeline: a plain ST model through all stages, then the same ST training
started from an ASR model of the ST encoder's architecture (--asr_init), then --asr_init with an ASR model of
another architecture, which must be refused before training.
"""

import os
import subprocess
from pathlib import Path

import pytest
import torch
import yaml

from espnet_ext.registry import build_model

ROOT = Path(__file__).resolve().parents[2]

DATA_SH = """#!/usr/bin/env bash
set -euo pipefail
. ./path.sh
python -m espnet_ext.data.numbers --out data/mini --langs en,de --modalities speech,text \\
    --splits train=40,dev=6,test=6 --nj 2
for split in train dev test; do rm -rf "data/${split}"; cp -r "data/mini/${split}" "data/${split}"; done
"""
ENCODER = """\
encoder: transformer
encoder_conf: {{output_size: 32, attention_heads: 2, linear_units: 64, num_blocks: {blocks},
               input_layer: conv2d}}
"""
TINY_ST = (
    ENCODER.format(blocks=1)
    + """\
decoder: transformer
decoder_conf: {attention_heads: 2, linear_units: 64, num_blocks: 1}
model_conf: {lsm_weight: 0.1, report_bleu: false}
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
)
TINY_DECODE = "beam_size: 2\nmaxlenratio: 0.0\n"
ARGS = [
    "--st_config",
    "conf/tiny_st.yaml",
    "--inference_config",
    "conf/tiny_decode.yaml",
    "--src_lang",
    "en",
    "--tgt_lang",
    "de",
    "--src_nbpe",
    "30",
    "--tgt_nbpe",
    "30",
    "--inference_model",
    "valid.acc.best.pth",
]


def _asr_model(recipe: Path, blocks: int, out: Path) -> Path:
    """An (untrained) ESPnet ASR model whose encoder has ``blocks`` blocks, saved as ESPnet saves models."""
    (recipe / "conf" / f"asr_{blocks}.yaml").write_text(
        ENCODER.format(blocks=blocks)
        + "decoder: transformer\ndecoder_conf: {attention_heads: 2, linear_units: 64, num_blocks: 1}\n"
        + "frontend: null\n"
    )
    token_list = next((recipe / "data" / "token_list").glob("*_en/tokens.txt"))
    stats = next((recipe / "exp").glob("st_stats_*/train/feats_stats.npz"))
    model = build_model(
        "asr",
        [
            "--config",
            str(recipe / "conf" / f"asr_{blocks}.yaml"),
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


def _st(recipe: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["./st.sh", *ARGS, *args],
        cwd=recipe,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="module")
def st_runs(tmp_path_factory):
    recipe = tmp_path_factory.mktemp("st") / "egs" / "tiny" / "st1"
    (recipe / "local").mkdir(parents=True)
    (recipe / "conf").mkdir()
    for name in ("cmd.sh", "path.sh", "db.sh"):
        (recipe / name).symlink_to(ROOT / "egs" / "TEMPLATE" / "asr1" / name)
    (recipe / "st.sh").symlink_to(ROOT / "egs" / "TEMPLATE" / "st1" / "st.sh")
    (recipe / "utils").symlink_to(ROOT / "utils")
    (recipe / "local" / "data.sh").write_text(DATA_SH)
    (recipe / "local" / "data.sh").chmod(0o755)
    (recipe / "conf" / "tiny_st.yaml").write_text(TINY_ST)
    (recipe / "conf" / "tiny_decode.yaml").write_text(TINY_DECODE)
    plain = _st(recipe)
    assert plain.returncode == 0, plain.stderr[-4000:]
    matching = _asr_model(recipe, 1, recipe / "asr_same.pth")
    other = _asr_model(recipe, 2, recipe / "asr_other.pth")
    init = _st(recipe, "--asr_init", str(matching), "--stop_stage", "6")
    refused = _st(recipe, "--asr_init", str(other), "--st_tag", "other", "--stop_stage", "6")
    return recipe, plain, init, refused


def test_all_stages_translate_and_score_bleu_with_signature(st_runs):
    recipe, plain, _, _ = st_runs
    decode = recipe / "exp" / "st_tiny_st" / "decode_tiny_decode" / "test"
    hyps = (decode / "text").read_text().splitlines()
    refs = (recipe / "data" / "test" / "text.de").read_text().splitlines()
    assert [h.split()[0] for h in hyps] == [r.split()[0] for r in refs]
    result = (decode / "score_bleu" / "result.txt").read_text()
    assert "nrefs:1" in result and "sacrebleu" in result.lower(), result
    results_md = (recipe / "exp" / "RESULTS.md").read_text()
    assert "ST results" in results_md and "BLEU" in results_md and "st_tiny_st" in results_md
    # the source side (transcript) is the ST model's src_text, the target side its text
    config = yaml.safe_load((recipe / "exp" / "st_tiny_st" / "config.yaml").read_text())
    data = {name: path for path, name, _ in config["train_data_path_and_name_and_type"]}
    assert data["text"].endswith("text.de") and data["src_text"].endswith("text.en")
    assert config["init_param"] == []


def test_asr_init_loads_encoder_and_normalisation(st_runs):
    recipe, _, init, _ = st_runs
    assert init.returncode == 0, init.stderr[-4000:]
    config = yaml.safe_load((recipe / "exp" / "st_tiny_st_asrinit" / "config.yaml").read_text())
    model = recipe / "asr_same.pth"
    assert config["init_param"] == [f"{model}:normalize:normalize", f"{model}:encoder:encoder"]
    assert (recipe / "exp" / "st_tiny_st_asrinit" / "valid.acc.best.pth").exists()


def test_asr_model_of_another_architecture_is_refused(st_runs):
    recipe, _, _, refused = st_runs
    assert refused.returncode != 0
    assert "asr_other.pth" in refused.stderr
    assert "checkpoint keys the ST model lacks: encoder.encoders.1." in refused.stderr
    assert not (recipe / "exp" / "st_other" / "checkpoint.pth").exists()
