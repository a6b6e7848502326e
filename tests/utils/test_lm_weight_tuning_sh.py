"""utils/lm_weight_tuning.sh: the LM options of --lm_text, and the pipeline run as it is or through the
LM-weight sweep (a stand-in pipeline and python record the commands they are given)."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

RECIPE = """#!/usr/bin/env bash
set -euo pipefail
lm_text=transcripts
lm_weights=""
__options_pass_to=./pipeline.sh
. "{root}/utils/parse_options.sh"
. "{root}/utils/lm_weight_tuning.sh"
run_with_lm ./pipeline.sh --train_set train --results_title "a title" -- "$@"
"""
PIPELINE = '#!/usr/bin/env bash\nprintf "%s|" "$0" "$@" >> ran.txt\n'
# path.sh of a recipe puts the venv first; here python only writes down what it was asked to run.
PATH_SH = 'python() { printf "%s|" python "$@" >> ran.txt; }\n'


def recipe(tmp_path):
    for name, text in (("run.sh", RECIPE.format(root=ROOT)), ("pipeline.sh", PIPELINE)):
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o755)
    (tmp_path / "path.sh").write_text(PATH_SH)

    def run(*args):
        out = subprocess.run(["./run.sh", *args], cwd=tmp_path, capture_output=True, text=True)
        ran = tmp_path / "ran.txt"
        commands = ran.read_text().split("|")[:-1] if ran.exists() else []
        ran.unlink(missing_ok=True)
        return out, commands

    return run


def test_the_pipeline_runs_with_the_lm_options_before_the_callers(tmp_path):
    run = recipe(tmp_path)
    out, commands = run("--train_set", "other")
    assert out.returncode == 0, out.stderr
    assert commands == [
        *("./pipeline.sh", "--train_set", "train", "--results_title", "a title"),
        *("--lm_tag", "transcripts", "--train_set", "other"),
    ]
    _, commands = run("--lm_text", "extended")
    assert commands[-4:] == ["--lm_tag", "extended", "--lm_train_text", "data/lm_extended/text"]


def test_a_weight_grid_runs_the_sweep_over_that_command(tmp_path):
    run = recipe(tmp_path)
    out, commands = run("--lm_weights", "0 0.1", "--lm_text", "extended", "--use_lm", "true")
    assert out.returncode == 0, out.stderr
    assert commands == [
        *("python", "-m", "espnet_ext.analysis.sweep", "tune"),
        *("--spec", "conf/sweeps/lm_weight.yaml", "--values", "0 0.1"),
        *("--label", "decode_lm_extended", "--"),
        *("./pipeline.sh", "--train_set", "train", "--results_title", "a title"),
        *("--lm_tag", "extended", "--lm_train_text", "data/lm_extended/text", "--use_lm", "true"),
    ]


def test_an_unknown_lm_text_is_refused_before_anything_runs(tmp_path):
    run = recipe(tmp_path)
    out, commands = run("--lm_text", "wiki")
    assert out.returncode == 1 and commands == []
    assert "--lm_text must be transcripts or extended, not 'wiki'" in out.stderr
