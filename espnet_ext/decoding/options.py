"""``eos_threshold``, ``lenpen`` and ``fairseq_stop`` for our ``<task>_inference`` entry points.

These are ours (see espnet_ext.decoding.beam_search): our inference entry points add them to ESPnet's
parser (so they may also stand in its ``--config`` YAML) and our inference classes switch the beam search
they build to ours (espnet_ext.bin.inference_entry); vsr_inference takes them the same way.
"""

from __future__ import annotations

from espnet_ext.errors import ConfigError

KEYS = ("eos_threshold", "lenpen", "fairseq_stop")


def _value(text, key: str, where: str) -> float | bool | None:
    """A number (or none) for eos_threshold / lenpen, true/false for fairseq_stop."""
    if key == "fairseq_stop":
        if isinstance(text, bool) or str(text).lower() in ("true", "false"):
            return text if isinstance(text, bool) else str(text).lower() == "true"
        raise ConfigError(f"{where}: must be true or false, got {text!r}", key=key)
    if text is None or (isinstance(text, str) and text.lower() in ("none", "null", "")):
        return None
    try:
        return float(text)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: must be a number or none, got {text!r}", key=key) from None


def checked_value(text, key: str, where: str = "command line") -> float | bool | None:
    """The value of one of our keys, checked (ConfigError naming ``where`` and the key)."""
    if key not in KEYS:
        raise ConfigError(f"{where}: not one of {', '.join(KEYS)}", key=key)
    return _value(text, key, where)


def take_ours(config: dict, where: str) -> dict:
    """{key: value} of our keys in a decoding config mapping, popped from it and checked (``where``
    names the file in errors)."""
    return {k: _value(config.pop(k), k, where) for k in KEYS if k in config}
