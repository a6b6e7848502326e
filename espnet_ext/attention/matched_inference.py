"""``--matched_inference true|false`` for decoding: relax at test time or not, without retraining.

Relaxation in training is identical for both of the paper's rows ("relaxed ... attention" and "+ matched
inference"); they differ only in decoding. Our inference entry points take this option, build the model as
ESPnet2 does, then switch every relaxed attention module of the model (the training config's value is the
default when the option is absent).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

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


def pop_option(argv: Sequence[str]) -> tuple[bool | None, list[str]]:
    """(value or None, argv without the option) -- the option is ours, ESPnet's parser must not see it."""
    rest, value, args = [], None, list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == OPTION or arg.startswith(OPTION + "="):
            if "=" in arg:
                text = arg.split("=", 1)[1]
            elif i + 1 < len(args):
                i += 1
                text = args[i]
            else:
                raise ConfigError(f"{OPTION} needs a value: true or false")
            if text.lower() not in ("true", "false"):
                raise ConfigError(f"{OPTION} must be true or false, got '{text}'")
            value = text.lower() == "true"
        else:
            rest.append(arg)
        i += 1
    return value, rest


@contextmanager
def applied_on_build(task_cls, matched: bool | None) -> Iterator[None]:
    """While active, models built by ``task_cls.build_model_from_file`` get matched inference set.

    ESPnet's builder is wrapped (called unchanged, its result adjusted) and restored on exit, so the task
    class is left as it was found, also when decoding fails.
    """
    if matched is None:
        yield
        return
    name = "build_model_from_file"
    own = name in vars(task_cls)  # else inherited (AbsTask's): restoring means removing ours
    original = inspect.getattr_static(task_cls, name)
    build = getattr(task_cls, name)

    def build_with_relaxation(*args, **kwargs):
        model, train_args = build(*args, **kwargs)
        if set_matched_inference(model, matched) == 0 and matched:
            raise ConfigError(
                f"{OPTION} true, but the model has no relaxed attention (γ > 0) to apply at test time"
            )
        return model, train_args

    setattr(task_cls, name, build_with_relaxation)
    try:
        yield
    finally:
        if own:
            setattr(task_cls, name, original)
        else:
            delattr(task_cls, name)
