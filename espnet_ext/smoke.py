"""Smoke runs: a recipe's real mode end to end on a tiny corpus in the real release's layout.

``./run.sh --smoke true`` (any pipeline option; utils/pipeline.sh exports ``ESPNET_EXT_SMOKE=true`` so that
every pipeline, job and helper the run starts sees it) runs every stage with the real configs and the real
pipeline options, changing only what a tiny corpus forces:

- vocabularies: SentencePiece's vocabulary size becomes a soft limit (``hard_vocab_limit false``): a few
  sentences cannot give 5,000 or 64,000 pieces; the token list is what the text gives, up to the size asked;
- training (every ESPnet training a pipeline starts, LMs and fine-tuning included): one update per epoch
  (``--num_iters_per_epoch 1 --accum_grad 1``) and ``min(max_epoch, max(2, N))`` epochs, N being the
  epochs of the ``last<N>.pth`` / ``window<N>...pth`` average decoded (so that the averaging runs as in the
  real recipe and still fails where the real training has fewer epochs than it averages); batches counted
  in samples of at most ``BATCH_CAP``; no plots and no TensorBoard logs (``num_att_plot 0``,
  ``use_matplotlib false``, ``use_tensorboard false``: drawing them is most of a tiny epoch's time on a CPU)
  and data loading in the training process (``num_workers 0``: ESPnet starts its loader processes anew
  every epoch, about half of a one-update epoch);
- statistics: ESPnet builds the model to collect them; the statistics stage gets the training's overrides,
  so it builds the narrowed model the run trains (building a real-size one was most of that stage's time);
- decoding: a beam no wider than the (soft-limited) output vocabulary, and hypotheses of at most
  ``MAX_HYPOTHESIS_TOKENS`` (a config that sets ``maxlenratio``): a model of a few updates rarely ends a
  hypothesis, so each utterance would run to the real limit (200 tokens x beam 10: seconds per utterance);
- model widths: every width of the config's ``*_conf`` sections (``WIDTH_KEYS``, nested ones included)
  divided by ``WIDTH_DIVISOR`` (at least ``MIN_WIDTH``; model dimensions stay multiples of the attention
  heads), passed as ESPnet's ``--<name>_conf key=value`` overrides; not for a config written beside a model
  of the run (a composed LegoNN model's, its fine-tuning config), whose widths are already small. Depths,
  heads, head candidates, task counts, kernel sizes, strides, dropout, optimiser, scheduler, batch and
  model-selection settings stay the config's. Configs never change; one rule for all, so models that must
  fit together (an ST encoder from its ASR model, LegoNN modules composed from two trainings) still fit.

The real sizes are trained by tests/configs (every real config, two updates at full size).

    python -m espnet_ext.smoke train_args [--inference_model last10.pth] -- TRAINING COMMAND...

prints the overrides for the training COMMAND (its ``--config FILE`` and any ``--max_epoch`` after it), one
argument per line.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import yaml

from espnet_ext.decoding.checkpoint_average import epochs_needed
from espnet_ext.errors import ConfigError, InputError, reports_input_errors

ENV = "ESPNET_EXT_SMOKE"
WIDTH_DIVISOR = 8
MIN_WIDTH = 4
# Widths of the models in egs/*/*/conf (transformer / conformer / S2T / LegoNN / Swin / sharp attention / LMs).
WIDTH_KEYS = frozenset(
    {
        "output_size",
        "linear_units",
        "conv_channels",
        "embed_dim",
        "attention_dim",
        "adapter_dim",
        "unit",
        "embed_unit",
        "att_unit",
        "lstm_units",
        "decoder_units",
        "channels",
        "drloc_hidden",
    }
)
# Widths that attention splits into heads: kept a multiple of the head count next to them.
HEAD_SPLIT_KEYS = frozenset({"output_size", "attention_dim", "embed_dim", "unit", "att_unit"})
HEAD_KEYS = ("attention_heads", "num_heads", "head")
DEFAULT_EPOCHS = 2
# Batches counted in samples (ESPnet's unsorted / sorted / folded batch types) of at most this many: one
# update on a whole tiny corpus of 224 x 224 images is minutes on a CPU. Length/numel bins of a few
# utterances or sentences stay the config's.
BATCH_CAP = 8
SAMPLE_BATCH_TYPES = frozenset({"unsorted", "sorted", "folded"})
MAX_HYPOTHESIS_TOKENS = 10


def enabled() -> bool:
    """True inside a smoke run (``ESPNET_EXT_SMOKE=true``, exported by utils/pipeline.sh)."""
    return os.environ.get(ENV, "false") == "true"


def _heads(section: dict) -> int:
    for key in HEAD_KEYS:
        value = section.get(key)
        if isinstance(value, int) and value > 0:
            return value
        if isinstance(value, list) and value and all(isinstance(v, int) and v > 0 for v in value):
            return max(value)  # Swin: heads per stage; the stage widths double with the heads
    return 1


def shrink(value: int, multiple: int = 1) -> int:
    """``value`` / WIDTH_DIVISOR, at least MIN_WIDTH, rounded up to a multiple of ``multiple``."""
    width = max(MIN_WIDTH, value // WIDTH_DIVISOR)
    return math.ceil(width / multiple) * multiple


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _narrowed(section: dict) -> dict:
    """``section`` with its widths narrowed (a copy)."""
    out = dict(section)
    for key, value in width_overrides(section):
        *parents, last = key.split(".")
        node = out
        for parent in parents:
            node[parent] = node = dict(node[parent])
        node[last] = value
    return out


def _preset(section: dict) -> dict:
    """The architecture a ``size: <name>`` option fills in (AV-HuBERT's base / large encoder), under the
    section's own options."""
    if not isinstance(section.get("size"), str) or "output_size" in section:
        return section
    # torch and ESPnet: imported only for such a config, their import notices kept off the printed answer
    with contextlib.redirect_stdout(sys.stderr):
        from espnet_ext.nets.avhubert.encoder import SIZES

    return {**SIZES.get(section["size"], {}), **section}


def width_overrides(section: dict, prefix: str = "") -> Iterator[tuple[str, object]]:
    """``(dotted key, new value)`` for the widths in one ``*_conf`` mapping (nested mappings included; a list
    of mappings, e.g. the modules of a LegoNN encoder, is given whole: ESPnet's dotted keys cannot index; the
    widths of a named ``size`` preset are given explicitly)."""
    section = _preset(section)
    heads = _heads(section)
    for key, value in section.items():
        if isinstance(value, dict):
            yield from width_overrides(value, f"{prefix}{key}.")
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            narrowed = [_narrowed(v) for v in value]
            if narrowed != value:
                yield prefix + key, narrowed
        elif key in WIDTH_KEYS:
            multiple = heads if key in HEAD_SPLIT_KEYS else 1
            if _is_int(value) and value > 0:
                yield prefix + key, shrink(value, multiple)
            elif isinstance(value, list) and value and all(_is_int(v) and v > 0 for v in value):
                yield prefix + key, [shrink(v, multiple) for v in value]


def _format(value: object) -> str:
    if isinstance(value, list) and all(_is_int(v) for v in value):
        return "[" + ",".join(str(v) for v in value) + "]"
    if isinstance(
        value, list
    ):  # one line of YAML flow style, as ESPnet's NestedDictAction reads it
        return yaml.safe_dump(
            value, default_flow_style=True, width=math.inf, sort_keys=False
        ).strip()
    return str(value)


def _batch_size(command: Sequence[str], config: dict) -> int:
    given = [value for option, value in zip(command, command[1:]) if option == "--batch_size"]
    return int(given[-1] if given else config.get("batch_size", 20))  # ESPnet's default: 20


def _config_and_epochs(command: Sequence[str]) -> tuple[Path, int | None]:
    config, max_epoch = None, None
    for option, value in zip(command, command[1:]):
        if option == "--config":
            config = Path(value)
        elif option == "--max_epoch":
            max_epoch = int(value)
    if config is None:
        raise ConfigError("the training command has no --config FILE", key="--config")
    return config, max_epoch


def describes_a_trained_model(config: Path) -> bool:
    """A config beside model files (``*.pth``): written from a model of this run (a LegoNN composition, its
    fine-tuning config), whose widths are already the smoke run's."""
    return any(config.parent.glob("*.pth"))


# ESPnet's options that cost time every epoch whatever its size, their defaults and the smoke run's values.
# It plots the attention of num_att_plot validation utterances (one picture per attention module: most of a
# tiny epoch's minute on a CPU, even for one utterance) and, with use_matplotlib, a curve of every reported
# value (~15 pictures, ~2.5 s of CPU an epoch); use_tensorboard imports TensorBoard into each training
# (~1 s); num_workers data-loader processes start anew for the training and the validation loader of every
# epoch (an mTEDx ASR smoke training of 10 one-update epochs: 31 s with its config's 4, 16.5 s loading in the
# training process, the same loading code).
EPOCH_OVERHEAD_OPTIONS = {
    "num_att_plot": (3, "0"),
    "use_matplotlib": (True, "false"),
    "use_tensorboard": (True, "false"),
    "num_workers": (1, "0"),
}


def _no_epoch_overhead(config: dict) -> list[str]:
    args = []
    for option, (default, off) in EPOCH_OVERHEAD_OPTIONS.items():
        if config.get(option, default) not in (0, False):
            args += [f"--{option}", off]
    return args


def train_args(command: Sequence[str], inference_model: str = "") -> list[str]:
    """The smoke overrides for an ESPnet training ``command`` (see the module doc)."""
    config_path, cli_epochs = _config_and_epochs(command)
    try:
        config = yaml.safe_load(config_path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise InputError(f"cannot read the training config: {e}", path=config_path) from e
    if not isinstance(config, dict):
        raise InputError("a training config must be a YAML mapping", path=config_path)
    max_epoch = cli_epochs or config.get("max_epoch") or DEFAULT_EPOCHS
    averaged = epochs_needed(inference_model or "") or 0
    epochs = min(int(max_epoch), max(DEFAULT_EPOCHS, averaged))
    args = ["--max_epoch", str(epochs), "--num_iters_per_epoch", "1", "--accum_grad", "1"]
    if (
        config.get("batch_type", "folded") in SAMPLE_BATCH_TYPES
        and _batch_size(command, config) > BATCH_CAP
    ):
        args += ["--batch_size", str(BATCH_CAP)]
    if describes_a_trained_model(config_path):
        return args + _no_epoch_overhead(config)
    args += _no_epoch_overhead(config)
    for name, section in config.items():
        if name.endswith("_conf") and isinstance(section, dict):
            for key, value in width_overrides(section):
                args += [f"--{name}", f"{key}={_format(value)}"]
    return args


MODEL_CONFIG_OPTIONS = (
    "--asr_train_config",
    "--st_train_config",
    "--mt_train_config",
    "--train_config",
)


def _length_cap(config: dict) -> list[str]:
    # ESPnet's beam search: a negative maxlenratio is a constant maximum length
    if "maxlenratio" not in config:
        return []
    args = ["--maxlenratio", str(-float(MAX_HYPOTHESIS_TOKENS))]
    return args + (["--minlenratio", "0.0"] if config.get("minlenratio") else [])


def decode_args(command: Sequence[str]) -> list[str]:
    """The smoke overrides of a decoding ``command``: a beam no wider than the output vocabulary (a soft-limited
    vocabulary of a tiny corpus can have fewer units than the config's beam, which ESPnet's beam search
    cannot fill) and hypotheses of at most MAX_HYPOTHESIS_TOKENS; nothing for a decoding without
    ``--config`` or beam."""
    options = dict(zip(command, command[1:]))
    if "--config" not in options:
        return []
    config = yaml.safe_load(Path(options["--config"]).read_text(encoding="utf-8")) or {}
    beam = config.get("beam_size")
    model_config = next((options[o] for o in MODEL_CONFIG_OPTIONS if o in options), None)
    if not isinstance(beam, int):
        return []
    if model_config is None:
        return _length_cap(config)
    token_list = (yaml.safe_load(Path(model_config).read_text(encoding="utf-8")) or {}).get(
        "token_list"
    )
    if isinstance(token_list, str):
        token_list = Path(token_list).read_text(encoding="utf-8").split("\n")
    vocabulary = len([t for t in token_list or [] if t])
    narrow = ["--beam_size", str(vocabulary)] if 0 < vocabulary < beam else []
    return narrow + _length_cap(config)


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m espnet_ext.smoke",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train_args", help="overrides of one training command, one per line")
    train.add_argument(
        "--inference_model",
        default="",
        help="the model decoded (last<N>.pth, window<N>...pth: N epochs)",
    )
    train.add_argument("training", nargs=argparse.REMAINDER, help="-- then the training command")
    decode = sub.add_parser("decode_args", help="overrides of one decoding command, one per line")
    decode.add_argument("decoding", nargs=argparse.REMAINDER, help="-- then the decoding command")
    args = parser.parse_args(argv)
    if args.command == "decode_args":
        command = args.decoding[1:] if args.decoding[:1] == ["--"] else args.decoding
        print("\n".join(decode_args(command)))
        return
    command = args.training[1:] if args.training[:1] == ["--"] else args.training
    print("\n".join(train_args(command, args.inference_model)))


if __name__ == "__main__":
    sys.exit(main())
