"""fairseq's and AV-HuBERT's classes as a released AV-HuBERT checkpoint pickles them, for tests that write
such checkpoints without fairseq installed (the reader must load them without importing fairseq)."""

from __future__ import annotations

import dataclasses
import enum
import types


def fairseq_classes(config: dict) -> dict:
    """fairseq's and AV-HuBERT's classes that a released checkpoint pickles (the task's Dictionary, the
    dataclass and enum behind its omegaconf cfg), in modules of their names: {module name: module}."""
    modules = {name: types.ModuleType(name) for name in (
        "fairseq", "fairseq.data", "fairseq.data.dictionary", "fairseq.dataclass",
        "fairseq.dataclass.constants", "avhubert", "avhubert.hubert")}  # fmt: skip

    class Dictionary:
        def __init__(self, symbols):
            self.symbols, self.indices = symbols, {s: i for i, s in enumerate(symbols)}

    class ChoiceEnum(enum.Enum):
        default = "default"
        layer_norm = "layer_norm"

    fields = [(key, type(value), value) for key, value in config.items()]
    fields.append(("extractor_mode", ChoiceEnum, ChoiceEnum.default))
    AVHubertConfig = dataclasses.make_dataclass("AVHubertConfig", fields)  # noqa: N806
    for cls, module in ((Dictionary, "fairseq.data.dictionary"), (ChoiceEnum, "fairseq.dataclass.constants"),
                        (AVHubertConfig, "avhubert.hubert")):  # fmt: skip
        cls.__module__, cls.__qualname__ = module, cls.__name__
        setattr(modules[module], cls.__name__, cls)
    return modules
