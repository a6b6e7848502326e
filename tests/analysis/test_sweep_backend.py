"""The sweep on a GPU cluster: the preparation runs as jobs of --cmd, the jobs' GPUs reach every recipe
invocation (--ngpu/--gpu_inference, in the dry run alike), and a Slurm GPU job with one CPU is refused."""

import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from espnet_ext.analysis.sweep import backend_gpus, load_sweep
from espnet_ext.errors import ConfigError, InputError
from tests.analysis.test_sweep import FAKE_RECIPE, SPEC

REPO = Path(__file__).resolve().parents[2]

# The fake recipe of test_sweep.py, with what the driver asks of a real one: a --help in
# utils/parse_options.sh's format, and the pipelines' dry run (a row per stage in $PIPELINE_DRY_RUN/stages.tsv).
# Each real invocation is recorded in invocations.txt.
GPU_RECIPE = FAKE_RECIPE.replace(
    "set -euo pipefail\n",
    r"""set -euo pipefail
if [ "${1:-}" = --help ]; then
  printf 'A fake recipe.\nOptions (current values):\n  --asr_tag %s\n  --ngpu 0\n  --gpu_inference false\n' "''"
  exit 0
fi
if [ -n "${PIPELINE_DRY_RUN:-}" ]; then
  tag=""; decode=""
  while [ $# -gt 0 ]; do
    case "$1" in --asr_tag) tag=$2; shift ;; --inference_tag) decode=$2; shift ;; esac; shift
  done
  if [ -z "${tag}" ]; then row="1\tpreparation\t${PWD}/dump"
  elif [ -z "${decode}" ]; then row="9\ttraining\t${PWD}/exp/asr_${tag}"
  else row="10\tdecoding\t${PWD}/exp/asr_${tag}/${decode}"; fi
  printf "${row}\n" >> "${PIPELINE_DRY_RUN}/stages.tsv"
  exit 0
fi
echo "$0 $*" >> invocations.txt
""",
    1,
)

# A job backend that records each call (its options, log and command), then runs it as utils/run.py does.
RECORDING_BACKEND = """#!/usr/bin/env python3
import json
import sys

with open("backend_calls.jsonl", "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
from espnet_ext.jobs.cli import main

sys.exit(main(backend="local", prog="record.py"))
"""

GPU = ["--ngpu", "1", "--gpu_inference", "true"]


def executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture()
def recipe(tmp_path, monkeypatch):
    executable(tmp_path / "fake_run.sh", GPU_RECIPE)
    executable(tmp_path / "record.py", RECORDING_BACKEND)
    (tmp_path / "utils").symlink_to(REPO / "utils")
    (tmp_path / "sweep.yaml").write_text(SPEC)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf/slurm.conf").write_text(
        (REPO / "egs/TEMPLATE/asr1/conf/slurm.conf").read_text()
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def sweep(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "espnet_ext.analysis.sweep", "run", "--spec", "sweep.yaml", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_preparation_and_runs_are_jobs_of_the_backend_with_the_gpu_options(recipe):
    out = sweep("--cmd", "record.py --gpu 1 --mem 8G", "--max_jobs_run", "1")
    assert out.returncode == 0, out.stdout + out.stderr
    calls = [json.loads(line) for line in (recipe / "backend_calls.jsonl").read_text().splitlines()]
    # the preparation first, one job with the runs' resources, then the array; the task gets the GPUs
    assert calls[0] == [
        "--gpu",
        "1",
        "--mem",
        "8G",
        "exp/sweeps/demo/log/prepare.1.log",
        "./fake_run.sh",
        *GPU,
        "--stop_stage",
        "8",
    ]
    assert (
        calls[1][:6] == ["--gpu", "1", "--mem", "8G", "--max_jobs_run", "1"]
        and "JOB=1:3" in calls[1]
    )
    assert calls[1][-2:] == ["--ngpu", "1"] and len(calls) == 2
    log = (recipe / "exp/sweeps/demo/log/prepare.1.log").read_text()
    assert "--stop_stage 8" in log.splitlines()[0] and "# Ended (code 0)" in log
    assert "+ ./fake_run.sh --ngpu 1 --gpu_inference true --stop_stage 8" in out.stdout
    # every invocation the recipe got asks for the GPU: preparation, 3 trainings, 5 decodings
    executed = (recipe / "invocations.txt").read_text().splitlines()
    assert len(executed) == 9 and all(" --ngpu 1 --gpu_inference true " in x for x in executed)
    runs = json.loads((recipe / "exp/sweeps/demo/runs.json").read_text())
    assert runs["baseline"][0].startswith("./fake_run.sh --ngpu 1 --gpu_inference true ")
    values = json.loads((recipe / "exp/sweeps/demo/results.json").read_text())
    assert values["relaxed_cross_g0.2"]["lm"] == {"dev": 6.0, "test": 7.0}

    # The dry run with the same --cmd plans exactly the lines the real run executed, in its order.
    out = sweep("--cmd", "record.py --gpu=1 --mem 8G", "--dry_run")
    assert out.returncode == 0, out.stdout + out.stderr
    planned = [line[2:] for line in out.stdout.splitlines() if line.startswith("+ ")]
    assert planned == executed
    assert len((recipe / "backend_calls.jsonl").read_text().splitlines()) == 2  # nothing submitted


def test_without_gpus_the_lines_are_unchanged(recipe):
    out = sweep("--cmd", "record.py --mem 8G")
    assert out.returncode == 0, out.stdout + out.stderr
    executed = (recipe / "invocations.txt").read_text().splitlines()
    assert executed[0] == "./fake_run.sh --stop_stage 8" and not any("gpu" in x for x in executed)
    assert "--ngpu" not in (recipe / "backend_calls.jsonl").read_text().splitlines()[1]


def test_a_failed_preparation_names_its_log(recipe):
    executable(recipe / "fake_run.sh", '#!/usr/bin/env bash\necho "no corpus here" >&2\nexit 4\n')
    out = sweep()
    assert out.returncode != 0
    assert "preparation 1 './fake_run.sh --stop_stage 8' failed" in out.stderr
    assert "exp/sweeps/demo/log/prepare.1.log" in out.stderr
    assert "no corpus here" in (recipe / "exp/sweeps/demo/log/prepare.1.log").read_text()
    assert not (recipe / "exp/sweeps/demo/runs.json").exists()  # no run submitted


def test_the_spec_and_the_recipe_decide_over_the_gpu_options(recipe, capsys):
    sweep_ = load_sweep("sweep.yaml")
    assert sweep_.device_options() == []  # no GPUs: the recipe is not even asked
    sweep_.ngpu = 2
    assert sweep_.prepare_invocations() == [
        ["./fake_run.sh", "--ngpu", "2", "--gpu_inference", "true", "--stop_stage", "8"]
    ]
    # the spec's common wins over the job's GPUs
    (recipe / "own.yaml").write_text("extends: sweep.yaml\ncommon: --ngpu 4\n")
    own = load_sweep("own.yaml")
    own.ngpu = 2
    assert own.invocations("baseline")[0][:5] == [
        "./fake_run.sh",
        "--ngpu",
        "4",
        "--gpu_inference",
        "true",
    ]
    # a recipe (a wrapper) that declares no --gpu_inference: left out, with a warning, not refused
    executable(
        recipe / "fake_run.sh",
        "#!/usr/bin/env bash\nprintf 'Options (current values):\\n  --ngpu 0\\n"
        "Every other option goes to ./inner.sh (./inner.sh --help).\\n'\n",
    )
    executable(recipe / "inner.sh", "#!/usr/bin/env bash\nprintf '  --nj 4\\n'\n")
    wrapper = load_sweep("sweep.yaml")
    wrapper.ngpu = 1
    assert wrapper.invocations("baseline")[0][:3] == ["./fake_run.sh", "--ngpu", "1"]
    assert "--gpu_inference" not in wrapper.invocations("baseline")[1]
    assert "declares no --gpu_inference" in capsys.readouterr().err
    # ... down the pipeline it passes options to: there it is declared
    executable(recipe / "inner.sh", "#!/usr/bin/env bash\nprintf '  --gpu_inference false\\n'\n")
    passed = load_sweep("sweep.yaml")
    passed.ngpu = 1
    assert passed.invocations("baseline")[0][1:5] == GPU
    # a recipe that cannot list its options: which ones it takes is unknown, so refused
    executable(recipe / "fake_run.sh", "#!/usr/bin/env bash\nexit 2\n")
    broken = load_sweep("sweep.yaml")
    broken.ngpu = 1
    with pytest.raises(
        InputError, match=r"sweep.yaml: key 'command': './fake_run.sh --help' failed"
    ):
        broken.invocations("baseline")


def test_backend_gpus_parses_the_job_cli_and_refuses_a_slurm_gpu_job_with_one_cpu(recipe):
    assert backend_gpus("utils/run.py") == 0
    assert backend_gpus("utils/run.py --gpu 1") == 1  # local: the machine's GPUs, its own cores
    assert backend_gpus("utils/slurm.py --config conf/slurm.conf") == 0
    assert backend_gpus("utils/slurm.py --gpu=2 --num-threads 16") == 2
    with pytest.raises(ConfigError, match="one CPU.*data loader.*Add --num_threads N"):
        backend_gpus("utils/slurm.py --gpu 1 --mem 16G")
    # a cluster's config may give the CPUs (or the GPUs) by default
    base = (REPO / "egs/TEMPLATE/asr1/conf/slurm.conf").read_text()
    (recipe / "conf/cpus.conf").write_text(base + "default num_threads=8\n")
    assert backend_gpus("utils/slurm.py --config conf/cpus.conf --gpu 1") == 1
    (recipe / "conf/gpus.conf").write_text(base.replace("default gpu=0", "default gpu=1"))
    with pytest.raises(ConfigError, match="1 GPU"):
        backend_gpus("utils/slurm.py --config conf/gpus.conf")
    with pytest.raises(ConfigError, match="--gpu 'one'"):
        backend_gpus("utils/slurm.py --gpu one")


def test_a_slurm_gpu_job_without_cpus_is_refused_before_anything_runs(recipe):
    for dry_run in ([], ["--dry_run"]):
        out = sweep("--cmd", "utils/slurm.py --config conf/slurm.conf --gpu 1", *dry_run)
        assert out.returncode == 1, out.stdout + out.stderr
        assert "no --num_threads" in out.stderr and "--num_threads 8" in out.stderr, out.stderr
        assert not (recipe / "prepared.txt").exists() and not (recipe / "exp").exists()
        assert not (recipe / "invocations.txt").exists()


def test_spec_headers_and_docs_give_slurm_gpu_jobs_their_cpus():
    """Every sweep command shown with a Slurm GPU --cmd also gives --num_threads (else it is refused)."""
    shown = []
    for path in [
        *REPO.glob("egs/*/*/conf/sweeps/*.yaml"),
        *REPO.glob("egs/*/*/README.md"),
        *REPO.glob("docs/*.md"),
        REPO / "README.md",
    ]:
        text = " ".join(path.read_text().split())  # commands wrapped over lines, too
        for part in text.split('--cmd "')[1:]:
            cmd = part.split('"')[0]
            if cmd.startswith("utils/slurm.py"):
                words = shlex.split(cmd)
                shown.append(cmd)
                if "--gpu" in words:
                    assert "--num_threads" in words, f'{path.relative_to(REPO)}: --cmd "{cmd}"'
    assert len(shown) >= 20
