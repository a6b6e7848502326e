"""--gpu_inference true (ESPnet's option) in every pipeline: each decoding job asks its backend for one GPU and
tells the decoder to use it (ESPnet's --ngpu 1; --device cuda for our image and video decoders).

Each pipeline runs only its decoding stage, from a recipe dir laid out as egs/TEMPLATE/setup.sh makes one,
with the decoders replaced by a stand-in that records its command line and writes the hypotheses (the real
decoders are tested in tests/decoding and tests/recipes). The Slurm case runs without a cluster: sbatch and
squeue are stand-ins that record the submission and run the batch script utils/slurm.py wrote, as Slurm
would, so the GPU request is seen both in sbatch's options and in the job script.
"""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "egs" / "TEMPLATE"
TRAIN_CONFIG = ROOT / "egs" / "librispeech" / "asr1" / "conf" / "train_asr_mini.yaml"

# python -m espnet_ext.bin.*_inference goes to the stand-in decoder; every other python call is the real one.
FAKE_PYTHON = """#!/usr/bin/env bash
case "${{1:-}} ${{2:-}}" in
    "-m espnet_ext.bin."*_inference | "-m espnet_ext.bin.lego_ctc_decode") exec {python} {decoder} "$@" ;;
esac
exec {python} "$@"
"""

FAKE_DECODER = """
import json, os, pathlib, sys
argv = sys.argv[1:]
with open(os.environ["DECODER_CALLS"], "a") as f:
    f.write(json.dumps(argv) + "\\n")
opts = {}
for i, word in enumerate(argv[:-1]):
    if word.startswith("--"):
        opts.setdefault(word[2:], argv[i + 1])
keys = [line.split()[0] for line in open(opts["key_file"])]
def write(path, lines):
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(k + " " + lines + "\\n" for k in keys))
if "output_dir" in opts:  # ESPnet's decoders
    write(pathlib.Path(opts["output_dir"]) / "1best_recog" / "text", "HYP")
for name in ("output_file", "output"):  # ours (output: lego_ctc_decode)
    if name in opts:
        write(opts[name], "HYP")
for name, value in (("score_file", "-1.0 2"), ("topk_file", "a b")):
    if name in opts:
        write(opts[name], value)
"""

# sbatch: records its arguments, runs the script once per array task with the task's output file, prints an id.
FAKE_SBATCH = """#!/usr/bin/env bash
printf '%s\\n' "$*" >> "${SBATCH_CALLS}"
script=${@: -1}
array="" output=""
for arg in "$@"; do
    case ${arg} in --array=*) array=${arg#--array=} ;; --output=*) output=${arg#--output=} ;; esac
done
array=${array%%%*}
for task in $(seq "${array%-*}" "${array#*-}"); do
    SLURM_ARRAY_TASK_ID=${task} SLURM_JOB_ID=42 bash "${script}" >> "${output//%a/${task}}" 2>&1
done
echo 42
"""

# squeue: the job is gone (Slurm purged it), so utils/slurm.py reads every task's outcome from its log.
FAKE_SQUEUE = """#!/usr/bin/env bash
echo "slurm_load_jobs error: Invalid job id specified" >&2
exit 1
"""

# pipeline -> (script, options, files the decoding stage reads, decoder module, GPU words on its command line)
PIPELINES = {
    "asr": (
        "asr1/asr.sh",
        shlex.split("--asr_config conf/train.yaml --inference_config conf/decode.yaml --stage 10"),
        ["exp/asr_train/valid.acc.ave.pth", "dump/fbank/test/feats.scp"],
        "espnet_ext.bin.asr_inference",
        ["--ngpu", "1"],
    ),
    "vsr": (
        "asr1/asr.sh",
        shlex.split(
            "--input video --asr_config conf/train.yaml --inference_config conf/decode.yaml --stage 10"
        ),
        ["exp/vsr_train/valid.acc.ave.pth", "dump/video/test/video.scp"],
        "espnet_ext.bin.vsr_inference",
        ["--device", "cuda"],
    ),
    "mt": (
        "mt1/mt.sh",
        shlex.split("--mt_config conf/train.yaml --inference_config conf/decode.yaml --stage 9"),
        ["exp/mt_train/valid.acc.ave.pth", "dump/raw/test/text.de"],
        "espnet_ext.bin.mt_inference",
        ["--ngpu", "1"],
    ),
    # an encoder-only LegoNN model: its greedy CTC path, by our decoder (mt.sh reads model: from its config)
    "mt_legonn_ctc": (
        "mt1/mt.sh",
        shlex.split("--mt_config conf/train.yaml --inference_config conf/decode.yaml --stage 9"),
        ["exp/mt_train/valid.acc.ave.pth", "dump/raw/test/text.de"],
        "espnet_ext.bin.lego_ctc_decode",
        ["--device", "cuda"],
    ),
    "st": (
        "st1/st.sh",
        shlex.split("--st_config conf/train.yaml --inference_config conf/decode.yaml --stage 7"),
        ["exp/st_train/valid.acc.ave.pth", "dump/fbank/test/feats.scp"],
        "espnet_ext.bin.st_inference",
        ["--ngpu", "1"],
    ),
    "cls": (
        "cls1/cls.sh",
        ["--cls_config", "conf/train.yaml", "--stage", "5", "--inference_batch_size", "64"],
        ["exp/cls_train/valid.acc.best.pth", "data/test/image.scp"],
        "espnet_ext.bin.cls_inference",
        ["--device", "cuda", "--batch_size", "64"],
    ),
    "ocr": (
        "ocr1/ocr.sh",
        ["--ocr_config", "conf/train.yaml", "--stage", "5", "--inference_batch_size", "64"],
        ["exp/ocr_train/valid.acc.best.pth", "data/test/image.scp"],
        "espnet_ext.bin.ocr_inference",
        ["--device", "cuda", "--batch_size", "64"],
    ),
}
KEYS = ["utt1", "utt2", "utt3"]


def make_recipe(tmp_path: Path, pipeline: str):
    """A recipe dir whose decoding stage can run; returns run(*options) -> CompletedProcess."""
    script, options, files, _, _ = PIPELINES[pipeline]
    recipe, bin_dir = tmp_path / "recipe", tmp_path / "bin"
    (recipe / "conf").mkdir(parents=True)
    bin_dir.mkdir()
    name = Path(script).name
    (recipe / name).symlink_to(TEMPLATE / script)
    for f in ("cmd.sh", "db.sh"):
        (recipe / f).symlink_to(TEMPLATE / "asr1" / f)
    (recipe / "utils").symlink_to(ROOT / "utils")
    (recipe / "conf" / "slurm.conf").symlink_to(TEMPLATE / "asr1" / "conf" / "slurm.conf")
    # path.sh as the template's, then the stand-ins first on the path
    (recipe / "path.sh").write_text(
        f". {shlex.quote(str(ROOT / 'tools' / 'activate.sh'))}\n"
        f'export PATH={shlex.quote(str(bin_dir))}:"${{PATH}}"\n'
    )
    (recipe / "conf" / "train.yaml").write_text(TRAIN_CONFIG.read_text())
    (recipe / "conf" / "decode.yaml").write_text("beam_size: 2\n")
    decoder = tmp_path / "fake_decoder.py"
    decoder.write_text(FAKE_DECODER)
    for tool, text in (
        ("python", FAKE_PYTHON.format(python=shlex.quote(sys.executable), decoder=decoder)),
        ("sbatch", FAKE_SBATCH),
        ("squeue", FAKE_SQUEUE),
    ):
        (bin_dir / tool).write_text(text)
        (bin_dir / tool).chmod(0o755)
    for f in files:
        path = recipe / f
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{k} x\n" for k in KEYS) if path.suffix != ".pth" else "")
    exp = recipe / Path(files[0]).parent
    # ocr.sh: no attention pictures to merge; mt.sh: an encoder-only LegoNN model decodes by lego_ctc_decode
    model = "legonn_ctc" if pipeline == "mt_legonn_ctc" else "ctc"
    (exp / "config.yaml").write_text(f"model: {model}\n")
    env = {
        **os.environ,
        "DECODER_CALLS": str(tmp_path / "decoder_calls.jsonl"),
        "SBATCH_CALLS": str(tmp_path / "sbatch_calls.txt"),
    }

    def run(*extra):
        stage = options[options.index("--stage") + 1]
        return subprocess.run(
            ["./" + name, *options, "--stop_stage", stage, "--inference_nj", "2", *extra],
            cwd=recipe,
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )

    return run


def decoder_calls(tmp_path):
    lines = (tmp_path / "decoder_calls.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def option_value(argv, name):
    """The value ESPnet's argparse sees: the last --name given."""
    values = [argv[i + 1] for i, word in enumerate(argv[:-1]) if word == name]
    return values[-1] if values else None


def job_logs(tmp_path, module):
    return sorted((tmp_path / "recipe").rglob(f"logdir/{module.rsplit('.', 1)[1]}.*.log"))


@pytest.mark.parametrize("pipeline", list(PIPELINES))
def test_every_pipeline_decodes_on_one_gpu_per_job_locally(tmp_path, pipeline):
    _, _, _, module, gpu_words = PIPELINES[pipeline]
    run = make_recipe(tmp_path, pipeline)
    done = run("--gpu_inference", "true")
    assert done.returncode == 0, done.stderr
    calls = decoder_calls(tmp_path)
    assert len(calls) == 2  # one per job
    for argv in calls:
        assert argv[:2] == ["-m", module]
        for name, value in zip(gpu_words[::2], gpu_words[1::2]):
            assert option_value(argv, name) == value, argv
    # the local backend's job logs start with the command line that ran
    logs = job_logs(tmp_path, module)
    assert len(logs) == 2
    for log in logs:
        first = shlex.split(log.read_text().splitlines()[0].lstrip("# "))
        assert option_value(first, gpu_words[0]) == gpu_words[1]


def test_cpu_decoding_stays_the_default(tmp_path):
    run = make_recipe(tmp_path, "asr")
    done = run()
    assert done.returncode == 0, done.stderr
    assert {option_value(argv, "--ngpu") for argv in decoder_calls(tmp_path)} == {"0"}


def test_a_bad_value_is_refused_naming_the_option(tmp_path):
    run = make_recipe(tmp_path, "cls")
    done = run("--gpu_inference", "yes")
    assert done.returncode != 0
    assert "--gpu_inference takes true or false, not 'yes'" in done.stderr  # utils/parse_options.sh
    assert not (tmp_path / "decoder_calls.jsonl").exists()


@pytest.mark.parametrize(("pipeline", "gpu"), [("asr", True), ("asr", False), ("cls", True)])
def test_slurm_jobs_request_the_gpu_in_sbatch_and_the_job_script(tmp_path, pipeline, gpu):
    _, _, _, module, gpu_words = PIPELINES[pipeline]
    run = make_recipe(tmp_path, pipeline)
    done = run("--cmd_backend", "slurm", "--gpu_inference", str(gpu).lower())
    assert done.returncode == 0, done.stderr
    (submitted,) = (tmp_path / "sbatch_calls.txt").read_text().splitlines()
    assert ("--gres=gpu:1" in submitted.split()) is gpu
    assert "--array=1-2" in submitted.split()
    if not gpu:
        assert "--mem 4G" in submitted  # decode_cmd's request, as before
    (script,) = (tmp_path / "recipe").rglob("logdir/q/*.sh")
    assert f"python -m {module}" in script.read_text()
    assert (" ".join(gpu_words) in script.read_text()) is gpu
    assert len(decoder_calls(tmp_path)) == 2  # the script ran as both array tasks
