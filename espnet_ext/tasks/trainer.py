"""ESPnet's Trainer, with a checkpoint that survives a job stopped while saving it, and a resumed training
that trains as the uninterrupted one would.

ESPnet writes ``checkpoint.pth`` (model, optimizers, schedulers, reporter: what ``--resume true``
continues from) over the previous one at the end of every epoch. A job stopped while it writes (Slurm's
preemption, a requeue, the time limit) leaves a truncated file, and every rerun dies reading it
(``PytorchStreamReader failed reading zip archive``) where it could have redone one epoch.

Here, once an epoch's validation is done (what ESPnet runs last before it saves), the finished checkpoint
is renamed ``checkpoint.prev.pth`` (a rename, no copy: checkpoints of large models take gigabytes); ESPnet
then writes the new one into a new file, and the next epoch (or the end of training) deletes the previous
one. A run that finds ``checkpoint.pth`` missing or unreadable beside a previous one takes the previous
one back before ESPnet resumes (it redoes that epoch) and says so in the log.

ESPnet writes the epoch's model file (``<N>epoch.pth``, the same weights) and its ``latest.pth`` and
``<phase>.<key>.best.pth`` links after the checkpoint: a job stopped there would resume past an epoch
whose model file is missing or cut short (the n-best average at the end of training and the recipes'
averages read it) and whose links were never made. A resumed run rewrites that file from the
checkpoint and makes the links as ESPnet would have (``repair_last_epoch``).

A resumed ESPnet training also differed from the uninterrupted one in two ways, which this trainer
removes: ESPnet zeroes gradients only after an update, so an epoch's last batches that made no whole
``accum_grad`` update added their gradients to the next epoch's first update (a resumed process starts
with none: here every epoch starts with none), and it checks ``patience`` only after an epoch, so a
training that stopped early trained one more epoch at every resume (``stopped_early``).

Only the process that saves (rank 0) touches the files; under DDP the others wait for it before they
read the checkpoint. Our tasks train with it (``trainer = InterruptSafeTrainer``).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import zipfile
from collections.abc import Sequence
from pathlib import Path

import torch
from espnet2.train.reporter import Reporter
from espnet2.train.trainer import Trainer

from espnet_ext.fileio import atomic_write

CHECKPOINT, PREVIOUS = "checkpoint.pth", "checkpoint.prev.pth"
EPOCH_FILE = re.compile(r"\d+epoch\.pth")  # ESPnet's model file of each epoch


def readable(checkpoint: Path) -> bool:
    """Whether ``checkpoint`` is a whole ``torch.save`` archive: its zip directory, written last, reads
    back (a file cut short has none) and every member's CRC checks, without unpickling anything."""
    try:
        with zipfile.ZipFile(checkpoint) as archive:
            return archive.testzip() is None
    except (OSError, zipfile.BadZipFile):
        return False


def restore_previous(output_dir: Path) -> bool:
    """Before a resume: put ``checkpoint.prev.pth`` back where the last save did not finish. True when
    it did."""
    checkpoint, previous = output_dir / CHECKPOINT, output_dir / PREVIOUS
    if not previous.exists():
        return False
    if checkpoint.exists() and readable(checkpoint):  # saved; stopped before the cleanup
        previous.unlink()
        return False
    state = "unreadable (cut short while saved)" if checkpoint.exists() else "missing"
    logging.warning(
        f"{checkpoint} is {state}: resuming from {previous}, the checkpoint an epoch before it"
    )
    previous.replace(checkpoint)
    return True


def repair_last_epoch(
    output_dir: Path, best_model_criterion: Sequence[Sequence[str]]
) -> int | None:
    """Before a resume: where the last save stopped after ``checkpoint.pth``, its epoch's model file
    rewritten from it (atomically) and ``latest.pth`` and the best-model links made from its reporter, as
    ESPnet makes them. Returns the epoch repaired, None when the files are whole (the newest epoch file
    was written after the checkpoint and reads back: ESPnet writes it last)."""
    checkpoint = output_dir / CHECKPOINT
    if not checkpoint.exists():
        return None
    epoch_files = [f for f in output_dir.glob("*epoch.pth") if EPOCH_FILE.fullmatch(f.name)]
    newest = max(epoch_files, key=lambda f: f.stat().st_mtime, default=None)
    if newest and newest.stat().st_mtime >= checkpoint.stat().st_mtime and readable(newest):
        return None
    state, reporter = _load(checkpoint)
    epoch = reporter.get_epoch()
    model_file = output_dir / f"{epoch}epoch.pth"
    logging.warning(
        f"{model_file} was not saved whole after {checkpoint}: rewritten from it, links remade"
    )
    with atomic_write(model_file, mode="wb") as f:
        torch.save(state["model"], f)
    links = {"latest.pth": epoch}
    for phase, key, mode in best_model_criterion:
        if reporter.has(phase, key):
            links[f"{phase}.{key}.best.pth"] = reporter.get_best_epoch(phase, key, mode)
    for name, linked in links.items():
        link = output_dir / name
        if (output_dir / f"{linked}epoch.pth").exists():
            link.unlink(missing_ok=True)
            link.symlink_to(f"{linked}epoch.pth")
    return epoch


def stopped_early(output_dir: Path, options) -> int | None:
    """The epoch at which the training in ``output_dir`` stopped early (ESPnet's ``patience``), None if it
    did not: ESPnet checks only after an epoch, so a resumed run would train one more epoch every time.
    Reads the checkpoint's reporter."""
    checkpoint = output_dir / CHECKPOINT
    if options.patience is None or not checkpoint.exists():
        return None
    _, reporter = _load(checkpoint)
    criterion = options.early_stopping_criterion
    if not reporter.get_epoch() or not reporter.has(*criterion[:2]):
        return None
    if not reporter.check_early_stopping(options.patience, *criterion):
        return None
    logging.warning(f"{checkpoint}: the training stopped early; not training further")
    return reporter.get_epoch()


class InterruptSafeTrainer(Trainer):
    """``Trainer`` whose ``checkpoint.pth`` is never the only copy while it is being written, and whose
    resumed run trains as the uninterrupted one would: every epoch starts with no gradient (ESPnet would
    add an epoch's last batches that made no whole ``accum_grad`` update to the next epoch's first update,
    which a resumed run never saw), and a training that stopped early stays stopped."""

    @classmethod
    def run(cls, **kwargs) -> None:
        options, distributed = kwargs["trainer_options"], kwargs["distributed_option"]
        output_dir = _saving_dir(options, distributed)
        if options.resume and options.output_dir is not None:
            if output_dir is not None:
                restore_previous(output_dir)
                repair_last_epoch(output_dir, options.best_model_criterion)
            if distributed.distributed:  # the others read the checkpoint once it is put right
                torch.distributed.barrier()
            stopped = stopped_early(Path(options.output_dir), options)
            if stopped is not None:  # ESPnet then trains no epoch and averages its n best
                kwargs["trainer_options"] = dataclasses.replace(options, max_epoch=stopped)
        super().run(**kwargs)
        if output_dir is not None:
            (output_dir / PREVIOUS).unlink(missing_ok=True)

    @classmethod
    def train_one_epoch(cls, **kwargs) -> bool:
        output_dir = _saving_dir(kwargs["options"], kwargs["distributed_option"])
        if output_dir is not None:  # the last epoch's checkpoint is whole by now
            (output_dir / PREVIOUS).unlink(missing_ok=True)
        for optimizer in kwargs["optimizers"]:
            optimizer.zero_grad()
        return super().train_one_epoch(**kwargs)

    @classmethod
    def validate_one_epoch(cls, **kwargs) -> None:
        super().validate_one_epoch(**kwargs)
        output_dir = _saving_dir(kwargs["options"], kwargs["distributed_option"])
        if output_dir is not None and (output_dir / CHECKPOINT).exists():
            # ESPnet saves the next one now
            (output_dir / CHECKPOINT).replace(output_dir / PREVIOUS)


def _load(checkpoint: Path) -> tuple[dict, Reporter]:
    """A checkpoint's states, memory-mapped (a tensor is read when used), and its reporter."""
    state = torch.load(checkpoint, map_location="cpu", weights_only=False, mmap=True)
    reporter = Reporter()
    reporter.load_state_dict(state["reporter"])
    return state, reporter


def _saving_dir(options, distributed_option) -> Path | None:
    """The output directory where this process writes the checkpoint (ESPnet: without DDP, or rank 0);
    None for the others, and for a trainer run without one (a preflight's single epoch)."""
    if distributed_option.distributed and distributed_option.dist_rank != 0:
        return None
    return None if options.output_dir is None else Path(options.output_dir)
