"""Preflight: a training config takes real optimizer updates before a cluster job is spent on it.

    python -m espnet_ext.analysis.preflight --task asr --config conf/train_asr.yaml [--vocab 5000]
        [--updates 2] [--ngpu 0] [--keep DIR]

A synthetic corpus of the task's modality (fbank features, mouth-crop videos, images, token ids) is
written in the layout the recipe's pipeline writes (data files, shape files with the token dimension
``add_token_dim`` appends, global-MVN statistics for speech, task ids for task-conditioned models), and
the task builds what its ``main_worker`` builds (model with the config's frontend, normalisation,
SpecAugment; optimizers, schedulers, the batch sampler's iterator) and ESPnet's
``Trainer.train_one_epoch`` runs ``updates x accum_grad`` iterations of it, with the config's grad clip,
gradient accumulation and AMP setting, and what ``main_worker`` sets for the process (cuDNN's modes,
TensorFloat32, anomaly detection; the process's own restored afterwards). Only what a synthetic corpus
forces is set from outside: the data options, the token lists and ``num_iters_per_epoch``. No
validation, no checkpoint: the point is the update.

A config passes when the training loss is finite and the trainable parameters moved: ``grad_clip: 0``
(ESPnet scales every gradient by 0), a zero learning rate at the start of the schedule or frozen
modules show up here. Every statistic the model reports must have the batch weight's shape (what
ESPnet's trainer asserts with several GPUs). It is ready for several GPUs when every trainable parameter
got a gradient in every backward pass, or the config sets ``unused_parameters: true``:
DistributedDataParallel (``--ngpu`` > 1, ``--num_nodes``) waits for every parameter's gradient unless told
to look for unused ones, and stops the run at its next update when one never came (an absent task's
adapter, a frozen phase, LayerDrop).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import yaml

from espnet_ext.bin.normalize_opts import normalize_opts
from espnet_ext.errors import ConfigError

# task -> (the task class our training entry runs, the data it trains on)
TASKS = {
    "asr": ("espnet_ext.tasks.asr:ASRTask", ("speech", "text")),
    "st": ("espnet_ext.tasks.st:STTask", ("speech", "text", "src_text")),
    "mt": ("espnet_ext.tasks.mt:MTTask", ("src_text", "text")),
    "lm": ("espnet_ext.tasks.lm:LMTask", ("text",)),
    "vsr": ("espnet_ext.tasks.lip_reading:LipReadingTask", ("video", "text")),
    "ocr": ("espnet_ext.tasks.image_to_sequence:ImageToSequenceTask", ("image", "text")),
    "cls": ("espnet_ext.tasks.image_classification:ImageClassificationTask", ("image", "label")),
}
# Sizes of one synthetic utterance / image: short enough for a CPU, long enough for every front-end's
# subsampling (conv stacks of stride 4-8, Swin's 224 x 224 input after the recipe's resize).
FBANK_DIM = 80
SPEECH_FRAMES = (112, 96)
VIDEO_FRAMES, VIDEO_SIZE = (12, 9), 88
OCR_IMAGE = (32, 100)  # grey strip, H x W
CLS_IMAGE = (32, 32, 3)  # CIFAR-sized RGB; the config's transform resizes
TOKENS = (6, 4)
NUM_CLASSES = 100


@dataclasses.dataclass(frozen=True)
class CorpusSize:
    """A larger synthetic corpus (``utterances`` alike ones of ``frames`` speech/video frames and ``tokens``
    tokens) so that the config's own batch sampler fills batches of the paper's size (timing runs)."""

    utterances: int
    frames: int
    tokens: int


@dataclasses.dataclass
class PreflightResult:
    config: str
    updates: int
    iterations: int
    train_loss: float
    parameters: int  # trainable
    changed: int  # trainable parameters (elements) that moved
    unchanged_names: list[str]
    # trainable parameters some backward pass did not reach, and the config's ``unused_parameters``
    partly_unused: list[str] = dataclasses.field(default_factory=list)
    unused_parameters: bool = False

    @property
    def ddp_ready(self) -> bool:
        """Trains under DistributedDataParallel: every parameter in every pass, or told to look."""
        return self.unused_parameters or not self.partly_unused

    @property
    def changed_fraction(self) -> float:
        return self.changed / max(self.parameters, 1)


def _task_class(task: str):
    if task not in TASKS:
        raise ConfigError(f"unknown task {task!r}; one of {', '.join(TASKS)}", key="--task")
    module_name, _, name = TASKS[task][0].partition(":")
    from espnet_ext.registry import install

    install()  # our classes registered, as in our training entry points

    return getattr(importlib.import_module(module_name), name)


def _write_table(path: Path, rows: dict[str, str]) -> Path:
    path.write_text("".join(f"{key} {value}\n" for key, value in rows.items()))
    return path


class SyntheticCorpus:
    """Two utterances (or images) of one modality, written as the pipeline would write them."""

    def __init__(
        self,
        root: Path,
        task: str,
        config: dict,
        vocab: int,
        seed: int = 0,
        size: CorpusSize | None = None,
    ):
        self.root, self.task, self.config, self.vocab = root, task, config, vocab
        self.rng = np.random.default_rng(seed)
        self.keys = ["utt_a", "utt_b"]
        self.speech_frames, self.video_frames, self.tokens = SPEECH_FRAMES, VIDEO_FRAMES, TOKENS
        if size is not None:
            n = size.utterances
            self.keys = [f"utt{i:06d}" for i in range(n)]
            self.speech_frames = self.video_frames = (size.frames,) * n
            self.tokens = (size.tokens,) * n
        self.data: list[str] = []  # "path,name,type" of each data file, for train and valid alike
        self.shapes: list[Path] = []  # shape files of the batched data, as the pipeline passes them
        self.options: list[str] = []
        root.mkdir(parents=True, exist_ok=True)

    def token_list(self, path: Path) -> Path:
        # ESPnet's layout: blank and unk first, <sos/eos> last.
        tokens = ["<blank>", "<unk>", *(f"t{i}" for i in range(self.vocab - 3)), "<sos/eos>"]
        path.parent.mkdir(parents=True, exist_ok=True)
        return _write_table_lines(path, tokens)

    def _data(self, path: Path, name: str, kind: str, shapes: dict[str, str] | None) -> None:
        self.data.append(f"{path},{name},{kind}")
        if shapes is not None:
            self.shapes.append(_write_table(self.root / f"{name}_shape", shapes))

    def _token_ids(self, name: str, shape: bool = True) -> None:
        rows, shapes = {}, {}
        for key, length in zip(self.keys, self.tokens):
            ids = self.rng.integers(2, self.vocab - 1, size=length)
            rows[key] = " ".join(map(str, ids))
            shapes[key] = f"{length},{self.vocab}"  # add_token_dim's `len,vocab`
        self._data(
            _write_table(self.root / name, rows), name, "text_int", shapes if shape else None
        )

    def _speech(self) -> None:
        import kaldiio

        feats = {
            key: self.rng.standard_normal((frames, FBANK_DIM)).astype(np.float32)
            for key, frames in zip(self.keys, self.speech_frames)
        }
        scp = self.root / "feats.scp"
        kaldiio.save_ark(str(self.root / "feats.ark"), feats, scp=str(scp))
        stacked = np.concatenate(list(feats.values()))
        stats = self.root / "feats_stats.npz"  # what ESPnet's collect_stats writes
        np.savez(stats, count=len(stacked), sum=stacked.sum(0), sum_square=(stacked**2).sum(0))
        shapes = {key: f"{len(x)},{FBANK_DIM}" for key, x in feats.items()}
        self._data(scp, "speech", "kaldi_ark", shapes)
        # The speech pipelines' training options (asr.sh / st.sh asr_train, st_train): the config's
        # normalisation, else global_mvn over the statistics.
        self.options += ["--input_size", str(FBANK_DIM), *normalize_opts(self.config, str(stats))]

    def _media(self, name: str, kind: str, arrays: dict[str, np.ndarray]) -> None:
        rows = {}
        for key, array in arrays.items():
            if kind == "video":
                path = self.root / f"{key}.npy"
                np.save(path, array)
            else:
                from PIL import Image

                path = self.root / f"{key}.png"
                Image.fromarray(array).save(path)
            rows[key] = str(path)
        shapes = {key: ",".join(map(str, a.shape)) for key, a in arrays.items()}
        self._data(_write_table(self.root / f"{name}.scp", rows), name, kind, shapes)

    def write(self) -> list[str]:
        for name in TASKS[self.task][1]:
            if name == "speech":
                self._speech()
            elif name == "video":
                frames = {
                    k: (self.rng.random((t, VIDEO_SIZE, VIDEO_SIZE)) * 255).astype(np.uint8)
                    for k, t in zip(self.keys, self.video_frames)
                }
                self._media("video", "video", frames)
            elif name == "image":
                shape = OCR_IMAGE if self.task == "ocr" else CLS_IMAGE
                images = {k: (self.rng.random(shape) * 255).astype(np.uint8) for k in self.keys}
                self._media("image", "image", images)
            elif name == "label":
                labels = {k: str(i % NUM_CLASSES) for i, k in enumerate(self.keys)}
                self._data(_write_table(self.root / "label", labels), "label", "text_int", None)
            else:
                self._token_ids(name)
        self._extra_keys()
        self._token_options()
        for split in ("train", "valid"):
            self.options += [
                x for d in self.data for x in (f"--{split}_data_path_and_name_and_type", d)
            ]
            self.options += [x for s in self.shapes for x in (f"--{split}_shape_file", str(s))]
        for shape in self.shapes:  # the pipelines' --fold_length: 800 frames, 150 tokens
            self.options += ["--fold_length", "800" if shape.name.startswith("speech") else "150"]
        self._config_token_lists(self.config)
        return self.options

    def _config_token_lists(self, node) -> None:
        """Token lists a config names itself (a LegoNN module's output vocabulary, relative to the recipe
        directory): written under the corpus root, which is the working directory while training."""
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "token_list" and isinstance(value, str) and not Path(value).is_absolute():
                    self.token_list(self.root / value)
                else:
                    self._config_token_lists(value)
        elif isinstance(node, list):
            for value in node:
                self._config_token_lists(value)

    def _extra_keys(self) -> None:
        """Data keys beyond the task's: per-utterance ids of task-conditioned models (the recipes'
        task-id data option) and the CTC targets of LegoNN encoder modules in their own vocabularies."""
        model_conf = self.config.get("model_conf") or {}
        model = self.config.get("model")
        if model == "task_conditioned":
            names = ["task_id"] + (
                ["target_language_id"] if model_conf.get("target_languages") else []
            )
            for name in names:
                ids = {key: str(i % 2) for i, key in enumerate(self.keys)}
                self._data(_write_table(self.root / name, ids), name, "text_int", None)
        elif model in ("legonn", "legonn_ctc"):  # espnet_ext.nets.lego.ctc_only.LEGONN_MODELS
            for name in model_conf.get("interface_text_keys") or []:
                if name != "text":
                    self._token_ids(name, shape=False)
        else:
            return
        self.options += ["--allow_variable_data_keys", "true"]

    def _token_options(self) -> None:
        if self.task == "cls":
            self.options += ["--num_classes", str(NUM_CLASSES), "--use_preprocessor", "true"]
            return
        self.options += ["--token_list", str(self.token_list(self.root / "text_tokens.txt"))]
        if self.task in ("st", "mt"):
            self.options += ["--src_token_list", str(self.token_list(self.root / "src_tokens.txt"))]
        if self.task in ("vsr", "ocr"):  # our preprocessors pass token ids through
            self.options += ["--use_preprocessor", "true", "--token_type", "char"]
        else:  # ESPnet's: the text is already token ids
            self.options += ["--use_preprocessor", "false"]


def _write_table_lines(path: Path, lines: Sequence[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def _build_schedulers(
    args: argparse.Namespace, optimizers: Sequence[torch.optim.Optimizer]
) -> list:
    """One scheduler per optimizer from ``--scheduler[N]`` / ``--scheduler[N]_conf``, as ESPnet's
    ``AbsTask.main_worker`` builds them."""
    from espnet2.tasks.abs_task import scheduler_classes

    schedulers = []
    for i, optim in enumerate(optimizers, 1):
        suffix = "" if i == 1 else str(i)
        name = getattr(args, f"scheduler{suffix}")
        if name is None:
            schedulers.append(None)
            continue
        if name.lower() not in scheduler_classes:
            raise ConfigError(f"unknown scheduler {name!r}", key=f"scheduler{suffix}")
        schedulers.append(
            scheduler_classes[name.lower()](optim, **getattr(args, f"scheduler{suffix}_conf"))
        )
    return schedulers


# Per-task modules (adapters) of tasks the synthetic batch does not hold get no gradient by design.
_ABSENT_TASK = re.compile(r"\.per_task\.(?!(?:0|1)\.)\d+\.")


def _trainable(model: torch.nn.Module) -> dict[str, int]:
    """Name -> the fingerprint of each parameter the optimizer trains and the synthetic batch reaches."""
    return {
        name: _fingerprint(p)
        for name, p in model.named_parameters()
        if p.requires_grad and not _ABSENT_TASK.search(name)
    }


_SAME_WIDTH_INT = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _fingerprint(tensor: torch.Tensor) -> int:
    """The sum of the elements' bit patterns read as integers: a change of any element changes it (a weight
    moved by its last bit included) unless changes elsewhere cancel it exactly. A copy of every parameter
    would take the model's size in memory again: on a machine where fresh memory is slow to touch (first-touch
    page faults) the optimizer's state then pays for it."""
    values = tensor.detach().contiguous()
    return int(values.view(_SAME_WIDTH_INT[values.element_size()]).sum(dtype=torch.int64))


def check_gatherable_stats(module, inputs, output) -> None:
    """A forward hook on the model: what ESPnet's trainer asserts of its output on several GPUs
    (``recursive_average``, never run in one process): every reported statistic a tensor of the batch
    weight's shape."""
    if not (isinstance(output, tuple) and len(output) == 3 and isinstance(output[1], dict)):
        return
    _, stats, weight = output
    for key, value in stats.items():
        if isinstance(value, torch.Tensor) and value.shape != weight.shape:
            raise RuntimeError(
                f"{type(module).__name__} reports {key!r} of shape {tuple(value.shape)}, not the batch "
                f"weight's {tuple(weight.shape)}: ESPnet's trainer stops on it with several GPUs "
                "(espnet2.torch_utils.recursive_op.recursive_average)"
            )


class GradientUse:
    """Counts, per trainable parameter of ``model``, the backward passes that reached it (a hook after its
    gradient is accumulated: once per pass however often the parameter was used). ``partly_unused``: the
    names some pass did not reach, which DistributedDataParallel would wait for (``unused_parameters``)."""

    def __init__(self, model: torch.nn.Module):
        self.passes: dict[str, int] = {}
        self.handles = []
        for name, p in model.named_parameters():
            if p.requires_grad:
                self.passes[name] = 0
                self.handles.append(p.register_post_accumulate_grad_hook(self._counter(name)))

    def _counter(self, name: str):
        def count(_):
            self.passes[name] += 1

        return count

    def partly_unused(self) -> list[str]:
        most = max(self.passes.values(), default=0)
        return [name for name, n in self.passes.items() if n < most]

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def _torch_modes() -> tuple:
    """The process-wide settings ESPnet's ``main_worker`` changes."""
    cudnn = torch.backends.cudnn
    return (cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32,
            torch.backends.cuda.matmul.allow_tf32, torch.is_anomaly_enabled())  # fmt: skip


def _restore_torch_modes(modes: tuple) -> None:
    cudnn = torch.backends.cudnn
    enabled, benchmark, deterministic, cudnn_tf32, matmul_tf32, anomaly = modes
    cudnn.enabled, cudnn.benchmark, cudnn.deterministic = enabled, benchmark, deterministic
    cudnn.allow_tf32 = cudnn_tf32
    torch.backends.cuda.matmul.allow_tf32 = matmul_tf32
    torch.autograd.set_detect_anomaly(anomaly)


def _set_main_worker_modes(args: argparse.Namespace) -> None:
    """What ``AbsTask.main_worker`` sets from the options before it builds the model: cuDNN's modes
    (``--cudnn_*``; ESPnet's default is deterministic), anomaly detection and TensorFloat32
    (``--use_tf32``, which ESPnet refuses with ``--use_amp``)."""
    if args.use_tf32 and args.use_amp:
        raise ConfigError(
            "ESPnet refuses use_tf32 with use_amp (main_worker asserts)", key="use_tf32"
        )
    cudnn = torch.backends.cudnn
    cudnn.enabled, cudnn.benchmark = args.cudnn_enabled, args.cudnn_benchmark
    cudnn.deterministic = args.cudnn_deterministic
    torch.autograd.set_detect_anomaly(args.detect_anomaly)
    if args.use_tf32:
        torch.backends.cuda.matmul.allow_tf32 = cudnn.allow_tf32 = True


def _train_args(task_cls, config: Path, data: list[str], ngpu: int, extra_args: Sequence[str]):
    """The task's parsed training options: the config, the synthetic corpus, then ``extra_args``."""
    argv = ["--config", str(config), *data, "--ngpu", str(ngpu), "--num_workers", "0", *extra_args]
    return task_cls.get_parser().parse_args(argv)


def corpus_batches(
    task: str,
    config: str | Path,
    size: CorpusSize,
    vocab: int = 100,
    extra_args: Sequence[str] = (),
) -> list[int]:
    """Utterances in each batch the config's own sampler makes of the synthetic corpus ``size`` (with
    ``extra_args``), without building the model: what ``check_whole_batches`` checks before a timing."""
    from espnet2.train.distributed_utils import DistributedOption, resolve_distributed_mode
    from espnet2.utils.build_dataclass import build_dataclass

    task_cls = _task_class(task)
    config = Path(config).resolve()
    settings = yaml.safe_load(config.read_text()) or {}
    root = Path(tempfile.mkdtemp(prefix="batches."))
    previous = Path.cwd()
    try:
        os.chdir(root)
        data = SyntheticCorpus(root, task, settings, vocab, size=size).write()
        args = _train_args(task_cls, config, data, 0, extra_args)
        resolve_distributed_mode(args)
        distributed = build_dataclass(DistributedOption, args)
        factory = task_cls.build_iter_factory(args, distributed, mode="train")
        return [len(batch) for batch in factory.sampler.batches]
    finally:
        os.chdir(previous)
        shutil.rmtree(root, ignore_errors=True)


def check_whole_batches(factory, size: CorpusSize) -> None:
    """Refuse a synthetic corpus whose utterances the config's sampler cannot split into batches of one
    size: the iterator cycles through them, so the timed updates would mix full batches with the remainder
    (64 utterances of 125 video frames at 4,000 frames a batch make batches of 31, 31 and 2), and inputs per
    update and GPU hours would describe neither. ``factory``: ESPnet's sequence iterator factory."""
    batches = getattr(getattr(factory, "sampler", None), "batches", None)
    if not batches:
        return
    sizes = sorted({len(batch) for batch in batches})
    if len(sizes) > 1:
        full = sizes[-1]
        raise ConfigError(
            f"{size.utterances} synthetic utterances make batches of {sizes} utterances: the timed "
            f"updates would mix them; give a multiple of {full} "
            f"(e.g. {full * max(1, round(size.utterances / full))})",
            key="--utterances",
        )


def preflight(
    task: str,
    config: str | Path,
    vocab: int = 100,
    updates: int = 2,
    ngpu: int = 0,
    extra_args: Sequence[str] = (),
    workdir: str | Path | None = None,
    size: CorpusSize | None = None,
    timer=None,
    frozen_updates: int | None = None,
) -> PreflightResult:
    """Train ``config`` for ``updates`` optimizer updates on a synthetic corpus; see the module docstring.

    ``size``: a larger corpus than the default two utterances; ``timer``: an object whose ``wrap(iterator,
    accum_grad, device)`` sees every batch the trainer takes and ``stop()`` runs when training ended
    (espnet_ext.analysis.train_timing); ``frozen_updates``: how many of the updates a model with
    ``freeze_finetune_updates`` runs with its encoder frozen (default: all but the last)."""
    from espnet2.torch_utils.set_all_random_seed import set_all_random_seed
    from espnet2.train.distributed_utils import DistributedOption, resolve_distributed_mode
    from espnet2.train.reporter import Reporter
    from espnet2.utils.build_dataclass import build_dataclass

    task_cls = _task_class(task)
    config = Path(config).resolve()
    settings = yaml.safe_load(config.read_text()) or {}
    owned = workdir is None
    root = Path(tempfile.mkdtemp(prefix="preflight.")) if owned else Path(workdir)
    root.mkdir(parents=True, exist_ok=True)
    previous = Path.cwd()
    saved_modes = _torch_modes()
    try:
        os.chdir(root)  # relative paths in the config resolve as in the recipe directory
        data = SyntheticCorpus(root, task, settings, vocab, size=size).write()
        args = _train_args(task_cls, config, data, ngpu, extra_args)
        iterations = updates * int(args.accum_grad)
        args.num_iters_per_epoch = iterations
        device = "cuda" if ngpu > 0 else "cpu"
        # AbsTask.main's and main_worker's steps up to training (one process), then one epoch.
        resolve_distributed_mode(args)
        distributed = build_dataclass(DistributedOption, args)
        distributed.init_options()
        set_all_random_seed(args.seed)
        _set_main_worker_modes(args)  # restored afterwards
        model = task_cls.build_model(args).to(dtype=getattr(torch, args.train_dtype), device=device)
        # freeze_finetune_updates (AV-HuBERT's, ESPnetVSRModel) would keep the encoder still for longer
        # than a preflight runs: the updates but the last run frozen (or ``frozen_updates`` of them), the
        # last one trains everything.
        if getattr(model, "freeze_finetune_updates", 0):
            frozen_updates = updates - 1 if frozen_updates is None else frozen_updates
            model.freeze_finetune_updates = frozen_updates
        for frozen in args.freeze_param:
            for name, p in model.named_parameters():
                if name == frozen or name.startswith(frozen + "."):
                    p.requires_grad = False
        optimizers = task_cls.build_optimizers(args, model=model)
        schedulers = _build_schedulers(args, optimizers)
        factory = task_cls.build_iter_factory(args, distributed, mode="train")
        if size is not None:
            check_whole_batches(factory, size)
        iterator = factory.build_iter(1)
        if timer is not None:
            iterator = timer.wrap(iterator, int(args.accum_grad), device)
        trainer = task_cls.trainer
        options = trainer.build_options(args)
        scaler = torch.amp.GradScaler(device) if args.use_amp else None
        start = _trainable(model)
        gradient_use = GradientUse(model)
        stats_check = model.register_forward_hook(check_gatherable_stats)
        reporter = Reporter()
        reporter.set_epoch(1)
        with reporter.observe("train") as sub:
            trainer.train_one_epoch(
                model=model,
                iterator=iterator,
                optimizers=optimizers,
                schedulers=schedulers,
                scaler=scaler,
                reporter=sub,
                summary_writer=None,
                options=options,
                distributed_option=distributed,
            )
        if timer is not None:
            timer.stop()
        gradient_use.remove()
        stats_check.remove()
        changed, unchanged = 0, []
        for name, p in model.named_parameters():
            if name not in start:
                continue
            if _fingerprint(p) == start[name]:
                unchanged.append(name)
            else:
                changed += p.numel()
        return PreflightResult(
            config=str(config),
            updates=updates,
            iterations=iterations,
            train_loss=float(reporter.get_value("train", "loss")),
            parameters=sum(p.numel() for name, p in model.named_parameters() if name in start),
            changed=changed,
            unchanged_names=unchanged,
            partly_unused=gradient_use.partly_unused(),
            unused_parameters=bool(args.unused_parameters),
        )
    finally:
        _restore_torch_modes(saved_modes)
        os.chdir(previous)
        if owned:
            shutil.rmtree(root, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", required=True, choices=sorted(TASKS))
    parser.add_argument("--config", required=True)
    parser.add_argument(
        "--vocab", type=int, default=100, help="token list size (the recipe's nbpe)"
    )
    parser.add_argument("--updates", type=int, default=2)
    parser.add_argument("--ngpu", type=int, default=0)
    parser.add_argument(
        "--keep", help="keep the synthetic corpus and the experiment in this directory"
    )
    args, extra = parser.parse_known_args(argv)
    logging.basicConfig(level=logging.WARNING)
    result = preflight(
        args.task, args.config, args.vocab, args.updates, args.ngpu, extra, args.keep
    )
    print(
        f"{result.config}: {result.updates} updates ({result.iterations} iterations), "
        f"train loss {result.train_loss:.4g}, {result.changed_fraction:.1%} of "
        f"{result.parameters:,} trainable parameters changed"
    )
    for name in result.unchanged_names:
        print(f"  unchanged: {name}")
    if not result.ddp_ready:
        print(
            "not ready for several GPUs: some backward passes did not reach "
            f"{', '.join(result.partly_unused[:10])}"
            f"{', ...' if len(result.partly_unused) > 10 else ''}: DistributedDataParallel would stop "
            "the run; set unused_parameters: true in the config"
        )
    ok = np.isfinite(result.train_loss) and result.changed > 0 and result.ddp_ready
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
