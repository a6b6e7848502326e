"""``install()``: the one place where this package changes ESPnet2's state.

ESPnet2 builds models from module-level ``ClassChoices`` tables
(``espnet2.tasks.asr.encoder_choices``...) and has no plugin mechanism, so our classes are added to
those tables by ``install()``, an explicit call that our entry points (``espnet_ext.bin.*``) make
when they are imported, before they import ESPnet. A DDP worker started with "spawn" re-imports the
entry point's module and so makes the call too. Library callers that build models (analyses, tests,
``utils/``) call ``install()`` or ``build_model``, which does.

The same call switches typeguard's ``@typechecked`` off before ESPnet is imported, unless
``ESPNET_EXT_TYPECHECK=1`` (``espnet_ext.typecheck``; tools/upstream/ has the ESPnet change that
would make this unnecessary). Nothing else in ``espnet_ext`` assigns to ESPnet's modules, classes or
tables: tests/test_no_runtime_patching.py checks it. Where a table is missing (ESPnet2's ST task has no
model choice), we subclass the task instead (``espnet_ext.tasks.st``).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterable

from espnet_ext import typecheck
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
# fairseq's utterance CMVN (ESPnet's utterance_mvn counts padded frames in the variance); _specaug: then
# SpecAugment, fairseq's order (ESPnet's encode runs specaug before normalize)
_UTTERANCE_CMVN = [
    ("normalize_choices", "utterance_cmvn", "espnet_ext.features.utterance_cmvn:UtteranceCMVN"),
    (
        "normalize_choices",
        "utterance_cmvn_specaug",
        "espnet_ext.features.utterance_cmvn:UtteranceCMVNSpecAug",
    ),
    # fairseq's SpecAugment on each utterance's own frames (ESPnet's SpecAug draws over the padded batch)
    (
        "specaug_choices",
        "utterance_specaug",
        "espnet_ext.features.specaugment:UtteranceSpecAugment",
    ),
]

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
        *_UTTERANCE_CMVN,
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
        *_UTTERANCE_CMVN,
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

# The ESPnet2 task modules ``install()`` fills by default.
ESPNET_TASKS = tuple(REGISTRY)

_lock = threading.RLock()


def install(tasks: Iterable[str] = ESPNET_TASKS) -> None:
    """Switch typeguard's checks off (unless ``ESPNET_EXT_TYPECHECK=1``), then add our REGISTRY entries
    to the tables of the task modules ``tasks`` (importing them). Idempotent; a name that the table
    already holds for another class is a ConfigError. Call it before importing ESPnet (its
    ``@typechecked`` decorators run at import); ``tasks=()`` for entry points of our own tasks."""
    with _lock:
        if not typecheck.wanted():
            import typeguard

            typeguard.typechecked = typecheck.unchecked
        for module_name in tasks:
            module = importlib.import_module(module_name)
            for choices_attr, name, target in REGISTRY.get(module_name, []):
                choices = getattr(module, choices_attr, None)
                if choices is None:
                    raise AttributeError(
                        f"{module_name} has no {choices_attr}; ESPnet version mismatch?"
                    )
                key = name.lower()  # ClassChoices lower-cases its keys
                cls = _load(target)
                existing = choices.classes.get(key)
                if existing is not None and existing is not cls:
                    raise ConfigError(
                        f"{module_name}.{choices_attr} already has a different class: {existing}",
                        key=key,
                    )
                choices.classes[key] = cls


def register(module_name: str, choices_attr: str, name: str, target: str) -> None:
    """Add one entry to REGISTRY (a model defined outside this table) and install it into its task now."""
    with _lock:
        REGISTRY.setdefault(module_name, []).append((choices_attr, name, target))
        install([module_name])


def _load(target: str):
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


# ESPnet2 task names whose training entry point runs our subclass of the task
OUR_TASKS = {"st": "espnet_ext.tasks.st:STTask"}


def build_model(task: str, args: list[str]):
    """Build a model the way ``python -m espnet_ext.bin.<task>_train`` would, from command-line style args.

    ``task`` is an ESPnet2 task module name ("asr", "mt", "lm"), "st" (our ST task, which
    ``espnet_ext.bin.st_train`` runs) or "module:TaskClass" for ours. Handy for analyses and tests:
    ``build_model("asr", ["--config", "conf/x.yaml", "--token_list", ...])``.
    """
    install()
    task = OUR_TASKS.get(task, task)
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
