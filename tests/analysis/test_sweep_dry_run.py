"""``sweep run --dry_run``: every invocation of a sweep planned by the pipelines' own stage fingerprints
(utils/pipeline.sh's PIPELINE_DRY_RUN), so a decoding that would retrain its model fails before any job."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from espnet_ext.analysis.sweep import load_sweep
from tests.recipes.recipe_fixture import make_recipe_copy

REPO = Path(__file__).resolve().parents[2]

# The sweeps of the real setups (a *mini* spec runs the embedded corpus, which the recipe tests run).
SPECS = [p for p in sorted(REPO.glob("egs/*/*/conf/sweeps/*.yaml")) if "mini" not in p.stem]
REAL_SPECS = [p for p in SPECS if yaml.safe_load(p.read_text()).get("kind") != "tune"]
TUNE_SPECS = [p for p in SPECS if p not in REAL_SPECS]
# Every corpus root of db.sh set (to a path that does not exist: nothing is read in a dry run), so that
# each run.sh takes its real-corpus branch, as on the cluster.
CORPORA = re.findall(r"^([A-Z][A-Z0-9_]*)=", (REPO / "egs/TEMPLATE/asr1/db.sh").read_text(), re.M)
# Data from outside the corpus that a run.sh wants given once, when its data is first prepared, and
# refuses to start without: present here as if prepared (LRS3 433h_self: VoxCeleb2-en mouth crops).
SITE_DATA = {("lrs3", "vsr1"): ["data/voxceleb2_en/video.scp"]}


def real_env(**extra: str) -> dict[str, str]:
    return {**os.environ, **{name: f"/nonexistent/{name.lower()}" for name in CORPORA}, **extra}


def real_recipe(spec: Path, tmp_path: Path) -> Path:
    """A copy of the spec's recipe dir, with the site data its run.sh wants."""
    corpus, task = spec.parts[-5], spec.parts[-4]
    recipe = make_recipe_copy(corpus, task, tmp_path)
    for path in SITE_DATA.get((corpus, task), []):
        (recipe / path).parent.mkdir(parents=True)
        (recipe / path).write_text("utt1 /site/utt1.npy\n")
    return recipe


def sweep(recipe: Path, spec: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "espnet_ext.analysis.sweep",
            "run",
            "--spec",
            spec,
            "--dry_run",
            *args,
        ],
        cwd=recipe,
        env=real_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def covering_runs(spec: Path) -> list[str]:
    """Runs whose invocations, together, include every decoding of the spec (greedily, the run with most
    decodings not yet covered first): every kind of invocation the spec makes, since a run's own options
    reach its training and its decodings alike. All runs of every spec would take ~10 min."""
    loaded = load_sweep(spec)
    todo = {decode.name: decode for decode in loaded.decodes}
    runs: list[str] = []
    while todo or not runs:
        best = max(loaded.runs, key=lambda r: sum(d.applies_to(r) for d in todo.values()))
        runs.append(best)
        todo = {name: d for name, d in todo.items() if not d.applies_to(best)}
    return runs


# As the specs' headers submit them: GPU jobs, so every invocation is planned with the GPU options.
GPU_CMD = "utils/slurm.py --config conf/slurm.conf --gpu 1 --num_threads 8"


@pytest.mark.parametrize("spec", REAL_SPECS, ids=lambda p: str(p.relative_to(REPO / "egs")))
def test_every_real_sweep_decodes_without_retraining(spec, tmp_path):
    recipe = real_recipe(spec, tmp_path)
    relative = str(spec.relative_to(spec.parents[2]))
    out = sweep(recipe, relative, "--runs", ",".join(covering_runs(spec)), "--cmd", GPU_CMD)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    # the pipelines planned the stages (none ran): each decoding invocation would decode
    assert "would run:" in out.stdout and not (recipe / "exp").exists()  # nothing written
    # every recipe takes the GPU options (a spec's own --ngpu, e.g. WMT's 8, stays)
    planned = [line for line in out.stdout.splitlines() if line.startswith("+ ")]
    assert all(" --ngpu " in x and " --gpu_inference true" in x for x in planned), planned
    assert "declares no" not in out.stderr, out.stderr
    if (
        spec.name == "paper_433h_self.yaml"
    ):  # the baseline's pseudo-labels are made once, not per run
        assert out.stdout.count("13 (pseudo-labels of voxceleb2_en)") == 1, out.stdout


SPEC = """
name: probe
command: ./run.sh
common: --cmd_backend local
tag_option: --asr_tag
train_stages: [9, 9]
decode_stages: [9, 11]
runs: {baseline: ""}
decodes:
  plain: ""
  seeded: --asr_args "--seed 3"
result: exp/asr_{tag}/{decode}/{set}/score_wer/result.json
metric: {key: wer, sets: [test]}
"""


def test_a_decoding_that_retrains_or_writes_nothing_fails(tmp_path):
    """The pipeline's own fingerprints decide: stage 9 is done after the training invocation unless a
    decoding changes a training option (--asr_args); a decoding outside the scoring stages writes nothing."""
    recipe = make_recipe_copy("librispeech", "asr1", tmp_path)
    (recipe / "conf/sweeps/probe.yaml").write_text(SPEC)
    out = sweep(recipe, "conf/sweeps/probe.yaml")
    assert out.returncode == 1
    problems = out.stderr.split("dry run:\n", 1)[1].splitlines()
    assert len(problems) == 1, out.stderr  # 'plain' reuses the model
    assert "--inference_tag seeded" in problems[0]
    assert "would run the training stage(s) 9 (ASR training" in problems[0]

    (recipe / "conf/sweeps/late.yaml").write_text(
        "extends: probe.yaml\ndecode_stages: [12, 12]\ndecodes: {plain: ''}\n"
    )
    out = sweep(recipe, "conf/sweeps/late.yaml")
    assert out.returncode == 1
    assert "would not write exp/asr_baseline/plain/test/score_wer/result.json" in out.stderr
    assert not (recipe / "exp").exists()  # a dry run writes no marker, nothing


@pytest.mark.parametrize("spec", TUNE_SPECS, ids=lambda p: str(p.relative_to(REPO / "egs")))
def test_every_real_tuning_decodes_without_retraining(spec, tmp_path):
    """A tuning spec (kind: tune) is what run.sh --lm_weights runs: under PIPELINE_DRY_RUN its training,
    each value's decoding, the tuned decoding and RESULTS.md are planned, not run."""
    recipe = real_recipe(spec, tmp_path / "copy")
    out = subprocess.run(
        ["./run.sh", "--use_lm", "true", "--lm_weights", "0.05 0.1"],
        cwd=recipe,
        env=real_env(PIPELINE_DRY_RUN=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert out.stderr.count("    would run: ") == 4  # training, two values, the tuned decoding
    assert "_tuned_lmw0.05 " in out.stderr and not (recipe / "exp").exists()
