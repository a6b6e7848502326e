"""utils/parse_options.sh: the header contract, one test per behaviour.

A stand-in pipeline (refuses what it does not know) and a stand-in recipe in front of it (declares its
own options and passes the rest on, as egs/<corpus>/<task>1/run.sh does) print what they were given.
"""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PIPELINE = """#!/usr/bin/env bash
# A stand-in pipeline.
set -euo pipefail
stage=1
use_lm=false
lm_weight=0.1
. "{root}/utils/parse_options.sh"
echo "pipeline stage=${{stage}} use_lm=${{use_lm}} lm_weight=${{lm_weight}} rest=$*"
"""

RECIPE = """#!/usr/bin/env bash
# A stand-in recipe.
set -euo pipefail
length=5
rotated=false
__options_pass_to=./pipeline.sh
. "{root}/utils/parse_options.sh"
echo "recipe length=${{length}} rotated=${{rotated}} pass_to=${{__options_pass_to:-unset}}"
./pipeline.sh --stage 2 "$@"
"""


@pytest.fixture
def scripts(tmp_path):
    for name, text in (("pipeline.sh", PIPELINE), ("recipe.sh", RECIPE)):
        script = tmp_path / name
        script.write_text(text.format(root=ROOT))
        script.chmod(0o755)

    def run(name, *args):
        return subprocess.run(
            [f"./{name}", *args], cwd=tmp_path, capture_output=True, text=True, timeout=30
        )

    return run


def test_options_set_declared_variables_with_dashes_or_underscores(scripts):
    out = scripts("pipeline.sh", "--lm-weight", "0.3", "--stage", "4", "positional")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "pipeline stage=4 use_lm=false lm_weight=0.3 rest=positional\n"


def test_unknown_option_is_refused_naming_it(scripts):
    out = scripts("pipeline.sh", "--lm_weights", "0 0.3")
    assert out.returncode != 0 and out.stdout == ""
    assert "unknown option --lm_weights" in out.stderr
    # Internal names of the parser are no options either.
    assert (
        "unknown option --__option_names" in scripts("pipeline.sh", "--__option_names", "x").stderr
    )


@pytest.mark.parametrize("value", ["yes", "1", "rm -rf x", "True", ""])
def test_booleans_take_only_true_or_false(scripts, value):
    out = scripts("pipeline.sh", "--use_lm", value)
    assert out.returncode != 0 and out.stdout == ""
    assert f"--use_lm takes true or false, not '{value}'" in out.stderr
    assert scripts("pipeline.sh", "--use_lm", "true").stdout.startswith(
        "pipeline stage=1 use_lm=true"
    )


def test_malformed_options_are_refused(scripts):
    assert "write options as '--name value'" in scripts("pipeline.sh", "--stage=3").stderr
    missing = scripts("pipeline.sh", "--stage")
    assert missing.returncode != 0 and "option --stage needs a value" in missing.stderr
    absent = scripts("pipeline.sh", "--config", "no/such.conf")
    assert absent.returncode != 0 and "--config: no such file: no/such.conf" in absent.stderr


def test_config_file_is_sourced_before_later_options(scripts, tmp_path):
    (tmp_path / "a.conf").write_text("stage=7\nlm_weight=0.2\n")
    out = scripts("pipeline.sh", "--config", "a.conf", "--stage", "8")
    assert out.stdout == "pipeline stage=8 use_lm=false lm_weight=0.2 rest=\n"


def test_help_prints_the_header_and_current_values(scripts):
    out = scripts("pipeline.sh", "--stage", "3", "--help")
    assert out.returncode == 0
    assert out.stdout.startswith("A stand-in pipeline.\n")
    assert "  --stage 3\n" in out.stdout and "  --use_lm false\n" in out.stdout
    assert "goes to" not in out.stdout


def test_pass_through_hands_undeclared_options_to_the_pipeline(scripts):
    out = scripts(
        "recipe.sh", "--lm_weight", "0.3", "--length", "7", "--use_lm", "true", "--rotated", "true"
    )
    assert out.returncode == 0, out.stderr
    # The recipe keeps its own options; the pass-through setting does not outlive the parsing.
    assert out.stdout.splitlines() == [
        "recipe length=7 rotated=true pass_to=unset",
        "pipeline stage=2 use_lm=true lm_weight=0.3 rest=",
    ]


def test_pass_through_keeps_values_with_spaces_order_and_positionals(scripts):
    out = scripts("recipe.sh", "--stage", "5", "--lm_weight", "0 0.3", "x y")
    # Later options win in the pipeline: the user's --stage 5 after the recipe's --stage 2.
    assert "pipeline stage=5 use_lm=false lm_weight=0 0.3 rest=x y" in out.stdout, out.stderr


def test_pass_through_still_refuses_unknown_options_in_the_pipeline(scripts):
    out = scripts("recipe.sh", "--no_such", "1")
    assert out.returncode != 0
    assert "pipeline.sh: unknown option --no_such" in out.stderr


def test_pass_through_validates_booleans_on_both_sides(scripts):
    recipe_side = scripts("recipe.sh", "--rotated", "maybe")
    assert recipe_side.returncode != 0 and recipe_side.stdout == ""
    assert "recipe.sh: --rotated takes true or false, not 'maybe'" in recipe_side.stderr
    pipeline_side = scripts("recipe.sh", "--use_lm", "echo")
    assert pipeline_side.returncode != 0
    assert "pipeline.sh: --use_lm takes true or false, not 'echo'" in pipeline_side.stderr


def test_pass_through_config_reaches_both_scripts(scripts, tmp_path):
    (tmp_path / "both.conf").write_text("length=9\nlm_weight=0.15\n")
    out = scripts("recipe.sh", "--config", "both.conf")
    assert out.stdout.splitlines() == [
        "recipe length=9 rotated=false pass_to=unset",
        "pipeline stage=2 use_lm=false lm_weight=0.15 rest=",
    ], out.stderr


def test_pass_through_help_names_the_pipeline(scripts):
    out = scripts("recipe.sh", "--help")
    assert out.returncode == 0
    assert out.stdout.startswith("A stand-in recipe.\n") and "  --length 5\n" in out.stdout
    assert "Every other option goes to ./pipeline.sh (./pipeline.sh --help)." in out.stdout


def test_a_config_file_declares_no_new_options(scripts, tmp_path):
    # Set by the file, the name is still not the recipe's: --stage goes on to the pipeline.
    (tmp_path / "stage.conf").write_text("stage=3\nlength=4\n")
    out = scripts("recipe.sh", "--config", "stage.conf", "--stage", "6")
    assert "pipeline stage=6 " in out.stdout, out.stderr
    refused = scripts("pipeline.sh", "--config", "stage.conf", "--length", "3")
    assert "unknown option --length" in refused.stderr
