"""Every real (non-mini) training and fine-tuning config takes two optimizer updates at its real size
(tests/configs/test_real_configs_*.py, one module per group of recipes). The largest (``is_large``: a LegoNN
41k-vocabulary config is 515M parameters, LRS3 large 478M) take about 10 GB with their gradients and Adam's
state (the check compares fingerprints of the weights, not a copy), too much for two at once on a 24 GB
machine: they share one xdist group (one worker trains them one after another); the others (4 GB at most) go
to either worker. The checks of one test module reuse one heap (``_keep_heap``: glibc serves every allocation
from it and keeps what is freed), so a check touches little memory that an earlier one has not touched: on a
virtual machine where fresh memory is slow to touch, first-touch page faults were most of a large check's time
(a 515M-parameter LegoNN check: 13-18 s of system time of 20-25 s). At the end of each module
(tests/configs/conftest.py) the freed heap goes back to the system, so a worker's size after it is its other
tests', not the largest run's plus fragmentation.

Each config goes through ``espnet_ext.analysis.preflight``: its ESPnet task builds it as the recipe's
training stage does (model, frontend, normalisation, SpecAugment, optimizer, scheduler, grad clip, batch
sampler) and ESPnet's trainer runs it on a synthetic corpus of the recipe's modality and vocabulary size.
The training loss must be finite, the trainable parameters must move, and a parameter that some backward
pass does not reach needs ``unused_parameters: true`` (DistributedDataParallel, ``--ngpu`` > 1).

Gradient accumulation multiplies the iterations an update needs (16-64 in the speech configs), so each
recipe's default config runs with its own ``accum_grad`` and the other configs of the recipe with 1
(accumulation is the trainer's loss scale and step cadence, the same code for every config).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import math
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from espnet_ext.analysis.preflight import preflight
from espnet_ext.bin.lego_finetune_config import merge

ROOT = Path(__file__).resolve().parents[2]
EGS = ROOT / "egs"

# recipe -> (task, the real token list size of run.sh's real mode, the config run.sh trains by default)
RECIPES = {
    "librispeech/asr1": ("asr", 5000, "train_asr_small.yaml"),  # run.sh: --nbpe 5000
    "lrs3/vsr1": ("vsr", 1000, "train_vsr_base.yaml"),  # --nbpe 1000
    "mustc/asr1": ("asr", 5000, "train_asr.yaml"),  # --nbpe 5000
    "mustc/st1": ("st", 8000, "train_st.yaml"),  # --tgt_nbpe 8000
    "mtedx/asr1": ("asr", 8000, "train_asr_group.yaml"),  # --nbpe 8000
    "mtedx/st1": ("st", 8000, "train_st_group.yaml"),  # --tgt_nbpe 8000
    "iwslt14/mt1": ("mt", 10000, "train_mt_base.yaml"),  # --tgt_nbpe 10000, joint
    "wmt/mt1": ("mt", 64000, "train_mt_group_o2m.yaml"),  # multilingual: --tgt_nbpe 64000
    "cifar100/cls1": ("cls", 100, "train_swin_t.yaml"),
    "mnist_seq/ocr1": ("ocr", 40, "train_ocr_paper.yaml"),
    "europarl/asr1": ("asr", 2000, "train_legonn.yaml"),  # --nbpe 2000
}
# LegoNN MT dictionaries (egs/wmt/mt1 run.sh, Dalmia et al. §V-B / §V-C1): En-De 32k, De-En + Ro-En 41k.
VOCAB_BY_NAME = {"ende": 32000, "deroen": 41000}
# Fine-tuning settings -> the training config whose trained modules they fine-tune.
FINETUNED = {
    "wmt/mt1/finetune_lego.yaml": "train_lego_wemb_deroen.yaml",
    "europarl/asr1/finetune.yaml": "train_legonn.yaml",
}
NOT_TRAINING = ("decode", "slurm")


def real_configs() -> list[str]:
    found = []
    for recipe in RECIPES:
        conf = EGS / recipe / "conf"
        for path in sorted(conf.rglob("*.yaml")):
            rel = path.relative_to(conf)
            if rel.parts[0] in ("sweeps", "card") or path.stem.endswith("_mini"):
                continue
            if path.name.startswith(NOT_TRAINING) or path.name == "tiny_lego.yaml":
                continue
            found.append(f"{recipe}/{rel}")
    return found


CONFIGS = real_configs()


def settings(name: str, tmp_path: Path) -> tuple[str, int, Path, bool]:
    """(task, vocabulary size, the config file to train, whether it keeps its accum_grad)."""
    recipe = "/".join(name.split("/")[:2])
    task, vocab, default = RECIPES[recipe]
    conf = EGS / recipe / "conf"
    path = conf / name.removeprefix(recipe + "/")
    filename = path.name
    if path.stem.startswith("train_lm"):
        task = "lm"
    for key, size in VOCAB_BY_NAME.items():
        if key in filename:
            vocab = size
    if name in FINETUNED:
        trained = yaml.safe_load((conf / FINETUNED[name]).read_text())
        merged = merge(trained, yaml.safe_load(path.read_text()), trained, where=str(path))
        path = tmp_path / filename
        path.write_text(yaml.safe_dump(merged, sort_keys=False))
        for key, size in VOCAB_BY_NAME.items():
            if key in FINETUNED[name]:
                vocab = size
    return task, vocab, path, filename == default


# One test module per group (tests/configs/test_real_configs_<group>.py).
GROUPS = {
    "mustc": ("mustc/asr1", "mustc/st1"),
    "mt": ("wmt/mt1", "iwslt14/mt1"),
    "mtedx_lrs3": ("mtedx/asr1", "mtedx/st1", "lrs3/vsr1"),
    "others": ("librispeech/asr1", "cifar100/cls1", "mnist_seq/ocr1", "europarl/asr1"),
}


def configs_of(group: str) -> list[str]:
    return [name for name in CONFIGS if name.startswith(tuple(f"{r}/" for r in GROUPS[group]))]


def check_two_updates(name: str, tmp_path: Path, options: Sequence[str] = ()) -> None:
    """``options``: training options run.sh adds to the config (a paper row that is a run.sh variant)."""
    task, vocab, config, own_accum = settings(name, tmp_path)
    large = "large" in Path(name).stem  # ~478M parameters: one update fits the 2-core test machine
    updates = 1 if large else 2
    extra = [*options] if own_accum else [*options, "--accum_grad", "1"]
    _keep_heap()
    result = preflight(
        task, config, vocab=vocab, updates=updates, extra_args=extra, workdir=tmp_path
    )
    gc.collect()  # the model, its gradients and optimizer state: freed into the kept heap
    assert math.isfinite(result.train_loss), name
    # Nine tenths of the trainable weights (by size, whole tensors) move: some get no gradient by
    # construction at this size (a key bias under softmax, the layers LayerDrop skips in both
    # updates).
    assert result.changed_fraction > 0.9, (name, result.unchanged_names[:20])
    # Several GPUs: every trainable parameter in every backward pass, or unused_parameters: true
    # (DistributedDataParallel would otherwise stop the run at its next update).
    assert result.ddp_ready, (name, "set unused_parameters: true", result.partly_unused[:10])


# glibc's mallopt parameters and their defaults (malloc.h)
M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
DEFAULT_TRIM_THRESHOLD, DEFAULT_MMAP_MAX = 128 * 1024, 65536
_kept = False


def _libc():
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    return libc if libc is not None and hasattr(libc, "mallopt") else None  # glibc only


def _keep_heap() -> None:
    """Serve the checks' tensors from glibc's heap and keep what they free: torch's large tensors are
    otherwise mmapped and unmapped one by one, so every update, and every check after the first, faults its
    memory in anew (each fresh 4 kB page zeroed by the kernel). Until ``return_heap``."""
    global _kept
    libc = _libc()
    if _kept or libc is None:
        return
    libc.mallopt(M_MMAP_MAX, 0)
    libc.mallopt(M_TRIM_THRESHOLD, 2**31 - 1)
    _kept = True


def return_heap() -> None:
    """Collect what the checks left, hand glibc's freed heap back to the system (``malloc_trim``) and go back
    to glibc's defaults; nothing when no check kept the heap (tests/configs/conftest.py: after each module)."""
    global _kept
    libc = _libc()
    if not _kept or libc is None:
        return
    gc.collect()
    libc.mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX)
    libc.mallopt(M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD)
    libc.malloc_trim(0)
    _kept = False


# The configs of ~12 GB in training: one worker runs them one after another.
FULL_SIZE_GROUP = pytest.mark.xdist_group("real_configs_full_size")


def is_large(name: str) -> bool:
    """The WMT LegoNN and encoder-decoder models at their 32k / 41k dictionaries, LRS3 large."""
    stem = Path(name).stem
    wmt_pair_model = stem.startswith(("train_lego", "train_encdec", "finetune_lego"))
    return (name.startswith("wmt/mt1/") and wmt_pair_model) or (
        name.startswith("lrs3/vsr1/") and "large" in stem
    )


def config_params(group: str) -> list:
    """``configs_of(group)`` as pytest parameters, the large ones in FULL_SIZE_GROUP."""
    return [
        pytest.param(name, marks=[FULL_SIZE_GROUP] if is_large(name) else [])
        for name in configs_of(group)
    ]
