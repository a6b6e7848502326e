"""The librispeech mini recipe through the real Slurm backend: array jobs, training job, requeue,
decoding jobs, failure propagation.

The backend is what is tested here, not the recipe: every test branches from the session's tiny local
run (conftest.py; test_librispeech_recipe.py checks its stages) and sends only its own stages through
Slurm -- features as an array job into another dump dir, a training under its own tag (preempted and
requeued on the way), that model's decoding -- on the data the local run prepared.
"""

import os
import re
import subprocess
import time

import pytest
from recipe_fixture import TINY_ARGS, read_table, run

pytestmark = [pytest.mark.slurm, pytest.mark.xdist_group("librispeech_finished")]

# Two jobs per stage: features and decoding run as two-task Slurm arrays whose shards are merged.
SLURM_ARGS = [*TINY_ARGS, "--cmd_backend", "slurm", "--nj", "2", "--inference_nj", "2"]


@pytest.fixture
def recipe(librispeech_finished):
    return librispeech_finished[0]


def assert_slurm_job_logs(logs):
    assert logs
    for log in logs:
        text = log.read_text()
        assert re.search(r"SLURM_JOB_ID|slurm job|Slurm job", text, re.IGNORECASE), text[:500]
        assert "# Ended (code 0)" in text


def test_features_run_as_slurm_array_jobs(slurm_cluster, recipe):
    out = run(recipe, SLURM_ARGS + ["--stage", "2", "--stop_stage", "2", "--dumpdir", "dump_slurm"])
    assert out.returncode == 0, out.stderr[-4000:]
    # fbank ran as a 2-task array job; every task's log carries Slurm's job id and a clean footer.
    logs = sorted((recipe / "dump_slurm" / "fbank" / "train" / "log").glob("fbank.*.log"))
    assert [p.name for p in logs] == ["fbank.1.log", "fbank.2.log"]
    assert_slurm_job_logs(logs)
    for dset in ("train", "dev", "test"):
        slurm = read_table(recipe / "dump_slurm" / "fbank" / dset / "feats.scp")
        local = read_table(recipe / "dump" / "fbank" / dset / "feats.scp")
        assert list(slurm) == list(local)


def test_failed_slurm_job_stops_the_stage_with_its_log(slurm_cluster, recipe, tmp_path):
    (tmp_path / "not_a_corpus").mkdir()
    out = run(
        recipe,
        SLURM_ARGS + ["--stop_stage", "1", "--dumpdir", "dump_bad"],
        env={"LIBRISPEECH": str(tmp_path / "not_a_corpus")},
    )
    assert out.returncode != 0
    assert "data/log/data_prep.log" in out.stderr
    assert not (
        recipe / "data" / ".markers" / "train_clean_100" / ".stages" / "stage1.done"
    ).exists()


def test_gpu_request_is_refused_at_submit_time(slurm_cluster, recipe):
    out = run(
        recipe,
        SLURM_ARGS + ["--stage", "9", "--stop_stage", "9", "--ngpu", "1", "--asr_tag", "gpu"],
    )
    assert out.returncode != 0
    assert "Invalid generic resource" in out.stderr or "gres" in out.stderr, out.stderr[-3000:]
    assert not (recipe / "exp" / "asr_gpu" / ".stages" / "stage9.done").exists()


@pytest.fixture(scope="module")
def preempted_training(slurm_cluster, librispeech_finished):
    """Stage 9 as a Slurm job, requeued (what preemption does) once its first epoch is saved."""
    recipe = librispeech_finished[0]
    exp = recipe / "exp" / "asr_preempt"
    args = SLURM_ARGS + ["--stage", "9", "--stop_stage", "9", "--asr_tag", "preempt"]
    args += ["--asr_args", "--max_epoch 3"]
    proc = subprocess.Popen(
        ["./run.sh", *args],
        cwd=recipe,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=dict(os.environ),
        text=True,
    )
    deadline = time.time() + 600
    while not (exp / "1epoch.pth").exists():
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        assert time.time() < deadline, "no checkpoint after 600 s"
        time.sleep(0.2)
    job_ids = subprocess.run(
        ["squeue", "-h", "-o", "%i %j"], capture_output=True, text=True
    ).stdout.split("\n")
    train_jobs = [line.split()[0] for line in job_ids if "train" in line]
    assert train_jobs, job_ids
    subprocess.run(["scontrol", "requeue", train_jobs[0]], check=True)
    output, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, output[-3000:]
    return recipe, exp, output


def test_preempted_training_job_is_requeued_and_resumes(preempted_training):
    """A training job requeued mid-run restarts by itself and continues its epochs."""
    _, exp, output = preempted_training
    assert "WARNING: training exp/asr_preempt on CPUs (--ngpu 0) through Slurm" in output
    log = (exp / "train.log").read_text()
    assert "The training was resumed using" in log
    assert (exp / "3epoch.pth").exists() and (exp / ".stages" / "stage9.done").exists()


def test_the_slurm_trained_model_decodes_and_scores_through_sbatch(preempted_training):
    recipe, exp, _ = preempted_training
    args = ["--stage", "10", "--stop_stage", "12", "--asr_tag", "preempt", "--test_sets", "test"]
    out = run(recipe, SLURM_ARGS + args)
    assert out.returncode == 0, out.stderr[-4000:]
    decode = exp / "decode_tiny_decode" / "test"
    logs = sorted((decode / "logdir").glob("asr_inference.*.log"))
    assert [p.name for p in logs] == ["asr_inference.1.log", "asr_inference.2.log"]
    assert_slurm_job_logs(logs)
    assert len((decode / "text").read_text().splitlines()) == 6
    assert (decode / "score_wer" / "result.json").exists()
    assert "asr_preempt / decode_tiny_decode" in (recipe / "exp" / "RESULTS.md").read_text()
