"""Shallow fusion (log P + lambda log P_LM) needs the LM to score the model's own token ids.

ESPnet2's inference adds an LM scorer without comparing vocabularies: an LM trained with another token list
silently scores the wrong tokens. Our inference entry points refuse that before decoding starts.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from espnet_ext.argv import option_value
from espnet_ext.errors import ConfigError


def token_list(config: str) -> list[str]:
    path = Path(config)
    try:
        tokens = yaml.safe_load(path.read_text(encoding="utf-8")).get("token_list")
    except (OSError, yaml.YAMLError, AttributeError) as e:
        raise ConfigError(f"cannot read the training config: {e}", path=path) from e
    if isinstance(tokens, str):  # a path, as given at training time
        tokens = Path(tokens).read_text(encoding="utf-8").split()
    if not tokens:
        raise ConfigError("has no token_list", path=path)
    return list(tokens)


def check_lm_vocabulary(model_config: str, lm_config: str) -> None:
    model_tokens, lm_tokens = token_list(model_config), token_list(lm_config)
    if model_tokens == lm_tokens:
        return
    if len(model_tokens) != len(lm_tokens):
        detail = f"{len(model_tokens)} tokens vs {len(lm_tokens)}"
    else:
        i = next(i for i, (a, b) in enumerate(zip(model_tokens, lm_tokens)) if a != b)
        detail = f"token id {i} is '{model_tokens[i]}' in the model but '{lm_tokens[i]}' in the LM"
    raise ConfigError(
        f"the LM's vocabulary differs from the model's ({detail}); train the LM with the model's token list",
        path=lm_config,
    )


def refuse_mismatched_lm(argv: Sequence[str], model_config_option: str) -> None:
    """Exit with the reason when ``--lm_train_config`` does not share the model's vocabulary."""
    model_config = option_value(argv, model_config_option)
    lm_config = option_value(argv, "--lm_train_config")
    if model_config and lm_config:
        try:
            check_lm_vocabulary(model_config, lm_config)
        except ConfigError as e:
            sys.exit(f"error: {e}")
