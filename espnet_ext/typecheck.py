"""ESPnet's run-time type checks (typeguard's ``@typechecked``) off unless asked for.

ESPnet decorates hundreds of functions with ``@typechecked``; typeguard instruments each one at import time by
re-compiling its source, which costs about 7 s of CPU in every process that imports ESPnet's training or
inference entry points (12 s -> 4.5 s for ``espnet2.bin.asr_train`` + ``asr_inference`` here), and a recipe
starts dozens of such processes. typeguard itself makes the decorator a no-op in optimised mode (``python -O``)
because the checks are meant for development; we do the same without ``-O`` (which would also strip ESPnet's
asserts). ``ESPNET_EXT_TYPECHECK=1`` keeps the checks, e.g. when developing a new model class.

The switch is made by ``espnet_ext.registry.install()``, which our entry points call before they import
ESPnet; tools/upstream/espnet-typecheck-switch.patch is the ESPnet change that would replace it.
"""

from __future__ import annotations

import os

ENV = "ESPNET_EXT_TYPECHECK"


def unchecked(target=None, **_options):
    """typeguard.typechecked's signature, returning the target unchanged (also as ``@typechecked()``)."""
    return (lambda function: function) if target is None else target


def wanted(environ=os.environ) -> bool:
    """True when ``ESPNET_EXT_TYPECHECK=1`` asks for ESPnet's type checks."""
    return environ.get(ENV, "0") == "1"
