"""Heavy steps of the pipelines run as ${train_cmd} jobs, not in the pipeline's shell (the login node with
--cmd_backend slurm): add_token_dim over the shape files, mt.sh's copy of the data tables; and the per-set steps
side by side: mt.sh's filtering of the training and validation sets, asr.sh's validation of an unlabeled video set
with the labelled ones. Driven with the local backend (utils/run.py), whose logs have a header and a footer."""

import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
from template_recipe import template_recipe

ROOT = Path(__file__).resolve().parents[2]


def ran_as_job(log: Path) -> bool:
    """LOG is a job log of the runner that ended well: its header and its footer."""
    text = log.read_text()
    return "# Started at " in text and "# Ended (code 0)" in text


def pipeline_step(tmp_path, train_cmd, step, options=""):
    """Run STEP (a utils/pipeline.sh function call) with ${train_cmd} TRAIN_CMD in TMP_PATH."""
    script = (
        f'set -euo pipefail\nstage=1\nstop_stage=1\n{options}. "{ROOT}/utils/pipeline.sh"\n'
        f"train_cmd={shlex.quote(str(train_cmd))}\n{step}\n"
    )
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120
    )


def test_add_token_dim_is_a_job_writing_the_vocabulary_size(tmp_path):
    for split, lines in (("train", "a 3\nb 5\n"), ("valid", "c 2\n")):
        (tmp_path / "stats" / split).mkdir(parents=True)
        (tmp_path / "stats" / split / "text_shape").write_text(lines)
    (tmp_path / "tokens.txt").write_text("<blank>\n<unk>\nx\n<sos/eos>\n")
    out = pipeline_step(tmp_path, ROOT / "utils" / "run.py", "add_token_dim stats tokens.txt bpe")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "stats/train/text_shape.bpe").read_text() == "a 3,4\nb 5,4\n"
    assert (tmp_path / "stats/valid/text_shape.bpe").read_text() == "c 2,4\n"
    assert ran_as_job(tmp_path / "stats/logdir/token_dim_text.log")
    assert not list(tmp_path.glob("stats/*/*.tmp"))
    # a missing shape file fails the job, which names its log
    (tmp_path / "stats/valid/text_shape").unlink()
    failed = pipeline_step(
        tmp_path, ROOT / "utils" / "run.py", "add_token_dim stats tokens.txt bpe"
    )
    assert failed.returncode != 0 and "stats/logdir/token_dim_text.log" in failed.stderr


# A recipe's python that runs the real one, recording when the per-set job of a set (of the commands matched
# below) started and ended in ${SPANS}: "<step>:<set> <start> <end>", seconds. A barrier: with BARRIER=STEP:N, a
# job of STEP first waits (10 s at most) until the jobs of N sets of STEP have started, and fails if they do not:
# it succeeds only side by side with them.
FAKE_PYTHON = """#!/usr/bin/env bash
dset=""
case "$*" in
    *"espnet_ext.data.filter dump/raw/"*) dset=filter:${{3#dump/raw/}} ;;
    *"espnet_ext.data.datadir validate data/"*) dset=validate:${{4#data/}} ;;
esac
if [ -n "${{dset}}" ] && [ "${{dset%%:*}}" = "${{BARRIER%%:*}}" ]; then
    mkdir -p "${{STARTED}}" && touch "${{STARTED}}/${{dset}}"
    for _ in $(seq 200); do [ "$(ls "${{STARTED}}" | wc -l)" -ge "${{BARRIER#*:}}" ] && break; sleep 0.05; done
    [ "$(ls "${{STARTED}}" | wc -l)" -ge "${{BARRIER#*:}}" ] ||
        {{ echo "${{dset}}: alone, with $(ls "${{STARTED}}")" >&2; exit 1; }}
fi
start=$(date +%s.%N)
{python} "$@"
code=$?
[ -z "${{dset}}" ] || echo "${{dset}} ${{start}} $(date +%s.%N)" >> "${{SPANS}}"
exit "${{code}}"
"""


def recipe(tmp_path, script, data_sh):
    return template_recipe(tmp_path, script, FAKE_PYTHON, data_sh)


def run_recipe(rec, tmp_path, *args, barrier=""):
    spans, started = tmp_path / "spans.txt", tmp_path / "started"
    spans.unlink(missing_ok=True)
    for path in started.glob("*"):
        path.unlink()
    env = {**os.environ, "SPANS": str(spans), "STARTED": str(started), "BARRIER": barrier}
    out = subprocess.run(args, cwd=rec, capture_output=True, text=True, env=env, timeout=300)
    times = {}
    for line in spans.read_text().splitlines() if spans.exists() else []:
        dset, start, end = line.split()
        times[dset] = (float(start), float(end))
    return out, times


MT_DATA = """for dset in train valid test; do
    mkdir -p "data/${dset}"
    for i in 1 2 3; do echo "${dset}${i} ein satz ${i}" >> "data/${dset}/text.de.tmp"; done
    for i in 1 2 3; do echo "${dset}${i} a sentence ${i}" >> "data/${dset}/text.en.tmp"; done
    mv "data/${dset}/text.de.tmp" "data/${dset}/text.de"
    mv "data/${dset}/text.en.tmp" "data/${dset}/text.en"
done
"""


def test_mt_data_copy_is_a_job_and_the_sets_are_filtered_side_by_side(tmp_path):
    rec = recipe(tmp_path, "mt1/mt.sh", MT_DATA)
    for name in ("train_mt_mini.yaml", "decode_mt_mini.yaml"):
        (rec / "conf" / name).write_text((ROOT / "egs/iwslt14/mt1/conf" / name).read_text())
    args = ["./mt.sh", "--mt_config", "conf/train_mt_mini.yaml", "--inference_config",
            "conf/decode_mt_mini.yaml", "--test_sets", "test valid", "--stop_stage", "2"]  # fmt: skip
    out, times = run_recipe(rec, tmp_path, *args, barrier="filter:2")
    assert out.returncode == 0, out.stderr[
        -3000:
    ]  # stage 2: each filter job started beside the other
    # stage 1: the tables copied by a job, each set once, as files of their own (not links to data/)
    assert ran_as_job(rec / "dump/raw/log/copy_data.log")
    for dset in ("train", "valid", "test"):
        for name in ("text.de", "text.en"):
            copy, orig = rec / "dump/raw" / dset / name, rec / "data" / dset / name
            assert copy.read_text() == orig.read_text()
            assert copy.stat().st_ino != orig.stat().st_ino
    assert not list((rec / "dump/raw").glob("*.tmp"))
    # stage 2: the training and validation sets (the test set is not filtered), each logged
    assert sorted(t for t in times if t.startswith("filter:")) == ["filter:train", "filter:valid"]
    assert "train: filter:" in out.stderr and "valid: filter:" in out.stderr
    # in turn with --parallel_stages false
    (rec / "dump/.stages/stage2.done").unlink()
    out, times = run_recipe(rec, tmp_path, *args, "--stage", "2", "--parallel_stages", "false")
    assert out.returncode == 0, out.stderr[-3000:]
    assert times["filter:train"][1] <= times["filter:valid"][0], times


def test_unlabeled_video_set_is_validated_beside_the_labelled_sets(tmp_path):
    data_sh = """for dset in train dev test unl; do
    rm -rf "data/${dset}" && mkdir -p "data/${dset}"
    for i in 0 1; do
        echo "${dset}${i} ${dset}${i}.npy" >> "data/${dset}/video.scp"
        [ "${dset}" = unl ] || echo "${dset}${i} a" >> "data/${dset}/text"
    done
done
"""
    rec = recipe(tmp_path, "asr1/asr.sh", data_sh)
    (rec / "conf/train.yaml").write_text(
        (ROOT / "egs/librispeech/asr1/conf/train_asr_mini.yaml").read_text()
    )
    for dset in ("train", "dev", "test", "unl"):
        for i in range(2):
            np.save(rec / f"{dset}{i}.npy", np.zeros((3, 8, 8), np.uint8))
    args = ["./asr.sh", "--input", "video", "--asr_config", "conf/train.yaml", "--inference_config",
            "conf/train.yaml", "--unlabeled_set", "unl", "--stop_stage", "1"]  # fmt: skip
    out, times = run_recipe(rec, tmp_path, *args, barrier="validate:4")
    assert out.returncode == 0, out.stderr[-3000:]  # each set's check started beside the 3 others
    assert sorted(times) == [f"validate:{d}" for d in ("dev", "test", "train", "unl")], times
    assert ran_as_job(rec / "data/log/validate_unl.log")
    # the unlabeled set needs no text, the labelled ones do: a failed set is named
    (rec / "data/.markers/train/.stages/stage1.done").unlink()
    (rec / "local/data.sh").write_text((rec / "local/data.sh").read_text() + "rm data/dev/text\n")
    out, _ = run_recipe(rec, tmp_path, *args)
    assert out.returncode != 0 and "check_video_set failed for the set(s): dev\n" in out.stderr


def test_the_token_list_job_asks_for_the_memory_it_needs(tmp_path):
    (tmp_path / "text").write_text("".join(f"u{i} a b c d e {i}\n" for i in range(50)))
    # a stand-in ${train_cmd}: records its options, then runs the command after the log
    (tmp_path / "cmd").write_text(
        '#!/usr/bin/env bash\necho "$@" >> calls.txt\nwhile [ "$1" != "${1#--}" ]; do shift 2; done\n'
        'shift\nexec "$@"\n'
    )
    (tmp_path / "cmd").chmod(0o755)
    step = 'make_token_list bpe 30 tokens "--hard_vocab_limit false" text'
    out = pipeline_step(tmp_path, tmp_path / "cmd", step, options="bpemode=unigram\n")
    assert out.returncode == 0, out.stderr
    assert (
        (tmp_path / "calls.txt").read_text().startswith("--mem 3G tokens/log/token_list.log python")
    )
    assert (tmp_path / "tokens" / "bpe.model").exists()
