"""Sweep driver: spec expansion, the recipe invocations, a real run through the local job backend, collection."""

import json
import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from espnet_ext.analysis.sweep import collect, load_sweep, select_tuned
from espnet_ext.errors import InputError

REPO = Path(__file__).resolve().parents[2]

# A stand-in recipe: "trains" by writing a model file, "decodes" by writing result.json with a WER that
# depends on the run's options (so the collected table can be checked).
FAKE_RECIPE = r"""#!/usr/bin/env bash
set -euo pipefail
tag=""; decode=""; stage=1; variant=baseline; gamma=0; lm=false; seed=0
while [ $# -gt 0 ]; do
  case "$1" in
    --asr_tag) tag=$2; shift ;;
    --inference_tag) decode=$2; shift ;;
    --stage) stage=$2; shift ;;
    --attention_variant) variant=$2; shift ;;
    --relax_gamma) gamma=$2; shift ;;
    --use_lm) lm=$2; shift ;;
    --asr_args) seed=${2##* }; shift ;;
    *) ;;
  esac
  shift
done
echo "$@" >> calls.txt
[ -n "${tag}" ] || { echo prepared >> prepared.txt; exit 0; }
if [ "${stage}" = 9 ]; then mkdir -p "exp/asr_${tag}"; touch "exp/asr_${tag}/model"; exit 0; fi
[ -f "exp/asr_${tag}/model" ] || { echo "not trained" >&2; exit 1; }
for set in dev test; do
  mkdir -p "exp/asr_${tag}/${decode}/${set}/score_wer"
  wer=$(python3 -c "print(10 - ${gamma} * 10 - (2 if '${lm}' == 'true' else 0)
    + ${seed} * 0.1 + (1 if '${set}' == 'test' else 0))")
  echo "{\"wer\": ${wer}}" > "exp/asr_${tag}/${decode}/${set}/score_wer/result.json"
done
"""

SPEC = """
name: demo
command: ./fake_run.sh
tag_option: --asr_tag
train_stages: [9, 9]
decode_stages: [10, 11]
prepare: ["--stop_stage 8"]
runs: {baseline: --attention_variant baseline}
gamma_grid: {relaxed_cross: [0.1, 0.2]}
decodes:
  no_lm: ""
  lm: {options: --use_lm true, runs: [relaxed_cross]}
result: exp/asr_{tag}/{decode}/{set}/score_wer/result.json
metric: {key: wer, sets: [dev, test]}
analyses:
  - kind: gamma
    title: "Fig: gamma"
    set: dev
    baseline: baseline
    decodes: {relaxed_cross: no_lm}
"""


@pytest.fixture()
def recipe(tmp_path, monkeypatch):
    script = tmp_path / "fake_run.sh"
    script.write_text(FAKE_RECIPE)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "utils").symlink_to(REPO / "utils")
    (tmp_path / "sweep.yaml").write_text(SPEC)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_spec_expands_grid_and_seeds(recipe):
    sweep = load_sweep("sweep.yaml")
    assert list(sweep.runs) == ["baseline", "relaxed_cross_g0.1", "relaxed_cross_g0.2"]
    assert sweep.runs["relaxed_cross_g0.2"] == "--attention_variant relaxed_cross --relax_gamma 0.2"
    lines = [shlex.join(line) for line in sweep.invocations("relaxed_cross_g0.1")]
    assert lines == [
        "./fake_run.sh --attention_variant relaxed_cross --relax_gamma 0.1 --asr_tag relaxed_cross_g0.1 "
        "--stage 9 --stop_stage 9",
        "./fake_run.sh --attention_variant relaxed_cross --relax_gamma 0.1 --asr_tag relaxed_cross_g0.1 "
        "--inference_tag no_lm --stage 10 --stop_stage 11",
        "./fake_run.sh --attention_variant relaxed_cross --relax_gamma 0.1 --asr_tag relaxed_cross_g0.1 --use_lm true "
        "--inference_tag lm --stage 10 --stop_stage 11",
    ]
    assert (
        len(sweep.invocations("baseline")) == 2
    )  # the LM decoding is restricted to relaxed_cross runs

    (recipe / "seeds.yaml").write_text(
        SPEC + 'seeds: [1, 2]\nseed_option: --asr_args "--seed {seed}"\n'
    )
    seeded = load_sweep("seeds.yaml")
    assert "baseline_seed2" in seeded.runs and seeded.runs["baseline_seed2"].endswith(
        '--asr_args "--seed 2"'
    )


def test_bad_specs_name_the_file(recipe):
    (recipe / "bad.yaml").write_text("name: x\n")
    with pytest.raises(InputError, match="bad.yaml.*missing command"):
        load_sweep("bad.yaml")
    (recipe / "bad2.yaml").write_text(SPEC.replace("runs: [relaxed_cross]", "runs: [nope]"))
    with pytest.raises(InputError, match="unknown runs"):
        load_sweep("bad2.yaml")
    # decodings write under their inference tag: a fixed directory would never hold their results
    (recipe / "bad3.yaml").write_text(SPEC.replace("/{decode}/", "/decode_asr/"))
    with pytest.raises(InputError, match="bad3.yaml.*key 'result'.*must contain {decode}"):
        load_sweep("bad3.yaml")


def test_extends_starts_from_another_spec_and_replaces_whole_keys(recipe):
    (recipe / "noisy.yaml").write_text(
        "extends: sweep.yaml\nname: noisy\ncommon: --dumpdir dump_noisy\n"
        "result: exp_noisy/{tag}/{decode}/{set}.json\n"
    )
    base, noisy = load_sweep("sweep.yaml"), load_sweep("noisy.yaml")
    assert (noisy.name, noisy.common, noisy.result) == (
        "noisy",
        "--dumpdir dump_noisy",
        "exp_noisy/{tag}/{decode}/{set}.json",
    )
    assert noisy.runs == base.runs and noisy.decodes == base.decodes
    assert noisy.analyses == base.analyses and noisy.metric == base.metric
    assert shlex.join(noisy.invocations("baseline")[0]).startswith(
        "./fake_run.sh --dumpdir dump_noisy"
    )
    (recipe / "loop_a.yaml").write_text("extends: loop_b.yaml\n")
    (recipe / "loop_b.yaml").write_text("extends: loop_a.yaml\n")
    with pytest.raises(InputError, match="loop_b.yaml.*key 'extends'.*extends loop_a.yaml"):
        load_sweep("loop_a.yaml")
    (recipe / "orphan.yaml").write_text("extends: nowhere.yaml\n")
    with pytest.raises(InputError, match="orphan.yaml.*nowhere.yaml, which does not exist"):
        load_sweep("orphan.yaml")


def path_without_our_python() -> str:
    ours = str(Path(sys.executable).parent)
    return os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep) if d != ours)


def test_run_through_the_local_backend_and_collect(recipe):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "espnet_ext.analysis.sweep",
            "run",
            "--spec",
            "sweep.yaml",
            "--results_md",
            "R.md",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        # No activated environment: the backend script must run under the sweep's own interpreter.
        env={**os.environ, "PYTHONPATH": str(REPO), "PATH": path_without_our_python()},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert (recipe / "prepared.txt").read_text() == "prepared\n"
    for n in (1, 2, 3):
        assert (recipe / f"exp/sweeps/demo/log/run.{n}.log").exists()
    values = json.loads((recipe / "exp/sweeps/demo/results.json").read_text())
    assert values["relaxed_cross_g0.2"]["lm"] == {"dev": 6.0, "test": 7.0}
    assert values["baseline"] == {"no_lm": {"dev": 10.0, "test": 11.0}}
    table = (recipe / "R.md").read_text()
    assert "| relaxed_cross (no_lm) | 10.00 | 9.00 | 8.00 |" in table
    assert (recipe / "exp/sweeps/demo/fig.png").stat().st_size > 1000
    # RESULTS.md links its own copy of the figure, beside it.
    assert "![Fig: gamma](figures/fig.png)" in table
    assert (recipe / "figures/fig.png").stat().st_size > 1000
    # A rerun of one task after deleting a result redoes only what the fake recipe is asked to do.
    assert collect(load_sweep("sweep.yaml"))["relaxed_cross_g0.1"]["no_lm"]["test"] == 10.0


def test_runs_option_runs_only_the_named_runs(recipe):
    def sweep(*args):
        return subprocess.run(
            [sys.executable, "-m", "espnet_ext.analysis.sweep", *args, "--spec", "sweep.yaml"],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )

    out = sweep("run", "--runs", "relaxed_cross_g0.2")
    assert out.returncode == 0, out.stdout + out.stderr
    assert (recipe / "prepared.txt").read_text() == "prepared\n"
    assert list(json.loads((recipe / "exp/sweeps/demo/runs.json").read_text())) == [
        "relaxed_cross_g0.2"
    ]
    assert not (recipe / "exp/sweeps/demo/log/run.2.log").exists()
    values = json.loads((recipe / "exp/sweeps/demo/results.json").read_text())
    assert values["relaxed_cross_g0.2"]["lm"] == {"dev": 6.0, "test": 7.0}
    # the runs not asked for are left alone: collected as not run yet
    assert values["baseline"] == {"no_lm": {"dev": None, "test": None}}
    assert not (recipe / "exp/asr_baseline").exists()

    # the second half on another day: both halves' results collected together
    out = sweep("run", "--runs", "baseline relaxed_cross_g0.1")
    assert out.returncode == 0, out.stdout + out.stderr
    values = json.loads((recipe / "exp/sweeps/demo/results.json").read_text())
    assert values["baseline"]["no_lm"] == {"dev": 10.0, "test": 11.0}
    assert values["relaxed_cross_g0.1"]["no_lm"] == {"dev": 9.0, "test": 10.0}
    assert values["relaxed_cross_g0.2"]["no_lm"] == {"dev": 8.0, "test": 9.0}

    out = sweep("run", "--runs", "baseline,relaxed_self")
    assert out.returncode != 0
    assert "sweep.yaml" in out.stderr and "runs" in out.stderr and "relaxed_self" in out.stderr
    assert (recipe / "prepared.txt").read_text() == "prepared\n" * 2  # refused before preparing


def test_failed_run_is_reported_with_its_log(recipe):
    (recipe / "fake_run.sh").write_text(
        "#!/usr/bin/env bash\n[ \"$*\" = '--stop_stage 8' ] && exit 0\nexit 3\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "espnet_ext.analysis.sweep", "run", "--spec", "sweep.yaml"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert out.returncode != 0
    assert "exp/sweeps/demo/log/run.<n>.log" in out.stderr
    assert "exit code 3" in (recipe / "exp/sweeps/demo/log/run.1.log").read_text()


@pytest.mark.slurm
def test_runs_become_one_slurm_array_job(slurm_cluster, recipe):
    """With the recipe's Slurm command every run is a task of one sbatch array; the table is the same."""
    (recipe / "conf").mkdir()
    (recipe / "conf" / "slurm.conf").write_text(
        (REPO / "egs/TEMPLATE/asr1/conf/slurm.conf").read_text()
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "espnet_ext.analysis.sweep",
            "run",
            "--spec",
            "sweep.yaml",
            "--cmd",
            "utils/slurm.py --config conf/slurm.conf",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert len(re.findall(r"slurm: submitted job \d+ \(3 tasks\)", out.stderr)) == 1, out.stderr
    for n in (1, 2, 3):
        log = (recipe / f"exp/sweeps/demo/log/run.{n}.log").read_text()
        assert re.search(rf"\(Slurm job \d+, task {n}\)", log) and "# Ended (code 0)" in log, log
    values = json.loads((recipe / "exp/sweeps/demo/results.json").read_text())
    assert values["relaxed_cross_g0.2"]["lm"] == {"dev": 6.0, "test": 7.0}


RECIPE_SPECS = sorted(REPO.glob("egs/*/*/conf/sweeps/*.yaml"))
TABLE_SPECS = [p for p in RECIPE_SPECS if yaml.safe_load(p.read_text()).get("kind") != "tune"]


def test_every_recipe_spec_is_a_table_or_a_tuning():
    from espnet_ext.analysis.sweep import load_tuning

    for spec in set(RECIPE_SPECS) - set(TABLE_SPECS):  # tunings: tests/analysis/test_sweep_tune.py
        assert load_tuning(spec).values
    assert len(TABLE_SPECS) >= 8


@pytest.mark.parametrize("spec", TABLE_SPECS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_recipe_sweep_spec_loads_and_renders_before_any_run(spec, tmp_path, monkeypatch):
    """A committed spec names real runs and analyses; its tables render (empty cells) before anything ran."""
    from espnet_ext.analysis.tables import render_analyses

    monkeypatch.chdir(spec.parents[2])
    sweep = load_sweep(spec.relative_to(spec.parents[2]))
    assert sweep.runs and sweep.analyses
    # the recipe's run.sh, or a pipeline of the recipe dir (europarl: ./asr.sh)
    for run in sweep.runs:
        command = sweep.invocations(run)[0][0]
        assert command.startswith("./") and (spec.parents[2] / command).is_file()
    empty = {
        run: {d.name: {s: None for s in sweep.sets} for d in sweep.decodes if d.applies_to(run)}
        for run in sweep.runs
    }
    select_tuned(
        sweep, empty
    )  # a decoding tuned per run: its grid's best, as write_collection adds
    tables, _ = render_analyses(sweep, lambda key: empty, tmp_path)
    assert len(tables) == len(sweep.analyses)
