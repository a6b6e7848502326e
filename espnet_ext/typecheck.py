"""ESPnet's run-time type checks (typeguard's ``@typechecked``) off unless asked for.

ESPnet decorates hundreds of functions with ``@typechecked``; typeguard instruments each one at import time by
re-compiling its source, which costs about 7 s of CPU in every process that imports ESPnet's training or
inference entry points (12 s -> 4.5 s for ``espnet2.bin.asr_train`` + ``asr_inference`` here), and a recipe
starts dozens of such processes. typeguard itself makes the decorator a no-op in optimised mode (``python -O``)
because the checks are meant for development; we do the same without ``-O`` (which would also strip ESPnet's
asserts). ``ESPNET_EXT_TYPECHECK=1`` keeps the checks, e.g. when developing a new model class.

It only takes effect when ``espnet_ext`` is imported before ESPnet, as our ``python -m espnet_ext.bin.*``
entry points do.
"""

from __future__ import annotations

import os

ENV = "ESPNET_EXT_TYPECHECK"


def _unchecked(target=None, **_options):
    """typeguard.typechecked's signature, returning the target unchanged (also as ``@typechecked()``)."""
    return (lambda function: function) if target is None else target


def configure(environ=os.environ) -> bool:
    """Switch typeguard's decorator off unless ``ESPNET_EXT_TYPECHECK=1``; True when the checks stay on."""
    if environ.get(ENV, "0") == "1":
        return True
    import typeguard

    typeguard.typechecked = _unchecked
    return False
