"""A throw-away copy of a recipe dir (links to the real template, utils and configs) for end-to-end tests."""

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def make_recipe_copy(corpus: str, task: str, dest: Path) -> Path:
    """dest/egs/<corpus>/<task>: symlinks resolved to the repository, run.sh/local/conf copied."""
    src = ROOT / "egs" / corpus / task
    recipe = dest / "egs" / corpus / task
    recipe.mkdir(parents=True)
    for entry in src.iterdir():
        if entry.name in ("data", "dump", "exp", "RESULTS.md", "figures"):  # not the results
            continue
        target = recipe / entry.name
        if entry.is_symlink():
            target.symlink_to(entry.resolve())
        elif entry.is_dir():
            shutil.copytree(entry, target, symlinks=True)
            for link in target.rglob("*"):
                if link.is_symlink():
                    resolved = (entry / link.relative_to(target)).resolve()
                    link.unlink()
                    link.symlink_to(resolved)
        else:
            shutil.copy2(entry, target)
    return recipe


# Training settings of the tiny ESPnet2 configs (YAML values): two epochs of batches of 8, nothing written
# but checkpoints.
_TRAINING = dict(
    optim="adam",
    optim_conf="{lr: 0.002}",
    batch_type="folded",
    batch_size="8",
    max_epoch="2",
    best_model_criterion="[[valid, acc, max]]",
    keep_nbest_models="2",
    num_workers="0",
    use_tensorboard="false",
    use_matplotlib="false",
    num_att_plot="0",
)


def tiny_training(**changes: str | None) -> str:
    """The YAML lines of the tiny training settings with ``changes`` (a value of None leaves the key out:
    ESPnet's default)."""
    settings = {**_TRAINING, **changes}
    return "".join(f"{key}: {value}\n" for key, value in settings.items() if value is not None)


TINY_TRAINING = tiny_training()

# egs/mtedx/st1's tiny models, one per kind: the shared S2T Transformer, head selection (group strategy,
# 2 tasks, H' = 4; φ starts at 0, so tests can tell trained logits from initial ones) and adapters (2 tasks).
_MTEDX_ST_LAYERS = {
    "shared": ("s2t_transformer", "transformer", ""),
    "group": (
        "head_selection_s2t_transformer",
        "head_selection_transformer",
        ", num_tasks: 2, head_candidates: 4, selection_strategy: group, selection_logit_init: zero",
    ),
    "adapter": ("adapter_s2t_transformer", "adapter_transformer", ", num_tasks: 2, adapter_dim: 8"),
}


def mtedx_st_tiny(kind: str, model_conf: str) -> str:
    """A tiny egs/mtedx/st1 config of ``kind`` (shared, group, adapter) with the model_conf entries
    ``model_conf`` (YAML flow items, e.g. "task_tags: [tedx, other]")."""
    encoder, decoder, extra = _MTEDX_ST_LAYERS[kind]
    return (
        f"encoder: {encoder}\n"
        "encoder_conf: {output_size: 32, attention_heads: 2, linear_units: 64, num_blocks: 1,\n"
        f"               input_layer: s2t_conv1d, conv_channels: 16, use_flash_attn: false{extra}}}\n"
        f"decoder: {decoder}\n"
        "decoder_conf: {attention_heads: 2, linear_units: 64, num_blocks: 1, use_flash_attn: false"
        f"{extra}}}\n"
        "model: task_conditioned\n"
        f"model_conf: {{lsm_weight: 0.1, asr_weight: 0.0, report_bleu: false, {model_conf}}}\n"
        "frontend: null\n" + TINY_TRAINING
    )


# One job per stage: on a tiny corpus a second job only pays a second interpreter start (torch and ESPnet
# imports, ~7 s of CPU each). Sharded jobs and their merge are tested once, through Slurm arrays
# (test_librispeech_slurm.py), and by the unit tests of utils/run.py and the inference merge.
ONE_JOB = ["--nj", "1", "--inference_nj", "1"]

TINY_ASR = (
    """\
encoder: cnn_transformer
encoder_conf: {output_size: 32, attention_heads: 2, linear_units: 64, num_blocks: 1,
               conv_channels: [4, 4, 8, 8], use_flash_attn: false}
decoder: transformer
decoder_conf: {attention_heads: 2, linear_units: 64, num_blocks: 1, use_flash_attn: false}
model_conf: {ctc_weight: 0.3, lsm_weight: 0.1}
frontend: null
"""
    + TINY_TRAINING
)
TINY_OCR = """\
model: soft_attention
model_conf: {channels: [4, 8, 8, 8], lstm_units: 8, attention_dim: 8, decoder_units: 8, embed_dim: 4,
             stn_channels: 4}
""" + tiny_training(
    optim_conf="{lr: 0.01}",
    batch_type="sorted",
    batch_size="16",
    max_epoch="1",
    keep_nbest_models="1",
)

TINY_LM = """\
lm: seq_rnn
lm_conf: {unit: 16, nlayers: 1, tie_weights: true}
""" + tiny_training(
    optim_conf=None,
    max_epoch="1",
    best_model_criterion="[[valid, loss, min]]",
    keep_nbest_models=None,
    num_att_plot=None,
)
TINY_DECODE = "beam_size: 2\nctc_weight: 0.3\nlm_weight: 0.5\n"

TINY_ARGS = [
    *ONE_JOB,
    "--asr_config",
    "conf/tiny_asr.yaml",
    "--lm_config",
    "conf/tiny_lm.yaml",
    "--inference_config",
    "conf/tiny_decode.yaml",
    "--nbpe",
    "30",
    "--train_num_threads",
    "1",  # one thread per process, as everywhere in the tests (tests/conftest.py)
    "--local_data_opts",
    "--mini_splits train=40,dev=6,test=6 --mini_lm_sentences 200 --mini_lm_wide_sentences 100",
]


# The MuST-C ASR and ST models share this encoder: the ST recipe starts from the ASR recipe's model.
MUSTC_TINY_MODEL = """\
encoder: transformer
encoder_conf: {output_size: 32, attention_heads: 2, linear_units: 64, num_blocks: 1, input_layer: conv2d,
               use_flash_attn: false}
decoder: transformer
decoder_conf: {attention_heads: 2, linear_units: 64, num_blocks: 1, use_flash_attn: false}
frontend: null
""" + tiny_training(max_epoch="1", keep_nbest_models="1")
MUSTC_TINY_ASR = MUSTC_TINY_MODEL + "model_conf: {ctc_weight: 0.3, lsm_weight: 0.1}\n"
MUSTC_TINY_DECODE = "beam_size: 2\nctc_weight: 0.3\n"
MUSTC_ASR_ARGS = [
    "--asr_config",
    "conf/tiny_asr.yaml",
    "--inference_config",
    "conf/tiny_decode.yaml",
    "--nbpe",
    "30",
]
MUSTC_SHARED_ARGS = [
    *ONE_JOB,
    "--train_num_threads",
    "1",
    "--local_data_opts",
    "--mini_splits train=40,dev=6,tst-COMMON=6 --mini_num_speakers 2 --mini_segments_per_talk 4:8",
]


# egs/mtedx/asr1 on a tiny multilingual mini corpus (es, it); egs/mtedx/st1 starts from its model.
# φ starts at 0 (selection_logit_init: zero), so the tests can tell trained logits from initial ones.
MTEDX_TINY_ASR = (
    """\
encoder: head_selection_s2t_transformer
encoder_conf: {output_size: 32, attention_heads: 2, linear_units: 64, num_blocks: 1, input_layer: s2t_conv1d,
               conv_channels: 16, use_flash_attn: false, num_tasks: 2, head_candidates: 4,
               selection_strategy: group, selection_logit_init: zero}
decoder: head_selection_transformer
decoder_conf: {attention_heads: 2, linear_units: 64, num_blocks: 1, use_flash_attn: false, num_tasks: 2,
               head_candidates: 4, selection_strategy: group, selection_logit_init: zero}
model: task_conditioned
model_conf: {ctc_weight: 0.3, lsm_weight: 0.1, selection_kl_weight: 0.1, task_tags: [es, it]}
frontend: null
"""
    + TINY_TRAINING
)
MTEDX_TINY_DECODE = "beam_size: 2\nctc_weight: 0.3\n"
MTEDX_ASR_ARGS = [
    *ONE_JOB,
    "--asr_config", "conf/tiny_asr.yaml", "--inference_config", "conf/tiny_decode.yaml",
    "--nbpe", "40", "--test_sets", "test_es test_it",
    "--local_data_opts",
    "--mini_train_sizes es=30,it=10 --mini_valid_size 4 --mini_test_size 4 --mini_num_speakers 2"
    " --mini_segments_per_talk 4:8",
]  # fmt: skip


def tiny_librispeech_recipe(dest: Path) -> Path:
    """The librispeech recipe with tiny configs (conf/tiny_*.yaml): all stages in a minute or two on a CPU."""
    recipe = make_recipe_copy("librispeech", "asr1", dest)
    (recipe / "conf" / "tiny_asr.yaml").write_text(TINY_ASR)
    (recipe / "conf" / "tiny_lm.yaml").write_text(TINY_LM)
    (recipe / "conf" / "tiny_decode.yaml").write_text(TINY_DECODE)
    return recipe


def read_table(path: Path) -> dict[str, str]:
    """A Kaldi-style ``key value`` file (text, utt2spk, feats.scp, ...) as a dict."""
    return dict(line.split(" ", 1) for line in path.read_text(encoding="utf-8").splitlines())


def run(recipe: Path, args: list[str], env: dict[str, str] | None = None, timeout: int = 1800):
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        ["./run.sh", *args],
        cwd=recipe,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# A recipe's pipeline (asr.sh, st.sh, cls.sh ...) replaced by a script printing its arguments: what run.sh asks
# of the pipeline
ECHO_ARGS = """#!/usr/bin/env bash
printf '%s\\n' "$@"
"""


def echo_recipe(corpus: str, task: str, pipeline: str, dest: Path) -> Path:
    """A copy of egs/<corpus>/<task> whose ``pipeline`` prints its arguments instead of running."""
    recipe = make_recipe_copy(corpus, task, dest)
    (recipe / pipeline).unlink()
    (recipe / pipeline).write_text(ECHO_ARGS)
    (recipe / pipeline).chmod(0o700)
    return recipe


def echoed_args(recipe: Path, args: list[str], env: dict[str, str]) -> dict[str, str]:
    """The options run.sh of an ``echo_recipe`` gives its pipeline (the last of each wins, as the pipeline
    parses them)."""
    out = subprocess.run(
        ["./run.sh", *args], cwd=recipe, capture_output=True, text=True, env={**os.environ, **env}
    )
    assert out.returncode == 0, out.stderr
    words = out.stdout.splitlines()
    return {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--")}


def run_until(recipe: Path, args: list[str], path: Path, timeout: int = 600) -> subprocess.Popen:
    """Start run.sh and kill its whole process group as soon as ``path`` exists (an interrupted job)."""
    proc = subprocess.Popen(
        ["./run.sh", *args],
        cwd=recipe,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.time() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(
                f"run.sh ended before {path} appeared:\n{proc.stdout.read().decode()[-3000:]}"
            )
        if time.time() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"{path} did not appear in {timeout} s")
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return proc


# A Swin of two stages on 32x32 images (8x8 then 4x4 tokens, 4x4 windows: one shifted block) for cifar100/cls1.
TINY_SWIN = """\
model: swin
model_conf: {img_size: 32, patch_size: 4, embed_dim: 16, depths: [2, 2], num_heads: [1, 2], window_size: 4,
             drop_path_rate: 0.1, drloc_hidden: 16, drloc_pairs: 8, drloc_target: signed_normalised,
             drloc_features: post_norm}
image_transform_conf: {input_size: 32, crop_pct: 1.0, no_aug: true, mean: [0.2, 0.2, 0.2],
                       std: [0.14, 0.14, 0.14]}
""" + tiny_training(
    optim="adamw",
    optim_conf="{lr: 0.001}",
    batch_type="unsorted",
    batch_size="16",
    max_epoch="6",
    keep_nbest_models="1",
    num_att_plot=None,
)
# Eight training images and one test image per class (enough for the hue to be learnt); one job per
# stage, one thread per process.
CIFAR100_TINY_ARGS = [
    "--cls_config",
    "conf/tiny_swin.yaml",
    "--local_data_opts",
    "--train_per_class 8 --test_per_class 1",
    *ONE_JOB,
    "--train_num_threads",
    "1",
]
