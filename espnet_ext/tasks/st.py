"""Our ST task: ESPnet2's ``STTask`` with a model choice, ``--model espnet|task_conditioned``.

ESPnet2's ASR and MT tasks choose their model class from a ``model_choices`` table; its ST task has none
and constructs ``ESPnetSTModel`` by name inside ``build_model`` (tools/upstream/espnet-st-model-choices.patch
adds the table). Until that lands, ``STTask.build_model`` builds another class in two steps:

1. ESPnet's ``build_model`` builds its own model from the same arguments, with the ``model_conf`` keys only
   our class takes held back and ``--init`` deferred;
2. ``from_espnet_model`` constructs ours from that model's sub-modules (the same objects: parameter names,
   shapes and values are ESPnet's, so checkpoints and averaging load as before) and the whole
   ``model_conf``; then ``--init`` initialises the whole model, as ESPnet's ``build_model`` ends.

ESPnet's constructor draws no random numbers, so a seed gives the weights ESPnet's own path would give
this class.

Decoding. ESPnet's ``Speech2Text`` builds its model with ESPnet's ``STTask`` (a module global of
``espnet2.bin.st_inference``). ``ModelChoiceLoading``, a mixin before it, hands it the training config
with our keys held back (a temporary copy), turns the model it built into ours in the same way and loads
the weights into it, strictly.
"""

from __future__ import annotations

import argparse
import inspect
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
import yaml
from espnet2.st.espnet_model import ESPnetSTModel
from espnet2.tasks import st
from espnet2.torch_utils.initialize import initialize

from espnet_ext.errors import ConfigError
from espnet_ext.nets.task_models import TaskConditionedSTModel
from espnet_ext.tasks.abs_ext_task import load_state_dict_strictly
from espnet_ext.tasks.attention_plots import AttentionPlotCheck
from espnet_ext.tasks.task_conditioned import OneTaskBatches
from espnet_ext.tasks.trainer import InterruptSafeTrainer

MODELS: dict[str, type[ESPnetSTModel]] = {
    "espnet": ESPnetSTModel,
    "task_conditioned": TaskConditionedSTModel,
}


def model_class(args: argparse.Namespace, config: str | Path | None = None) -> type[ESPnetSTModel]:
    """The class ``args.model`` names (``espnet`` when absent: configs written by ESPnet's own task);
    errors name ``config`` (default: ``args.config``)."""
    choice = getattr(args, "model", None) or "espnet"
    if choice not in MODELS:
        where = config if config is not None else getattr(args, "config", None)
        raise ConfigError(f"'{choice}' is not one of {sorted(MODELS)}", path=where, key="model")
    return MODELS[choice]


def _parameters(cls: type) -> set[str]:
    return {
        name
        for name, p in inspect.signature(cls.__init__).parameters.items()
        if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }


def split_model_conf(model_conf: dict | None, cls: type[ESPnetSTModel]) -> tuple[dict, dict]:
    """``model_conf`` -> (the keys ESPnet's class takes, or that neither class knows; those only ``cls``
    takes). An unknown key stays on ESPnet's side, whose constructor refuses it."""
    ours = _parameters(cls) - _parameters(ESPnetSTModel)
    model_conf = dict(model_conf or {})
    return (
        {k: v for k, v in model_conf.items() if k not in ours},
        {k: v for k, v in model_conf.items() if k in ours},
    )


def from_espnet_model(
    built: ESPnetSTModel, cls: type[ESPnetSTModel], model_conf: dict | None
) -> ESPnetSTModel:
    """A ``cls`` model made of the sub-modules of ``built`` (an ``ESPnetSTModel`` built without the keys
    only ``cls`` takes) and the whole ``model_conf``.

    ESPnet's constructor keeps every required argument (token lists, vocabulary sizes, sub-modules) as an
    attribute of the same name, or drops it when ``model_conf`` leaves it unused (then ``None`` is passed
    and the same rule drops it again). A sub-module ESPnet keeps that ours lacks means ESPnet's constructor
    has changed: refused here rather than trained or decoded without it.
    """
    required = [
        name
        for name, p in inspect.signature(ESPnetSTModel.__init__).parameters.items()
        if name != "self" and p.default is p.empty
    ]
    model = cls(**{name: getattr(built, name, None) for name in required}, **(model_conf or {}))
    children = dict(model.named_children())
    lost = [  # the constructor's own (the criteria) made again: the same name suffices
        name
        for name, child in built.named_children()
        if name not in children or (name in required and children[name] is not child)
    ]
    if lost:
        raise RuntimeError(
            f"{cls.__name__} did not keep ESPnetSTModel's sub-modules {lost}: ESPnet's constructor "
            "differs from the one espnet_ext.tasks.st was written for (espnet 202511)"
        )
    return model


class STTask(OneTaskBatches, AttentionPlotCheck, st.STTask):
    """ESPnet2's ST task, building the model class ``--model`` names (``MODELS``)."""

    trainer = InterruptSafeTrainer

    @classmethod
    def add_task_arguments(cls, parser: argparse.ArgumentParser):
        super().add_task_arguments(parser)
        parser.add_argument(
            "--model",
            default="espnet",
            choices=sorted(MODELS),
            help="ST model class: ESPnet's, or one taking task ids (head selection, adapters)",
        )

    @classmethod
    def build_model(cls, args: argparse.Namespace) -> ESPnetSTModel:
        chosen = model_class(args)
        if chosen is ESPnetSTModel:
            return super().build_model(args)
        model_conf, init = args.model_conf, args.init
        args.model_conf, _ = split_model_conf(model_conf, chosen)
        args.init = None
        try:  # ESPnet also rewrites args (token lists read, frontend): those changes stay
            built = super().build_model(args)
        finally:
            args.model_conf, args.init = model_conf, init
        model = from_espnet_model(built, chosen, model_conf)
        if init is not None:
            initialize(model, init)
        return model


def train_args(config_file: str | Path) -> argparse.Namespace:
    """The args a training run saved (its ``config.yaml``), as ESPnet's ``build_model_from_file`` reads them."""
    with open(config_file, encoding="utf-8") as f:
        config = yaml.safe_load(f) or {}
    if not isinstance(config, dict):
        raise ConfigError("not a mapping of options", path=config_file)
    return argparse.Namespace(**config)


@contextmanager
def espnet_config(args: argparse.Namespace, cls: type[ESPnetSTModel]) -> Iterator[Path]:
    """A temporary config of ``args`` that ESPnet's own ``STTask`` builds from: no ``model``, and the
    ``model_conf`` keys only ``cls`` takes held back."""
    plain = {k: v for k, v in vars(args).items() if k != "model"}
    plain["model_conf"], _ = split_model_conf(getattr(args, "model_conf", None), cls)
    with tempfile.TemporaryDirectory(prefix="st_config.") as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_text(yaml.safe_dump(plain), encoding="utf-8")
        yield path


class ModelChoiceLoading:
    """Mixin before ESPnet's ``espnet2.bin.st_inference.Speech2Text``: decodes a model of any ``MODELS``
    class (ESPnet's class builds ``ESPnetSTModel`` only; see the module doc)."""

    def __init__(self, st_train_config=None, st_model_file=None, **kwargs):
        config = st_train_config
        if config is None and st_model_file is not None:
            config = Path(st_model_file).parent / "config.yaml"  # ESPnet's default
        args = None if config is None else train_args(config)
        chosen = ESPnetSTModel if args is None else model_class(args, config)
        if chosen is ESPnetSTModel:
            super().__init__(st_train_config, st_model_file, **kwargs)
            return
        with espnet_config(args, chosen) as plain:
            super().__init__(plain, None, **kwargs)  # the weights: below, into our model
        model = from_espnet_model(self.st_model, chosen, args.model_conf)
        device = kwargs.get("device", "cpu")
        if st_model_file is not None:
            load_state_dict_strictly(model, st_model_file, device)
        # where ESPnet's Speech2Text leaves its model (the shared sub-modules are there already)
        model.to(device=device, dtype=getattr(torch, kwargs.get("dtype", "float32"))).eval()
        self.st_model, self.st_train_args = model, args
