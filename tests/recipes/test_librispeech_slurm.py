"""The librispeech mini recipe through the real Slurm backend: array jobs, training job, failure propagation."""

import re

import pytest
from recipe_fixture import TINY_ARGS, run, tiny_librispeech_recipe

pytestmark = pytest.mark.slurm

# The backend is what is tested here, not the model: a smaller corpus and one epoch (the local run in
# test_librispeech_recipe.py covers the full tiny setup).
SLURM_ARGS = [
    *TINY_ARGS[: TINY_ARGS.index("--local_data_opts")],
    "--local_data_opts",
    "--mini_splits train=20,dev=4,test=4 --mini_lm_sentences 50 --mini_lm_wide_sentences 20",
    "--asr_args",
    "--max_epoch 1",
]


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    return tiny_librispeech_recipe(tmp_path_factory.mktemp("slurm_recipe"))


def test_recipe_runs_through_sbatch(slurm_cluster, recipe):
    out = run(recipe, SLURM_ARGS + ["--cmd_backend", "slurm", "--stop_stage", "11"])
    assert out.returncode == 0, out.stderr[-4000:]
    # fbank ran as a 2-task array job; every task's log carries Slurm's job id and a clean footer.
    logs = sorted((recipe / "dump" / "fbank" / "train" / "log").glob("fbank.*.log"))
    assert [p.name for p in logs] == ["fbank.1.log", "fbank.2.log"]
    for log in logs:
        text = log.read_text()
        assert re.search(r"SLURM_JOB_ID|slurm job|Slurm job", text, re.IGNORECASE), text[:500]
        assert "# Ended (code 0)" in text
    assert (
        recipe
        / "exp"
        / "asr_tiny_asr"
        / "decode_tiny_decode"
        / "test"
        / "score_wer"
        / "result.json"
    ).exists()


def test_failed_slurm_job_stops_the_stage_with_its_log(slurm_cluster, recipe, tmp_path):
    (tmp_path / "not_a_corpus").mkdir()
    out = run(
        recipe,
        SLURM_ARGS + ["--cmd_backend", "slurm", "--stop_stage", "1", "--dumpdir", "dump_bad"],
        env={"LIBRISPEECH": str(tmp_path / "not_a_corpus")},
    )
    assert out.returncode != 0
    assert "data/log/data_prep.log" in out.stderr
    assert not (recipe / "dump_bad" / ".stages" / "stage1.done").exists()


def test_gpu_request_is_refused_at_submit_time(slurm_cluster, recipe):
    out = run(
        recipe,
        SLURM_ARGS
        + [
            "--cmd_backend",
            "slurm",
            "--stage",
            "9",
            "--stop_stage",
            "9",
            "--ngpu",
            "1",
            "--asr_tag",
            "gpu",
        ],
    )
    assert out.returncode != 0
    assert "Invalid generic resource" in out.stderr or "gres" in out.stderr, out.stderr[-3000:]
    assert not (recipe / "exp" / "asr_gpu" / ".stages" / "stage9.done").exists()


def test_preempted_training_job_is_requeued_and_resumes(slurm_cluster, recipe):
    """A training job requeued mid-run (what preemption does) restarts by itself and continues its epochs."""
    import os
    import subprocess
    import time

    exp = recipe / "exp" / "asr_preempt"
    args = SLURM_ARGS + [
        "--cmd_backend",
        "slurm",
        "--stage",
        "9",
        "--stop_stage",
        "9",
        "--asr_tag",
        "preempt",
        "--asr_args",
        "--max_epoch 3",
    ]
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
    log = (exp / "train.log").read_text()
    assert "The training was resumed using" in log
    assert (exp / "3epoch.pth").exists() and (exp / ".stages" / "stage9.done").exists()
