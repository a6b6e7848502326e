"""Registration of our classes into ESPnet2's tasks.

ESPnet2 builds models from module-level ``ClassChoices`` tables
(``espnet2.tasks.asr.encoder_choices``...) and has no plugin mechanism. Importing ``espnet_ext``
installs an import hook: the moment a listed ESPnet2 task module finishes importing (or at once, if
it already has), our classes are added to its tables. Every process that imports ``espnet_ext`` --
our entry points, their spawned DDP workers, inference, ``build_model_from_file`` callers --
therefore sees the same choices.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import threading

from espnet_ext.errors import ConfigError

# ESPnet2 module -> [(ClassChoices attribute, choice name, "our.module:Class")]
_RELAXED = "espnet_ext.nets.relaxed_transformer:"
_RELAXED_ENCODERS = [
    ("encoder_choices", "relaxed_transformer", _RELAXED + "RelaxedTransformerEncoder"),
    ("encoder_choices", "relaxed_cnn_transformer", _RELAXED + "RelaxedCNNTransformerEncoder"),
]
_RELAXED_DECODER = (
    "decoder_choices",
    "relaxed_transformer",
    _RELAXED + "RelaxedTransformerDecoder",
)

_MULTIFORMER = "espnet_ext.nets.multiformer_encoder:"
_MULTIFORMER_ENCODERS = [
    ("encoder_choices", "s2t_transformer", _MULTIFORMER + "S2TTransformerEncoder"),
    ("encoder_choices", "multiformer", _MULTIFORMER + "MultiformerEncoder"),
]
# Head selection (encoder only, decoder only or both: Table 6) and the per-task adapter baseline.
_HEADSEL = "espnet_ext.nets.head_selection_transformer:"
_ADAPTERS = "espnet_ext.nets.adapters:"
_TASK_MODULES = [
    ("encoder_choices", "head_selection_transformer", _HEADSEL + "HeadSelectionTransformerEncoder"),
    ("decoder_choices", "head_selection_transformer", _HEADSEL + "HeadSelectionTransformerDecoder"),
    ("encoder_choices", "adapter_transformer", _ADAPTERS + "AdapterTransformerEncoder"),
    ("decoder_choices", "adapter_transformer", _ADAPTERS + "AdapterTransformerDecoder"),
]
_TASK_SPEECH_ENCODERS = [
    (
        "encoder_choices",
        "head_selection_cnn_transformer",
        _HEADSEL + "HeadSelectionCNNTransformerEncoder",
    ),
    ("encoder_choices", "adapter_cnn_transformer", _ADAPTERS + "AdapterCNNTransformerEncoder"),
    (
        "encoder_choices",
        "head_selection_s2t_transformer",
        _HEADSEL + "HeadSelectionS2TTransformerEncoder",
    ),
    ("encoder_choices", "adapter_s2t_transformer", _ADAPTERS + "AdapterS2TTransformerEncoder"),
]
_TASK_MODELS = "espnet_ext.nets.task_models:"
_LEGO = "espnet_ext.nets.lego."
_LEGONN_MODULES = [
    ("encoder_choices", "legonn", _LEGO + "encoder:LegoNNEncoder"),
    ("decoder_choices", "legonn", _LEGO + "decoder:LegoNNDecoder"),
]
# fairseq's utterance CMVN (ESPnet's utterance_mvn counts padded frames in the variance)
_UTTERANCE_CMVN = (
    "normalize_choices",
    "utterance_cmvn",
    "espnet_ext.features.utterance_cmvn:UtteranceCMVN",
)

REGISTRY: dict[str, list[tuple[str, str, str]]] = {
    "espnet2.tasks.asr": [
        (
            "encoder_choices",
            "cnn_transformer",
            "espnet_ext.nets.cnn_transformer_encoder:CNNTransformerEncoder",
        ),
        *_RELAXED_ENCODERS,
        *_MULTIFORMER_ENCODERS,
        _RELAXED_DECODER,
        *_TASK_MODULES,
        *_TASK_SPEECH_ENCODERS,
        ("model_choices", "task_conditioned", _TASK_MODELS + "TaskConditionedASRModel"),
        ("model_choices", "legonn", _LEGO + "model:LegoNNASRModel"),
        ("model_choices", "legonn_ctc", _LEGO + "ctc_only:LegoNNCTCASRModel"),
        *_LEGONN_MODULES,
        ("encoder_choices", "relaxed_avhubert", "espnet_ext.nets.avhubert.encoder:AVHubertEncoder"),
        _UTTERANCE_CMVN,
    ],
    "espnet2.tasks.st": [
        (
            "encoder_choices",
            "cnn_transformer",
            "espnet_ext.nets.cnn_transformer_encoder:CNNTransformerEncoder",
        ),
        *_RELAXED_ENCODERS,
        *_MULTIFORMER_ENCODERS,
        _RELAXED_DECODER,
        *_TASK_MODULES,
        *_TASK_SPEECH_ENCODERS,
        _UTTERANCE_CMVN,
    ],
    "espnet2.tasks.mt": [
        ("model_choices", "cutoff", "espnet_ext.nets.cutoff:CutoffMTModel"),
        _RELAXED_ENCODERS[0],
        _RELAXED_DECODER,
        *_TASK_MODULES,
        ("model_choices", "task_conditioned", _TASK_MODELS + "TaskConditionedMTModel"),
        ("model_choices", "legonn", _LEGO + "model:LegoNNMTModel"),
        ("model_choices", "legonn_ctc", _LEGO + "ctc_only:LegoNNCTCMTModel"),
        # ESPnet2's MT task always builds a decoder: the encoder-only model's placeholder
        ("decoder_choices", "legonn_none", _LEGO + "ctc_only:AbsentDecoder"),
        *_LEGONN_MODULES,
    ],
    "espnet2.tasks.lm": [
        ("lm_choices", "transformer_tied", "espnet_ext.nets.tied_transformer_lm:TiedTransformerLM"),
    ],
}

# ESPnet2 module -> ["our.module:function"] run right after it is imported (tables that are not
# ClassChoices, e.g. the data types of espnet2.train.dataset).
HOOKS: dict[str, list[str]] = {
    "espnet2.train.dataset": ["espnet_ext.data.types:install"],
    # ESPnet2's ST task has no model_choices: a --model choice for task-conditioned ST models
    "espnet2.tasks.st": ["espnet_ext.tasks.task_conditioned:install_st"],
}

_lock = threading.RLock()
_done: set = set()


def register(module_name: str, choices_attr: str, name: str, target: str) -> None:
    """Add one entry to REGISTRY (a model defined outside this table) and apply it if the task is loaded."""
    with _lock:
        REGISTRY.setdefault(module_name, []).append((choices_attr, name, target))
        if module_name in sys.modules:
            _apply_entry(sys.modules[module_name], choices_attr, name, target)


def _load(target: str):
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def _apply_entry(module, choices_attr: str, name: str, target: str) -> None:
    choices = getattr(module, choices_attr, None)
    if choices is None:
        raise AttributeError(f"{module.__name__} has no {choices_attr}; ESPnet version mismatch?")
    key = name.lower()  # ClassChoices lower-cases its keys
    cls = _load(target)
    existing = choices.classes.get(key)
    if existing is not None and existing is not cls:
        raise ConfigError(
            f"{module.__name__}.{choices_attr} already has a different class: {existing}", key=key
        )
    choices.classes[key] = cls


def apply(module) -> None:
    with _lock:
        if module.__name__ in _done:
            return
        _done.add(module.__name__)
        for entry in REGISTRY.get(module.__name__, []):
            _apply_entry(module, *entry)
        for hook in HOOKS.get(module.__name__, []):
            _load(hook)()


class _RegisterAfterImport(importlib.abc.MetaPathFinder):
    """Wraps the loader of ESPnet2 task modules so ``apply`` runs right after they execute."""

    def find_spec(self, fullname, path, target=None):
        if (fullname not in REGISTRY and fullname not in HOOKS) or fullname in _done:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _ApplyingLoader(spec.loader)
                return spec
        return None


class _ApplyingLoader(importlib.abc.Loader):
    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        apply(module)


def install() -> None:
    """Idempotent: hook future imports and register into already-imported task modules."""
    with _lock:
        if not any(isinstance(f, _RegisterAfterImport) for f in sys.meta_path):
            sys.meta_path.insert(0, _RegisterAfterImport())
        for name in [*REGISTRY, *HOOKS]:
            if name in sys.modules:
                apply(sys.modules[name])


def build_model(task: str, args: list[str]):
    """Build a model the way ``python -m espnet_ext.bin.<task>_train`` would, from command-line style args.

    ``task`` is an ESPnet2 task module name ("asr", "st", "mt", "lm") or "module:TaskClass" for
    ours. Handy for analyses and tests: ``build_model("asr", ["--config", "conf/x.yaml",
    "--token_list", ...])``.
    """
    install()
    if ":" in task:
        task_cls = _load(task)
    else:
        module = importlib.import_module(f"espnet2.tasks.{task}")
        task_cls = next(
            getattr(module, n)
            for n in dir(module)
            if n.endswith("Task") and getattr(module, n).__module__ == module.__name__
        )
    parser = task_cls.get_parser()
    parsed = parser.parse_args(args)
    return task_cls.build_model(parsed)
