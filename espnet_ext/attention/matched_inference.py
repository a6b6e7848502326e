"""``--matched_inference true|false`` for decoding: relax at test time or not, without retraining.

Relaxation in training is identical for both of the paper's rows ("relaxed ... attention" and "+ matched
inference"); they differ only in decoding. Our inference entry points take this option, build the model as
ESPnet2 does, then switch every relaxed attention module of the model (the training config's value is the
default when the option is absent): espnet_ext.bin.inference_entry for ESPnet's tasks, vsr_inference.
"""

from __future__ import annotations

import torch

from espnet_ext.attention.relaxed import RelaxedMultiHeadedAttention
from espnet_ext.errors import ConfigError

OPTION = "--matched_inference"


def set_matched_inference(model: torch.nn.Module, matched: bool) -> int:
    """Switch matched inference on every relaxed attention module; returns how many are relaxed (γ > 0)."""
    relaxed = [
        m for m in model.modules() if isinstance(m, RelaxedMultiHeadedAttention) and m.gamma > 0
    ]
    for module in relaxed:
        module.matched_inference = matched
    return len(relaxed)


def apply_matched_inference(model: torch.nn.Module, matched: bool | None) -> None:
    """The option's value on a built model (None: as trained); true for a model with nothing relaxed is
    a ConfigError."""
    if matched is not None and set_matched_inference(model, matched) == 0 and matched:
        raise ConfigError(
            f"{OPTION} true, but the model has no relaxed attention (γ > 0) to apply at test time"
        )
