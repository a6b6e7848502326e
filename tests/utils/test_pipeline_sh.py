"""utils/parse_options.sh and utils/pipeline.sh: Kaldi-style options and the fingerprinted stage runner."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """#!/usr/bin/env bash
# A test pipeline.
set -euo pipefail
stage=1
stop_stage=100
flag=false
name=default
fail_stage=0
. "{root}/utils/parse_options.sh"
. "{root}/utils/pipeline.sh"
work() {{ echo "ran $1 name=${{name}}" >> runs.txt; [ "$1" != "${{fail_stage}}" ]; }}
run_stage 1 "first" out "$(fingerprint "${{name}}")" work 1
run_stage 2 "second" out "$(fingerprint "${{name}}" out/.stages/stage1.done)" work 2
"""


def make(tmp_path):
    script = tmp_path / "pipe.sh"
    script.write_text(SCRIPT.format(root=ROOT))
    script.chmod(0o755)
    return lambda *args: subprocess.run(
        ["./pipe.sh", *args], cwd=tmp_path, capture_output=True, text=True
    )


def runs(tmp_path):
    return (
        (tmp_path / "runs.txt").read_text().splitlines() if (tmp_path / "runs.txt").exists() else []
    )


def test_options_are_parsed_the_kaldi_way(tmp_path):
    run = make(tmp_path)
    assert run("--name", "x", "--stop-stage", "1").returncode == 0
    assert runs(tmp_path) == ["ran 1 name=x"]
    bad = run("--no_such_option", "1")
    assert bad.returncode != 0 and "unknown option --no_such_option" in bad.stderr
    assert "takes true or false" in run("--flag", "yes").stderr
    assert "--name default" in run("--help").stdout


def test_stages_skip_when_done_and_redo_when_inputs_change(tmp_path):
    run = make(tmp_path)
    assert run().returncode == 0
    again = run()
    assert (
        "Stage 1: first: already done" in again.stderr
        and "Stage 2: second: already done" in again.stderr
    )
    assert runs(tmp_path) == ["ran 1 name=default", "ran 2 name=default"]
    assert run("--name", "other").returncode == 0  # a changed option redoes both stages
    assert runs(tmp_path)[2:] == ["ran 1 name=other", "ran 2 name=other"]


def test_a_failed_stage_leaves_no_marker_and_stops(tmp_path):
    run = make(tmp_path)
    out = run("--fail_stage", "1")
    assert out.returncode != 0 and "Stage 1 (first) failed" in out.stderr
    assert not (tmp_path / "out" / ".stages" / "stage1.done").exists()
    assert runs(tmp_path) == ["ran 1 name=default"]  # stage 2 never ran
    assert run().returncode == 0 and runs(tmp_path)[1:] == [
        "ran 1 name=default",
        "ran 2 name=default",
    ]
