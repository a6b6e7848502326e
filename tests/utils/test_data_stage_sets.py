"""The data stages' per-set steps side by side (utils/pipeline.sh for_each_set; in turn with --parallel_stages
false): utils/speech_stages.sh (validation, fbank + merge, filtering) driven with a stand-in job command, asr.sh's
video checks and ocr.sh's image checks with the local backend, and split_keys' key files (ids only)."""

import os
import subprocess
from pathlib import Path

import numpy as np
from PIL import Image
from template_recipe import template_recipe

ROOT = Path(__file__).resolve().parents[2]

# ${train_cmd} stand-in: [JOB=a:b] LOG CMD... ; records the start and end of the job by its log path, never runs
# CMD. MEET=true: a job (data preparation aside) waits (5 s at most) until a job of another set started, so it
# succeeds only side by side. A job whose log path contains ${FAIL} fails.
FAKE_JOB = """#!/usr/bin/env bash
[[ $1 == JOB=* ]] && shift
log=$1 dset=${1#*/*/}
dset=${dset%%/*}
case ${log} in  # data/log/validate_<set>.log, <feats>/log/filter_<set>.log, <feats>/<set>/log/...
    */validate_* | */filter_*) dset=${log##*_}; dset=${dset%.log} ;;
esac
echo "start ${log}" >> calls.txt
mkdir -p started && touch "started/${dset}"
others() { ls started | grep -cvx "${dset}"; }
if [ "${MEET:-false}" = true ] && [ "${log}" != data/log/data_prep.log ]; then
    for _ in $(seq 100); do [ "$(others)" -gt 0 ] && break; sleep 0.05; done
    [ "$(others)" -gt 0 ] || { echo "end ${log} alone" >> calls.txt; exit 1; }
fi
case ${log} in *"${FAIL:-none}"*) echo "end ${log} failed" >> calls.txt; exit 1 ;; esac
sleep 0.1
echo "end ${log}" >> calls.txt
"""

SPEECH = """#!/usr/bin/env bash
set -euo pipefail
stage=1
stop_stage=100
parallel_stages=true
train_set=train
valid_set=dev
test_sets="test dev"
local_data_opts=""
feats_dir=dump/fbank
nj=2
fbank_conf=""
min_frames=1
max_frames=100
max_text_chars=100
step=features
. "{root}/utils/parse_options.sh"
train_cmd=./job.sh
. "{root}/utils/pipeline.sh"
. "{root}/utils/speech_stages.sh"
case ${{step}} in
    prepare) run_stage 1 "data preparation" data 1 prepare_speech_data ;;
    features) run_stage 2 "fbank features" dump 1 extract_features ;;
    filter) run_stage 3 filtering dump 1 filter_speech_data --text_names text ;;
esac
echo finished > finished.txt
"""


def speech(tmp_path):
    for name, text in (("job.sh", FAKE_JOB), ("speech.sh", SPEECH.format(root=ROOT))):
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o755)

    def run(step, *args, meet=True, fail="none"):
        for path in [tmp_path / "calls.txt", tmp_path / "finished.txt", *tmp_path.glob("started/*"),
                     *tmp_path.glob("*/.stages/*")]:  # fmt: skip
            path.unlink(missing_ok=True)
        env = {"PATH": "/usr/bin:/bin", "MEET": str(meet).lower(), "FAIL": fail}
        out = subprocess.run(
            ["./speech.sh", "--step", step, *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        calls = (tmp_path / "calls.txt").read_text().splitlines()
        return out, calls

    return run


def fbank(dset):
    return f"dump/fbank/{dset}/log/fbank.JOB.log"


def merge(dset):
    return f"dump/fbank/{dset}/log/merge.log"


def test_features_of_the_sets_side_by_side_each_merged_after_its_jobs(tmp_path):
    run = speech(tmp_path)
    out, calls = run("features")
    assert out.returncode == 0, out.stderr  # each set's first job saw another set's start
    # dev, the validation set and a test set, once: two job arrays would write one directory
    assert sorted(c for c in calls if c.startswith("start")) == sorted(
        f"start {log}" for d in ("train", "dev", "test") for log in (fbank(d), merge(d))
    )
    for dset in ("train", "dev", "test"):
        assert calls.index(f"end {fbank(dset)}") < calls.index(f"start {merge(dset)}")


def test_features_in_turn_without_parallel_stages(tmp_path):
    run = speech(tmp_path)
    out, calls = run("features", "--parallel_stages", "false", meet=False)
    assert out.returncode == 0, out.stderr
    assert calls == [
        f"{what} {log}"
        for d in ("train", "dev", "test")
        for log in (fbank(d), merge(d))
        for what in ("start", "end")
    ]
    # in turn, the first set's job waits in vain for another set's
    out, calls = run("features", "--parallel_stages", "false")
    assert out.returncode != 0 and "_extract_set failed for the set(s): train\n" in out.stderr
    assert calls == [f"start {fbank('train')}", f"end {fbank('train')} alone"]
    assert not (tmp_path / "finished.txt").exists()


def test_a_failed_set_is_named_after_the_other_sets_ended_and_not_merged(tmp_path):
    run = speech(tmp_path)
    out, calls = run("features", fail="/dev/")
    assert out.returncode != 0 and "Stage 2 (fbank features) failed" in out.stderr
    assert "_extract_set failed for the set(s): dev\n" in out.stderr
    for dset in ("train", "test"):  # ended, not stopped
        assert f"end {merge(dset)}" in calls
    assert f"start {merge('dev')}" not in calls  # a set whose jobs failed is not merged
    assert not (tmp_path / "dump/.stages/stage2.done").exists()
    # in turn: nothing after the failed set starts
    out, calls = run("features", "--parallel_stages", "false", meet=False, fail="/dev/")
    assert out.returncode != 0 and "_extract_set failed for the set(s): dev\n" in out.stderr
    assert not any("/test/" in c for c in calls)


def test_validation_of_the_sets_side_by_side_after_the_data_preparation(tmp_path):
    run = speech(tmp_path)
    out, calls = run("prepare")
    assert out.returncode == 0, out.stderr
    assert calls[:2] == ["start data/log/data_prep.log", "end data/log/data_prep.log"]
    assert sorted(calls[2:]) == sorted(
        f"{what} data/log/validate_{d}.log"
        for d in ("train", "dev", "test")
        for what in ("start", "end")
    )
    out, calls = run("prepare", fail="validate_train")
    assert out.returncode != 0 and "_check_set failed for the set(s): train\n" in out.stderr
    assert "end data/log/validate_test.log" in calls
    out, calls = run("prepare", "--parallel_stages", "false", meet=False, fail="validate_dev")
    assert out.returncode != 0 and "_check_set failed for the set(s): dev\n" in out.stderr
    assert calls[-1] == "end data/log/validate_dev.log failed"  # test: not checked after it


def test_filtering_of_training_and_validation_sets_side_by_side(tmp_path):
    run = speech(tmp_path)
    out, calls = run("filter")
    assert out.returncode == 0, out.stderr
    assert sorted(c for c in calls if c.startswith("start")) == [
        "start dump/fbank/log/filter_dev.log",
        "start dump/fbank/log/filter_train.log",
    ]
    out, calls = run("filter", "--parallel_stages", "false", meet=False, fail="filter_train")
    assert out.returncode != 0 and "_filter_set failed for the set(s): train\n" in out.stderr
    assert calls == [
        "start dump/fbank/log/filter_train.log",
        "end dump/fbank/log/filter_train.log failed",
    ]


def shell(tmp_path, body):
    script = f'set -euo pipefail\nstage=1\nstop_stage=1\n. "{ROOT}/utils/pipeline.sh"\n{body}'
    return subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )


def test_data_sets_names_each_set_once_in_order(tmp_path):
    out = shell(tmp_path, 'data_sets "train dev  dev test train"; data_sets " "; echo end')
    assert out.returncode == 0, out.stderr
    assert out.stdout == "train dev test\n\nend\n"


def test_split_keys_writes_the_ids_only_unless_whole_lines_are_asked_for(tmp_path):
    # a text table, as mt.sh's statistics split (the target text): its ids, not its text, in every split
    (tmp_path / "text").write_text("".join(f"u{i} a long sentence {i}\n" for i in range(5)))
    out = shell(tmp_path, "split_keys text ids 2; split_keys --lines text lines 9")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "2\n5\n"
    assert (tmp_path / "ids/keys.1.scp").read_text() == "u0\nu2\nu4\n"
    assert (tmp_path / "ids/keys.2.scp").read_text() == "u1\nu3\n"
    assert (tmp_path / "lines/keys.2.scp").read_text() == "u1 a long sentence 1\n"
    assert not (tmp_path / "lines/keys.6.scp").exists()


# A recipe dir (as egs/TEMPLATE/setup.sh makes one) whose python runs the real one, except that the per-set check
# jobs (vsr_prepare --part_out, the image checks) first wait for a job of another set, as FAKE_JOB's MEET.
FAKE_PYTHON = """#!/usr/bin/env bash
dset=""
case "$*" in
    *"espnet_ext.bin.vsr_prepare --data_dir data/"*"--part_out"*) dset=${{4#data/}} ;;
    *"espnet_ext.data.types image data/log/images_"*) dset=${{4#data/log/images_}}; dset=${{dset%%/*}} ;;
esac
if [ -n "${{dset}}" ]; then
    mkdir -p "${{STARTED}}" && touch "${{STARTED}}/${{dset}}"
    others() {{ ls "${{STARTED}}" | grep -cvx "${{dset}}"; }}
    for _ in $(seq 100); do [ "$(others)" -gt 0 ] && break; sleep 0.05; done
    [ "$(others)" -gt 0 ] || {{ echo "${{dset}}: no other set's job started" >&2; exit 1; }}
fi
exec {python} "$@"
"""


def recipe(tmp_path, script):
    return template_recipe(tmp_path, script, FAKE_PYTHON)


def run_recipe(rec, tmp_path, *args):
    for started in tmp_path.glob("started/*"):
        started.unlink()
    env = {**os.environ, "STARTED": str(tmp_path / "started")}
    return subprocess.run(args, cwd=rec, capture_output=True, text=True, env=env, timeout=300)


def test_video_checks_of_the_sets_side_by_side_name_a_failed_set(tmp_path):
    rec = recipe(tmp_path, "asr1/asr.sh")
    (rec / "conf" / "train.yaml").write_text(
        (ROOT / "egs/librispeech/asr1/conf/train_asr_mini.yaml").read_text()
    )
    for dset, count in (("train", 3), ("dev", 2), ("test", 2)):
        (rec / "data" / dset).mkdir(parents=True)
        keys = [f"{dset}{i}" for i in range(count)]
        for i, key in enumerate(keys):
            np.save(rec / f"{key}.npy", np.zeros((i + 3, 8, 8), np.uint8))
        (rec / "data" / dset / "video.scp").write_text("".join(f"{k} {k}.npy\n" for k in keys))
        (rec / "data" / dset / "text").write_text("".join(f"{k} a\n" for k in keys))
    args = ["./asr.sh", "--input", "video", "--asr_config", "conf/train.yaml", "--inference_config",
            "conf/train.yaml", "--stage", "2", "--stop_stage", "2", "--test_sets", "dev test"]  # fmt: skip
    out = run_recipe(rec, tmp_path, *args)
    assert out.returncode == 0, out.stderr  # each set's jobs saw another set's start
    for dset, frames in (("train", "3 4 5"), ("dev", "3 4"), ("test", "3 4")):
        counts = (rec / "dump/video" / dset / "utt2num_frames").read_text().split()[1::2]
        assert " ".join(counts) == frames
    # a set that fails is named, after the others ended; its frames are not merged
    (rec / "dump/.stages/stage2.done").unlink()
    for dset in ("dev", "test"):
        (rec / "dump/video" / dset / "utt2num_frames").unlink()
    (rec / "dev1.npy").write_bytes(b"\x93NUMPY broken")
    failed = run_recipe(rec, tmp_path, *args)
    assert (
        failed.returncode != 0 and "check_set_videos failed for the set(s): dev\n" in failed.stderr
    )
    assert (rec / "dump/video/test/utt2num_frames").is_file()
    assert not (rec / "dump/video/dev/utt2num_frames").exists()
    # in turn: the first set's jobs wait in vain for another set's
    failed = run_recipe(rec, tmp_path, *args, "--parallel_stages", "false")
    assert (
        failed.returncode != 0
        and "check_set_videos failed for the set(s): train\n" in failed.stderr
    )


def test_image_checks_of_the_sets_side_by_side_name_a_failed_set(tmp_path):
    rec = recipe(tmp_path, "ocr1/ocr.sh")
    (rec / "local").mkdir()
    (rec / "local/data.sh").write_text("#!/usr/bin/env bash\n")  # the data dirs are written below
    (rec / "local/data.sh").chmod(0o755)
    for dset in ("train", "dev", "test"):
        (rec / "data" / dset).mkdir(parents=True)
        keys = [f"{dset}{i}" for i in range(3)]
        for key in keys:
            Image.fromarray(np.zeros((8, 16), np.uint8)).save(rec / f"{key}.png")
        (rec / "data" / dset / "image.scp").write_text("".join(f"{k} {k}.png\n" for k in keys))
        (rec / "data" / dset / "text").write_text("".join(f"{k} a\n" for k in keys))
    args = ["./ocr.sh", "--ocr_config", "conf/train.yaml", "--stage", "1", "--stop_stage", "1",
            "--test_sets", "test dev"]  # fmt: skip
    out = run_recipe(rec, tmp_path, *args)
    assert out.returncode == 0, out.stderr  # each set's jobs saw another set's start
    for dset in ("train", "dev", "test"):
        logs = sorted((rec / "data/log" / f"images_{dset}").glob("decode.*.log"))
        assert len(logs) == 2 and all("images decode" in log.read_text() for log in logs)
        assert not list((rec / "data/log" / f"images_{dset}").glob("keys.*.scp"))  # removed
    (rec / "data/.markers/train/.stages/stage1.done").unlink()
    (rec / "test2.png").write_bytes(b"not a png")
    failed = run_recipe(rec, tmp_path, *args)
    assert failed.returncode != 0 and "check_images failed for the set(s): test\n" in failed.stderr
    assert (rec / "data/log/images_dev/decode.1.log").is_file()  # checked too
    failed = run_recipe(rec, tmp_path, *args, "--parallel_stages", "false")
    assert failed.returncode != 0 and "check_images failed for the set(s): train\n" in failed.stderr
