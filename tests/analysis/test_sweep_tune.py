"""Sweep driver, ``kind: tune``: a decoding option of one model over a grid (the LM weight λ), tuned on
the development set and used for test, through a stand-in recipe that scores each λ by a known curve."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from espnet_ext.analysis.sweep import load_sweep, load_tuning
from espnet_ext.errors import ConfigError, InputError

REPO = Path(__file__).resolve().parents[2]

# Records every call; "decodes" by writing BLEU = 30 - 100 * (λ - 0.1)^2 on valid (best λ = 0.1) and
# 20 + λ on test; --print_exp prints the experiment dir after a line of noise.
FAKE_RECIPE = r"""#!/usr/bin/env bash
set -euo pipefail
echo "$*" >> calls.txt
tag=""; sets=""; lmw=""; print_exp=false; notes=""
while [ $# -gt 0 ]; do
  case "$1" in
    --inference_tag) tag=$2; shift ;;
    --test_sets) sets=$2; shift ;;
    --inference_args) lmw=${2##* }; shift ;;
    --print_exp) print_exp=$2; shift ;;
    --results_notes) notes=$2; shift ;;
    *) ;;
  esac
  shift
done
if [ "${print_exp}" = true ]; then echo "noise"; echo exp/mt_model; exit 0; fi
[ -z "${notes}" ] || { echo "${notes}" > notes.txt; exit 0; }
[ -n "${tag}" ] || exit 0
for set in ${sets}; do
  mkdir -p "exp/mt_model/${tag}/${set}/score_bleu"
  python3 -c "import json, sys; w = float('${lmw}'); json.dump({'bleu': \
    30 - 100 * (w - 0.1) ** 2 if '${set}' == 'valid' else 20 + w}, sys.stdout)" \
    > "exp/mt_model/${tag}/${set}/score_bleu/result.json"
done
"""

SPEC = REPO / "egs" / "iwslt14" / "mt1" / "conf" / "sweeps" / "lm_weight.yaml"


@pytest.fixture()
def recipe(tmp_path, monkeypatch):
    script = tmp_path / "fake_mt.sh"
    script.write_text(FAKE_RECIPE)
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def tune(*args):
    return subprocess.run(
        [sys.executable, "-m", "espnet_ext.analysis.sweep", "tune", "--spec", str(SPEC), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_the_recipe_spec_is_the_papers_lm_weight_grid():
    tuning = load_tuning(SPEC)
    assert tuning.values == ["0", "0.05", "0.1", "0.15", "0.2"]  # A.3.3
    assert (tuning.tune_set, tuning.test_sets, tuning.metric["key"]) == ("valid", "test", "bleu")
    assert tuning.metric["higher_is_better"] is True


def test_grid_expands_into_one_decoding_per_value_then_the_tuned_one():
    tuning = load_tuning(SPEC, values="0 0.3")
    base = ["./mt.sh", "--use_lm", "true", "--stage", "4"]
    lines = [shlex.join(line) for line in tuning.grid_invocations(base, "decode_lm_extended")]
    assert lines == [
        "./mt.sh --use_lm true --stage 4 --use_lm true --stop_stage 8",
        "./mt.sh --use_lm true --stage 4 --use_lm true --stage 9 --stop_stage 10 --test_sets valid "
        "--inference_tag decode_lm_extended_lmw0 --inference_args '--lm_weight 0'",
        "./mt.sh --use_lm true --stage 4 --use_lm true --stage 9 --stop_stage 10 --test_sets valid "
        "--inference_tag decode_lm_extended_lmw0.3 --inference_args '--lm_weight 0.3'",
    ]
    assert shlex.join(tuning.tuned_invocation(base, "decode_lm_extended", "0.3")) == (
        "./mt.sh --use_lm true --stage 4 --use_lm true --stage 9 --stop_stage 10 --test_sets test "
        "--inference_tag decode_lm_extended_tuned_lmw0.3 --inference_args '--lm_weight 0.3'"
    )
    report = tuning.report_invocation(base, "decode_lm_extended", "0.3", 75.4)
    assert report[:-1] == [*base, "--use_lm", "true", "--stage", "11", "--results_notes"]
    assert report[-1] == (
        "LM weight tuned on valid among {0, 0.3} (rows decode_lm_extended_lmw<value>): best 0.3, "
        "used for test (row decode_lm_extended_tuned_lmw0.3). This LM weight grid invocation "
        "(with any stages it had to run) took 1 min 15 s."
    )


def test_tune_picks_the_best_on_valid_and_decodes_only_test_with_it(recipe):
    out = tune("--values", "0 0.05 0.1 0.2", "--label", "lm", "--", "./fake_mt.sh", "--x", "y z")
    assert out.returncode == 0, out.stderr
    assert "LM weight 0.1 gives the best valid BLEU; decoding test with it" in out.stderr
    assert "LM weight 0.1\tbleu 30.00\t<- best" in out.stderr
    calls = (recipe / "calls.txt").read_text().splitlines()
    assert len(calls) == 1 + 4 + 1 + 1 + 1  # train, 4 valid decodings, exp query, test, report
    assert all(call.startswith("--x y z ") for call in calls)
    exp = recipe / "exp" / "mt_model"
    assert sorted(p.name for p in exp.iterdir()) == [
        "lm_lmw0",
        "lm_lmw0.05",
        "lm_lmw0.1",
        "lm_lmw0.2",
        "lm_tuned_lmw0.1",
    ]
    assert [p.name for p in (exp / "lm_tuned_lmw0.1").iterdir()] == ["test"]
    test = json.loads((exp / "lm_tuned_lmw0.1" / "test" / "score_bleu" / "result.json").read_text())
    assert test == {"bleu": pytest.approx(20.1)}
    assert "best 0.1, used for test (row lm_tuned_lmw0.1)" in (recipe / "notes.txt").read_text()


def test_a_tie_goes_to_the_value_listed_first(recipe):
    # 0 and 0.2 score the same (30 - 1): listed first, 0.2 wins.
    out = tune("--values", "0.2 0", "--", "./fake_mt.sh")
    assert out.returncode == 0, out.stderr
    assert "LM weight 0.2 gives the best valid BLEU" in out.stderr


def test_a_failed_step_stops_the_grid_naming_the_command(recipe):
    (recipe / "fake_mt.sh").write_text("#!/usr/bin/env bash\nexit 3\n")
    out = tune("--values", "0 0.1", "--", "./fake_mt.sh")
    assert out.returncode != 0
    assert (
        "lm_weight grid: './fake_mt.sh --use_lm true --stop_stage 8' failed with exit code 3"
        in (out.stderr)
    )


def test_a_missing_result_names_the_file(recipe):
    # A recipe that "decodes" without scoring: no result file for the first value.
    (recipe / "fake_mt.sh").write_text(
        '#!/usr/bin/env bash\nfor a; do [ "$a" = --print_exp ] && echo exp/m; done; exit 0\n'
    )
    out = tune("--values", "0 0.1", "--", "./fake_mt.sh")
    assert out.returncode != 0
    assert "exp/m/decode_lmw0/valid/score_bleu/result.json" in out.stderr
    assert "does not exist" in out.stderr


def test_bad_grids_are_refused_naming_the_key(tmp_path):
    with pytest.raises(ConfigError, match="--values.*no values"):
        load_tuning(SPEC, values=" ")
    with pytest.raises(ConfigError, match=r"--values.*listed twice: \['0.1'\]"):
        load_tuning(SPEC, values="0 0.1 0.1")
    spec = SPEC.read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(spec.replace('tag: "{label}_lmw{value}"', 'tag: "{label}_lmw"'))
    with pytest.raises(InputError, match=r"bad.yaml.*grid.tag.*must contain \{value\}"):
        load_tuning(bad)
    bad.write_text(spec.replace('tag: "{label}_lmw{value}"', 'tag: "{lbl}_lmw{value}"'))
    with pytest.raises(InputError, match=r"grid.tag.*only \{label\} and \{value\}"):
        load_tuning(bad)
    bad.write_text(spec.replace("values: [0, 0.05, 0.1, 0.15, 0.2]", "values: 0.1"))
    with pytest.raises(ConfigError, match="grid.values.*expected a list"):
        load_tuning(bad)
    bad.write_text(spec.replace("  tune_set: valid\n", ""))
    with pytest.raises(InputError, match="bad.yaml.*grid.*missing tune_set"):
        load_tuning(bad)


def test_a_spec_of_the_other_kind_is_refused_naming_the_command(tmp_path):
    with pytest.raises(InputError, match="kind 'tune', not 'table'.*sweep tune"):
        load_sweep(SPEC)
    table = REPO / "egs" / "iwslt14" / "mt1" / "conf" / "sweeps" / "paper.yaml"
    with pytest.raises(InputError, match="kind 'table', not 'tune'.*run / collect"):
        load_tuning(table)
