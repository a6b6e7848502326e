"""``eos_threshold``, ``lenpen`` and ``fairseq_stop`` for our ``<task>_inference`` entry points.

ESPnet's inference parsers refuse keys they do not know, in ``--config`` files too. These are
ours (see espnet_ext.decoding.beam_search): they are taken off the command line and out of the
``--config`` YAML (the command line wins, as in ESPnet), ESPnet gets the rest, and the beam search
each inference object builds is switched to ours right after it is built.
"""

from __future__ import annotations

import inspect
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import yaml

from espnet_ext.decoding.beam_search import apply_rules, check_eos_threshold
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


def pop_from_argv(argv: Sequence[str]) -> tuple[dict, list[str]]:
    """({key: value} given on the command line, argv without them)."""
    values, rest, args, i = {}, [], list(argv), 0
    while i < len(args):
        name, eq, text = args[i].partition("=")
        key = name[2:] if name.startswith("--") else None
        if key in KEYS:
            if not eq:
                if i + 1 >= len(args):
                    raise ConfigError("needs a value", key=key)
                i += 1
                text = args[i]
            values[key] = _value(text, key, "command line")
        else:
            rest.append(args[i])
        i += 1
    return values, rest


def _config_index(argv: list[str]) -> int | None:
    """Index of the value of ``--config`` in argv (ESPnet: the last one counts)."""
    found = None
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            found = i + 1
    return found


@contextmanager
def split_config(argv: Sequence[str]) -> Iterator[tuple[dict, list[str]]]:
    """Yields (our values from the --config YAML, argv pointing at a copy of it without our keys).

    The copy lives in a temporary directory for the duration of the block; the user's file is not touched.
    """
    argv = list(argv)
    index = _config_index(argv)
    if index is None:
        yield {}, argv
        return
    path = Path(argv[index])
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        yield {}, argv  # ESPnet's parser reports a missing or broken config itself
        return
    if not isinstance(config, dict) or not any(k in config for k in KEYS):
        yield {}, argv
        return
    ours = take_ours(config, str(path))
    with tempfile.TemporaryDirectory(prefix="decode_config.") as tmp:
        copy = Path(tmp) / path.name
        copy.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        argv[index] = str(copy)
        yield ours, argv


@contextmanager
def applied_on_build(inference_cls, values: dict) -> Iterator[None]:
    """While active, ``inference_cls`` objects (ESPnet's Speech2Text, Text2Text) decode with our rules.

    Its ``__init__`` is wrapped (called unchanged, the built beam search switched after) and restored on
    exit, also when decoding fails.
    """
    eos_threshold, lenpen = values.get("eos_threshold"), values.get("lenpen")
    fairseq_stop = bool(values.get("fairseq_stop", False))
    check_eos_threshold(eos_threshold)
    if eos_threshold is None and lenpen is None and not fairseq_stop:
        yield
        return
    original = inspect.getattr_static(inference_cls, "__init__")

    def init_with_rules(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.beam_search = apply_rules(self.beam_search, eos_threshold, lenpen, fairseq_stop)

    inference_cls.__init__ = init_with_rules
    try:
        yield
    finally:
        inference_cls.__init__ = original
