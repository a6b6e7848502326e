"""Average of the last N epochs (fairseq's ``average_checkpoints.py --num-epoch-checkpoints N``).

Shen et al.'s IWSLT recipe (which the relaxed-attention paper adopts for MT) decodes with the average of
the last 5 epochs; ESPnet2 only averages the n best by a criterion. Each parameter of the result is
the elementwise mean over the epochs, θ̄ = (1/N) Σ_e θ_e; integer buffers (e.g. BatchNorm's
``num_batches_tracked``) get the floor of the mean (ESPnet's n-best averaging sums them instead, so a
module that must survive both keeps such values in float buffers).

ESPnet keeps only the ``keep_nbest_models`` best epoch files by each ``best_model_criterion``; the
criterion ``[train, total_count, max]`` (iterations so far, growing with every epoch) makes its
n best the last n epochs, so those files stay on disk. ESPnet then also writes
``train.total_count.ave_<n>best.pth``, but that file is not the mean when an earlier criterion's n best
share epochs with it: ESPnet 202511's ``average_nbest_models`` accumulates into a cached state dict that a
previous criterion has already modified (measured: 0.75 / 0.25 weights for 2 shared epochs). The first
criterion's average is right; for the last epochs use ``last<N>.pth`` from here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import torch

from espnet_ext.errors import ConfigError, InputError
from espnet_ext.fileio import atomic_write

KEEP_LAST_CRITERION = ["train", "total_count", "max"]


def epoch_file(exp_dir: Path, epoch: int) -> Path:
    return Path(exp_dir) / f"{epoch}epoch.pth"


def last_epoch(exp_dir: Path) -> int:
    """The epoch ESPnet trained last: the target of ``latest.pth``, else the highest ``<e>epoch.pth``."""
    exp_dir = Path(exp_dir)
    latest = exp_dir / "latest.pth"
    if latest.is_symlink():
        name = os.readlink(latest)
        if name.endswith("epoch.pth") and name[: -len("epoch.pth")].isdigit():
            return int(name[: -len("epoch.pth")])
    epochs = [int(p.name[:-9]) for p in exp_dir.glob("*epoch.pth") if p.name[:-9].isdigit()]
    if not epochs:
        raise InputError(
            "no <epoch>epoch.pth files (is this an ESPnet training directory?)", exp_dir
        )
    return max(epochs)


def last_epoch_files(exp_dir: Path, n: int, upto: int | None = None) -> list[Path]:
    """Files of epochs upto-n+1 .. upto (upto: the last trained epoch); each must exist."""
    if n < 1:
        raise ConfigError(f"must be >= 1, got {n}", key="--last")
    upto = last_epoch(exp_dir) if upto is None else upto
    if upto - n + 1 < 1:
        raise ConfigError(
            f"averaging the last {n} epochs needs {n} epochs, training has {upto}", key="--last"
        )
    files = [epoch_file(exp_dir, e) for e in range(upto - n + 1, upto + 1)]
    for path in files:
        if not path.exists():
            raise InputError(
                "missing: ESPnet deletes epochs outside the keep_nbest_models best of each "
                f"best_model_criterion; add {KEEP_LAST_CRITERION} to the training config to keep "
                "the last ones",
                path,
            )
    return files


def _load(path: Path) -> dict:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # a truncated or foreign file
        raise InputError(f"cannot load as a state dict: {e}", path) from e
    if not isinstance(state, dict):
        raise InputError(f"not a state dict (a {type(state).__name__})", path)
    return state


@torch.no_grad()
def average_state_dicts(paths: Sequence[Path]) -> dict:
    """Elementwise mean of the state dicts in ``paths`` (same keys and shapes, else InputError)."""
    if not paths:
        raise ConfigError("nothing to average")
    first = _load(paths[0])
    total = {k: v.double() if v.is_floating_point() else v.clone() for k, v in first.items()}
    for path in paths[1:]:
        state = _load(path)
        if state.keys() != first.keys():
            diff = sorted(set(state) ^ set(first))[:5]
            raise InputError(f"parameters differ from {paths[0]}: {diff}", path)
        for k, v in state.items():
            if v.shape != first[k].shape:
                raise InputError(f"{k}: shape {tuple(v.shape)} != {tuple(first[k].shape)}", path)
            total[k] += v.double() if v.is_floating_point() else v
    n = len(paths)
    return {
        k: (v / n).to(first[k].dtype) if first[k].is_floating_point() else v // n
        for k, v in total.items()
    }


def write_average(paths: Sequence[Path], out: Path) -> Path:
    """Average ``paths`` into ``out`` (written whole or not at all)."""
    average = average_state_dicts(paths)
    with atomic_write(out, "wb") as f:
        torch.save(average, f)
    return Path(out)
