"""Average of the last N epochs (fairseq's ``average_checkpoints.py --num-epoch-checkpoints N``).

Shen et al.'s IWSLT recipe (which the relaxed-attention paper adopts for MT) decodes with the average of
the last 5 epochs; ESPnet2 only averages the n best by a criterion. Each parameter of the result is
the elementwise mean over the epochs, θ̄ = (1/N) Σ_e θ_e; integer buffers (e.g. BatchNorm's
``num_batches_tracked``) get the floor of the mean (ESPnet's n-best averaging sums them instead, so a
module that must survive both keeps such values in float buffers).

ESPnet keeps only the ``keep_nbest_models`` best epoch files by each ``best_model_criterion``; the
criterion ``[train, total_count, max]`` (iterations so far, growing with every epoch) makes its
n best the last n epochs, so those files stay on disk. ``training_args`` gives the options that make a
training keep them whatever its config says (utils/pipeline.sh's train_model adds them when the pipeline
decodes ``last<N>.pth``), and refuses, before any training, a training of fewer than N epochs.

ESPnet then also writes ``train.total_count.ave_<n>best.pth``, but that file is not the mean when an
earlier criterion's n best share epochs with it: ESPnet 202511's ``average_nbest_models`` accumulates into a
cached state dict that a previous criterion has already modified (measured: 0.75 / 0.25 weights for 2 shared
epochs). The first criterion's average is right; for the last epochs use ``last<N>.pth`` from here.

``window<N>.<phase>.<key>.<max|min>.pth`` is the LegoNN paper's selection (§V-B: "we average a moving
window of 10 checkpoints and pick the one with the best validation BLEU score"): of every run of N
consecutive epochs, the one whose mean per-epoch value of ``<phase>.<key>`` (ESPnet's reporter in
``checkpoint.pth``: e.g. ``valid.bleu``, which MT models report with ``report_bleu``) is best, averaged.
The window is ranked by its epochs' own scores, not by re-decoding each average (N-1 of every N decodings
saved); ties go to the later window. Every epoch file must survive training: ``training_args`` keeps all
of them (``keep_nbest_models`` >= ``max_epoch`` under the total-count criterion).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from pathlib import Path

from espnet_ext.errors import ConfigError, InputError
from espnet_ext.fileio import atomic_write

KEEP_LAST_CRITERION = ["train", "total_count", "max"]
LAST_N = re.compile(r"last([1-9][0-9]*)\.pth")
WINDOW = re.compile(r"window([1-9][0-9]*)\.(train|valid)\.([A-Za-z0-9_]+)\.(max|min)\.pth")
# ESPnet 202511's defaults (espnet2/tasks/abs_task.py) for what a config and the command line leave unset
ESPNET_DEFAULTS = {
    "max_epoch": 40,
    "best_model_criterion": [
        ["train", "loss", "min"],
        ["valid", "loss", "min"],
        ["train", "acc", "max"],
        ["valid", "acc", "max"],
    ],
    "keep_nbest_models": [10],
}


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
                f"best_model_criterion; a training run by a pipeline with --inference_model "
                f"last{n}.pth keeps them (training_args), or add {KEEP_LAST_CRITERION} to its config",
                path,
            )
    return files


def last_n(model: str) -> int | None:
    """N of an inference model named ``last<N>.pth``, else None."""
    match = LAST_N.fullmatch(model or "")
    return int(match.group(1)) if match else None


def window_spec(model: str) -> tuple[int, str, str, str] | None:
    """(N, phase, key, max|min) of an inference model named ``window<N>.<phase>.<key>.<mode>.pth``."""
    match = WINDOW.fullmatch(model or "")
    return (int(match.group(1)), *match.group(2, 3, 4)) if match else None


def epochs_needed(model: str) -> int | None:
    """Epoch files a model name averages (``last<N>`` / ``window<N>...``), else None."""
    spec = window_spec(model)
    return spec[0] if spec else last_n(model)


def reported_values(exp_dir: Path, phase: str, key: str) -> dict[int, float]:
    """{epoch: ``phase.key``} from the reporter ESPnet's trainer saves in ``exp_dir/checkpoint.pth``."""
    import torch

    path = Path(exp_dir) / "checkpoint.pth"
    if not path.is_file():
        raise InputError("no checkpoint.pth (ESPnet writes it after every epoch)", path)
    try:  # ESPnet's own file: the reporter holds numpy scalars, so not weights_only
        stats = torch.load(path, map_location="cpu", weights_only=False)["reporter"]["stats"]
    except Exception as e:
        raise InputError(f"cannot read ESPnet's reporter from it: {e}", path) from e
    values = {int(e): float(v[phase][key]) for e, v in stats.items() if key in v.get(phase, {})}
    if not values:
        keys = sorted({f"{ph}.{k}" for v in stats.values() for ph in v for k in v[ph]})
        raise ConfigError(
            f"the training reported no {phase}.{key} (it has {keys}; MT models report valid.bleu "
            "only with model_conf.report_bleu)",
            key="--inference_model",
        )
    return values


def best_window(values: dict[int, float], n: int, mode: str) -> list[int]:
    """The N consecutive epochs, all reported (not NaN), with the best mean value; ties: the later."""
    if mode not in ("max", "min"):
        raise ConfigError(f"must be max or min, got {mode!r}", key="mode")
    sign = 1.0 if mode == "max" else -1.0
    best, best_score = None, None
    for start in sorted(values):
        epochs = list(range(start, start + n))
        window = [values.get(e, math.nan) for e in epochs]
        if any(math.isnan(v) for v in window):
            continue
        score = sign * sum(window) / n
        if best_score is None or score >= best_score:
            best, best_score = epochs, score
    if best is None:
        raise ConfigError(
            f"no {n} consecutive epochs with reported values (epochs {sorted(values)})",
            key="--inference_model",
        )
    return best


def window_files(exp_dir: Path, n: int, phase: str, key: str, mode: str) -> list[Path]:
    """The epoch files of ``best_window`` of ``phase.key`` (each must exist)."""
    epochs = best_window(reported_values(exp_dir, phase, key), n, mode)
    return last_epoch_files(exp_dir, n, upto=epochs[-1])


def _command_options(command: Sequence[str]) -> dict[str, list[str]]:
    """``--name value...`` of an ESPnet training command (the last occurrence of a name wins)."""
    options, name = {}, None
    for arg in command:
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            options[name] = [value] if eq else []
        elif name is not None:
            options[name].append(arg)
    return options


def training_settings(command: Sequence[str]) -> tuple[str, dict]:
    """(where, {max_epoch, best_model_criterion, keep_nbest_models}) of an ESPnet training command: its
    command line over its ``--config`` YAML over ESPnet's defaults; ``where`` names the config file."""
    import yaml

    options = _command_options(command)
    settings = dict(ESPNET_DEFAULTS)
    where = "the training command"
    if options.get("config"):
        where = options["config"][-1]
        try:
            config = yaml.safe_load(Path(where).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as e:
            raise InputError(f"cannot read the training config: {e}", path=where) from e
        settings.update({k: config[k] for k in ESPNET_DEFAULTS if config.get(k) is not None})
    try:
        if options.get("max_epoch"):
            settings["max_epoch"] = int(options["max_epoch"][-1])
        if options.get("best_model_criterion"):
            settings["best_model_criterion"] = [
                v.split(",") for v in options["best_model_criterion"]
            ]
        if options.get("keep_nbest_models"):
            settings["keep_nbest_models"] = [int(v) for v in options["keep_nbest_models"]]
    except ValueError as e:
        raise ConfigError(f"{where}: {e}", key="training options") from None
    keep = settings["keep_nbest_models"]
    settings["keep_nbest_models"] = [keep] if isinstance(keep, int) else list(keep)
    settings["best_model_criterion"] = [list(c) for c in settings["best_model_criterion"]]
    return where, settings


def training_args(command: Sequence[str], model: str) -> list[str]:
    """Options to append to an ESPnet training ``command`` whose ``model`` (``last<N>.pth``) is decoded:
    the ``[train, total_count, max]`` criterion and ``keep_nbest_models`` >= N, so that ESPnet keeps the
    last N epoch files (``window<N>...``: >= max_epoch, all of them; nothing when the command's settings
    already do). A training of fewer than N epochs
    is refused here, before it starts."""
    n = epochs_needed(model)
    if n is None:
        return []
    where, settings = training_settings(command)
    if settings["max_epoch"] < n:
        what = f"a window of {n}" if window_spec(model) else f"the last {n}"
        raise ConfigError(
            f"--inference_model {model} averages {what} epochs, but this training runs "
            f"{settings['max_epoch']} (max_epoch of {where} or its command line): decode another "
            f"model (e.g. last{settings['max_epoch']}.pth, valid.loss.best.pth) or train {n} epochs",
            key="--inference_model",
        )
    args = []
    criteria = settings["best_model_criterion"]
    if KEEP_LAST_CRITERION not in criteria:
        args += ["--best_model_criterion", *(",".join(c) for c in criteria + [KEEP_LAST_CRITERION])]
    keep = settings["keep_nbest_models"]
    # a window may lie anywhere in the training: every epoch file is kept
    wanted = settings["max_epoch"] if window_spec(model) else n
    if max(keep) < wanted:
        args += ["--keep_nbest_models", *(str(k) for k in keep + [wanted])]
    return args


def _load(path: Path) -> dict:
    try:
        import torch  # here, so that training_args (run before every training) starts fast

        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # a truncated or foreign file
        raise InputError(f"cannot load as a state dict: {e}", path) from e
    if not isinstance(state, dict):
        raise InputError(f"not a state dict (a {type(state).__name__})", path)
    return state


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
    import torch

    with torch.no_grad():
        average = average_state_dicts(paths)
    with atomic_write(out, "wb") as f:
        torch.save(average, f)
    return Path(out)
