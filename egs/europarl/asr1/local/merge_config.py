#!/usr/bin/env python3
"""A composed model's config.yaml with the training settings of a fine-tuning YAML on top (its keys win;
model_conf is merged key by key, so the composed interface keys stay).

local/merge_config.py exp/asr_composed_iv/config.yaml conf/finetune_mini.yaml exp/asr_composed_iv/finetune.yaml
"""

import sys
from pathlib import Path

import yaml

from espnet_ext.fileio import atomic_write

MODEL_KEYS = ("model", "encoder", "decoder", "encoder_conf", "decoder_conf", "token_list")


def main() -> int:
    if len(sys.argv) != 4:
        print(f"usage: {sys.argv[0]} COMPOSED_CONFIG FINETUNE_YAML OUT", file=sys.stderr)
        return 2
    config = yaml.safe_load(Path(sys.argv[1]).read_text(encoding="utf-8"))
    settings = yaml.safe_load(Path(sys.argv[2]).read_text(encoding="utf-8")) or {}
    clash = [k for k in MODEL_KEYS if k in settings]
    if clash:
        print(
            f"error: {sys.argv[2]}: sets {clash}, which belong to the composed model",
            file=sys.stderr,
        )
        return 1
    for key, value in settings.items():
        if key == "model_conf":
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    with atomic_write(sys.argv[3]) as f:
        yaml.safe_dump(config, f, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
