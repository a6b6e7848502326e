"""utils/pipeline.sh's last-N averaging, the one place every pipeline uses: the training keeps the last N
epoch files whatever its keep_nbest_models says, a training of fewer than N epochs is refused before it starts,
and --skip_eval (decoding skipped) still makes the average that exports and other recipes read."""

import re
import subprocess
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """#!/usr/bin/env bash
set -euo pipefail
stage=1
stop_stage=100
skip_eval=false
inference_model=last2.pth
ngpu=0
num_nodes=1
. "{root}/utils/parse_options.sh"
. "{root}/utils/pipeline.sh"
train_cmd=./fake_cmd.sh
cuda_cmd=./fake_cmd.sh
skip_when "${{skip_eval}}" 9 10
train() {{ train_model exp/train.log -- python -m espnet_ext.bin.mt_train --config conf.yaml; }}
run_stage 8 "training" exp "$(fingerprint conf.yaml)" train
average_stage 9 exp
run_stage 9 "decoding" exp/decode "$(fingerprint exp/${{inference_model}})" touch decoded
"""

# The training is only recorded; the averaging job runs (its log first, as the job backends take it).
FAKE_CMD = """#!/usr/bin/env bash
case "$*" in
    *average_checkpoints*) log=$1; shift; mkdir -p "$(dirname "$log")"; exec "$@" > "$log" 2>&1 ;;
esac
printf '%s\\n' "$@" > launched.txt
"""


def make(tmp_path, config: str):
    (tmp_path / "pipe.sh").write_text(SCRIPT.format(root=ROOT))
    (tmp_path / "fake_cmd.sh").write_text(FAKE_CMD)
    for name in ("pipe.sh", "fake_cmd.sh"):
        (tmp_path / name).chmod(0o755)
    (tmp_path / "conf.yaml").write_text(config)
    return lambda *args: subprocess.run(
        ["./pipe.sh", *args], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )


def fake_epochs(exp: Path, epochs: int):
    for epoch in range(1, epochs + 1):
        torch.save({"w": torch.tensor([float(epoch)])}, exp / f"{epoch}epoch.pth")
    (exp / "latest.pth").symlink_to(f"{epochs}epoch.pth")


def test_training_keeps_the_last_epochs_and_skip_eval_still_averages(tmp_path):
    # the config keeps only the best epoch by validation accuracy: ESPnet would delete the last ones
    run = make(
        tmp_path, "max_epoch: 3\nbest_model_criterion:\n- [valid, acc, max]\nkeep_nbest_models: 1\n"
    )
    # training "ends" before averaging: the fake job runner only records the command it was given
    assert run("--stop_stage", "8").returncode == 0
    launched = (tmp_path / "launched.txt").read_text().split("\n")
    keep = launched.index("--best_model_criterion")
    assert launched[keep : keep + 3] == [
        "--best_model_criterion",
        "valid,acc,max",
        "train,total_count,max",
    ]
    assert launched[launched.index("--keep_nbest_models") + 1 :][:2] == ["1", "2"]
    fake_epochs(tmp_path / "exp", 3)
    done = run("--stage", "9", "--skip_eval", "true")
    assert done.returncode == 0, done.stderr
    assert torch.load(tmp_path / "exp" / "last2.pth")["w"].item() == 2.5  # epochs 2 and 3
    # a job of the backend (${train_cmd}), not the pipeline's shell: its log is the job's
    assert "averaged 2 models" in (tmp_path / "exp/log/average_last2.log").read_text()
    assert "Stage 9: decoding: skipped" in done.stderr and not (tmp_path / "decoded").exists()


def test_average_is_redone_only_when_the_training_wrote_new_epochs(tmp_path):
    run = make(tmp_path, "max_epoch: 3\n")
    assert run("--stop_stage", "8").returncode == 0
    fake_epochs(tmp_path / "exp", 2)
    assert run("--stage", "9").returncode == 0
    again = run("--stage", "9")
    assert "averaging into last2.pth: already done" in again.stderr, again.stderr
    torch.save({"w": torch.tensor([5.0])}, tmp_path / "exp" / "3epoch.pth")
    (tmp_path / "exp" / "latest.pth").unlink()
    (tmp_path / "exp" / "latest.pth").symlink_to("3epoch.pth")
    assert run("--stage", "9").returncode == 0
    assert (
        torch.load(tmp_path / "exp" / "last2.pth")["w"].item() == 3.5
    )  # epochs 2 and 3 (the new 3rd: 5.0)


def test_a_run_that_stops_before_training_passes_the_averaging_stage(tmp_path):
    # no experiment directory yet: the averaging stage's fingerprint must not fail the pipeline (set -e)
    out = make(tmp_path, "max_epoch: 3\n")("--stop_stage", "7")
    assert out.returncode == 0, out.stderr


def test_averaging_more_epochs_than_trained_is_refused_before_training(tmp_path):
    run = make(tmp_path, "max_epoch: 4\n")
    refused = run("--inference_model", "last10.pth")
    assert refused.returncode != 0
    assert "--inference_model last10.pth averages the last 10 epochs" in refused.stderr
    assert "runs 4 (max_epoch of conf.yaml" in refused.stderr
    assert not (tmp_path / "launched.txt").exists() and not (tmp_path / "exp").exists()


def test_other_models_change_nothing(tmp_path):
    run = make(tmp_path, "max_epoch: 1\nkeep_nbest_models: 1\n")
    assert run("--inference_model", "valid.acc.ave.pth", "--stop_stage", "8").returncode == 0
    launched = (tmp_path / "launched.txt").read_text()
    assert "--keep_nbest_models" not in launched and "--best_model_criterion" not in launched


def test_every_pipeline_averages_through_the_one_stage():
    pipelines = sorted((ROOT / "egs" / "TEMPLATE").glob("*/*.sh"))
    averaging = [p for p in pipelines if "last<N>.pth" in p.read_text()]
    assert {p.parent.name for p in averaging} >= {"asr1", "mt1", "st1"}
    for pipeline in pipelines:
        assert "espnet_ext.bin.average_checkpoints" not in pipeline.read_text(), pipeline
    for pipeline in averaging:
        assert re.search(r"^ *average_stage [0-9]+ ", pipeline.read_text(), re.M), pipeline
