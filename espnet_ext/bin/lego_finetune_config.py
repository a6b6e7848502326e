"""The training config of a composed LegoNN model's end-to-end fine-tuning: the composed model's config.yaml
(lego_compose) with a settings YAML on top, the one merge both LegoNN recipes use (egs/wmt/mt1 compose,
egs/europarl/asr1 fine-tuning and composition).

    python -m espnet_ext.bin.lego_finetune_config --composed exp/x/config.yaml --settings conf/finetune.yaml \
        [--trained conf/train_lego.yaml] --out exp/x/finetune.yaml

Rules:
- the keys that define the composed model (``MODEL_KEYS``) are the composed config's: settings that set one
  are refused (the architecture is the modules');
- ``model_conf`` is merged key by key: the config the modules were trained with (``--trained``: its loss
  settings, e.g. ``lsm_weight``, ``on_short_ctc``), then the composed config's (its interface keys), then the
  settings'. lego_compose writes only the interface keys, so without the training config's a fine-tuning
  whose settings do not repeat them would train without label smoothing and with ``on_short_ctc: error``.
  The training config's weight tying (``TYING_KEYS``, e.g. one embedding table for source and decoder,
  §V-B) is not taken: the composed modules come from different trainings and keep their own tables;
- every other key of the settings replaces the composed config's.

``--out`` is written atomically and only when its content changes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from espnet_ext.errors import ConfigError, InputError, reports_input_errors
from espnet_ext.fileio import atomic_write

MODEL_KEYS = ("model", "encoder", "decoder", "encoder_conf", "decoder_conf", "token_list")
# ESPnet's model_conf options that tie weights across modules: architecture, not loss settings
TYING_KEYS = ("share_encoder_decoder_input_embed", "share_decoder_input_output_embed")


def _mapping(path: str | Path) -> dict:
    try:
        value = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise InputError(f"cannot read: {e}", path=path) from e
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError("a config must be a YAML mapping", path=path)
    return value


def merge(composed: dict, settings: dict, trained: dict | None = None, where: str = "") -> dict:
    """The fine-tuning config (see the module doc); ``where`` names the settings in errors."""
    clash = [k for k in MODEL_KEYS if k in settings]
    if clash:
        raise ConfigError(
            f"sets {clash}, which belong to the composed model", path=where or None, key=clash[0]
        )
    config = dict(composed)
    for key, value in settings.items():
        if key != "model_conf":
            config[key] = value
    trained_conf = (trained or {}).get("model_conf") or {}
    config["model_conf"] = {
        **{k: v for k, v in trained_conf.items() if k not in TYING_KEYS},
        **(composed.get("model_conf") or {}),
        **(settings.get("model_conf") or {}),
    }
    return config


def write_if_changed(config: dict, out: str | Path) -> bool:
    """Write ``config`` to ``out`` unless it already holds it; True when written."""
    text = yaml.safe_dump(config, sort_keys=False)
    out = Path(out)
    if out.is_file() and out.read_text(encoding="utf-8") == text:
        return False
    with atomic_write(out) as f:
        f.write(text)
    return True


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--composed", required=True, help="config.yaml written by lego_compose")
    parser.add_argument(
        "--settings", required=True, help="YAML of the fine-tuning's training settings"
    )
    parser.add_argument("--trained", help="training config of the composed modules (loss settings)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    trained = _mapping(args.trained) if args.trained else None
    config = merge(_mapping(args.composed), _mapping(args.settings), trained, args.settings)
    if write_if_changed(config, args.out):
        print(f"{args.out}: written", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
