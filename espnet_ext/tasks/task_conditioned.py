"""Task-conditioned models (head selection, adapters) in ESPnet2's decoding and in its ST task.

Decoding. ESPnet's ``Speech2Text`` / ``Text2Text`` see one utterance's input and nothing else, so our
inference entry points take the task tags from the data dir being decoded:

  ``--task_tag_file NAME``          a file of the data dir (``<utt> <tag>``) giving both sides' task,
  ``--encoder_task_tag_file NAME``  / ``--decoder_task_tag_file NAME``  one side's (e.g. the source
                                    language for the encoder, the target language for the decoder);
  ``--target_language_tag_file NAME``  the target language the decoder starts from (multilingual ST/MT);

the data dir is that of the first ``--data_path_and_name_and_type`` file. The tags become ids through
the model config's ``model_conf.task_tags`` (a side's file: ``model_conf.<side>_task_tags`` when given;
the target language: ``model_conf.target_languages``; an unknown tag is refused with the tag file's
path and line)
and reach ESPnet's loader as extra ``text_int`` data names (``task_id`` ...). While decoding runs, the
predictor's ``__call__`` takes them off the batch and calls ``model.set_task_id`` before ESPnet's own
code: every utterance is decoded with its own task's heads (or adapters).

ST. ESPnet2's ST task builds ``ESPnetSTModel`` by name and has no ``--model`` choice; ``install_st``
(run by the registry when ``espnet2.tasks.st`` is imported) adds ``--model espnet|task_conditioned`` and
builds ``TaskConditionedSTModel`` when the config asks for it.
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import yaml

from espnet_ext.data.datadir import read_kaldi_entries
from espnet_ext.data.task_tags import task_ids, write_task_ids
from espnet_ext.errors import ConfigError

# option -> the data name the model's forward / set_task_id takes
TAG_OPTIONS = {
    "--task_tag_file": "task_id",
    "--encoder_task_tag_file": "encoder_task_id",
    "--decoder_task_tag_file": "decoder_task_id",
    "--target_language_tag_file": "target_language_id",
}
# option -> the model_conf keys listing its tags, first given wins
TAG_LISTS = {
    "--task_tag_file": ("task_tags",),
    "--encoder_task_tag_file": ("encoder_task_tags", "task_tags"),
    "--decoder_task_tag_file": ("decoder_task_tags", "task_tags"),
    "--target_language_tag_file": ("target_languages",),
}
# ESPnet inference module -> (predictor class, its model attribute)
PREDICTORS = {
    "espnet2.bin.asr_inference": ("Speech2Text", "asr_model"),
    "espnet2.bin.st_inference": ("Speech2Text", "st_model"),
    "espnet2.bin.mt_inference": ("Text2Text", "mt_model"),
}
DATA_OPTION = "--data_path_and_name_and_type"


def pop_options(argv: Sequence[str], names: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """({option: value} of ``names`` found in ``argv``, the rest of ``argv``); ``--x v`` or ``--x=v``."""
    found, rest, args, i = {}, [], list(argv), 0
    while i < len(args):
        name, eq, value = args[i].partition("=")
        if name in names:
            if not eq:
                if i + 1 >= len(args):
                    raise ConfigError(f"{name} needs a value", key=name)
                i += 1
                value = args[i]
            found[name] = value
        else:
            rest.append(args[i])
        i += 1
    return found, rest


def read_model_config(argv: Sequence[str], model_config_option: str) -> tuple[Path | None, dict]:
    found, _ = pop_options(argv, [model_config_option])
    if model_config_option not in found:
        return None, {}
    path = Path(found[model_config_option])
    with open(path, encoding="utf-8") as f:
        return path, yaml.safe_load(f) or {}


def decoded_data_dir(argv: Sequence[str]) -> tuple[Path, list[str]]:
    """The data dir being decoded (that of the first data file) and that file's utterance ids."""
    files = [
        value for i, arg in enumerate(argv[:-1]) if arg == DATA_OPTION for value in [argv[i + 1]]
    ] + [arg.partition("=")[2] for arg in argv if arg.startswith(DATA_OPTION + "=")]
    if not files:
        raise ConfigError("task tags need the data to decode", key=DATA_OPTION)
    path = Path(files[0].split(",")[0])
    keys = [entry.key for entry in read_kaldi_entries(path, allow_empty=True)]
    return path.parent, keys


def _uses_adapters(config: dict) -> bool:
    return any(str(config.get(side, "")).startswith("adapter") for side in ("encoder", "decoder"))


@contextmanager
def decoding(espnet_main, argv: Sequence[str], model_config_option: str) -> Iterator[list[str]]:
    """Yield ESPnet's arguments for decoding with the data dir's task tags (see the module doc).

    A task-conditioned model (its config lists ``model_conf.task_tags``) without a tag file, or a tag
    file for a model without tags, is a ConfigError before anything is decoded.
    """
    files, rest = pop_options(argv, list(TAG_OPTIONS))
    config_path, config = read_model_config(rest, model_config_option)
    model_conf = config.get("model_conf") or {}
    listed = [key for keys in TAG_LISTS.values() for key in keys if model_conf.get(key)]
    if not files:
        if listed:
            raise ConfigError(
                f"the model is task-conditioned ({', '.join(dict.fromkeys(listed))}): give "
                f"{' or '.join(TAG_OPTIONS)} (a <utt> <tag> file of the data dir)",
                path=config_path,
                key=f"model_conf.{listed[0]}",
            )
        yield rest
        return
    tag_lists = {}
    for option in files:
        given = [key for key in TAG_LISTS[option] if model_conf.get(key)]
        if not given:
            raise ConfigError(
                f"{option} given, but the model config lists no {' or '.join(TAG_LISTS[option])}",
                path=config_path,
                key=f"model_conf.{TAG_LISTS[option][0]}",
            )
        tag_lists[option] = [str(tag) for tag in model_conf[given[0]]]
    data_dir, keys = decoded_data_dir(rest)
    extra = []
    with tempfile.TemporaryDirectory(prefix="task_ids.") as tmp:
        for option, name in files.items():
            ids = task_ids(
                data_dir / name, tag_lists[option], keys, adapters=_uses_adapters(config)
            )
            table = Path(tmp) / TAG_OPTIONS[option]
            write_task_ids(table, ids)
            extra += [DATA_OPTION, f"{table},{TAG_OPTIONS[option]},text_int"]
        with task_ids_from_batch(espnet_main):
            yield rest + extra + ["--allow_variable_data_keys", "true"]


_patch_lock = threading.RLock()


@contextmanager
def task_ids_from_batch(espnet_main) -> Iterator[None]:
    """While active, the predictor of ``espnet_main``'s module sets the batch's task ids on its model."""
    module_name = espnet_main.__module__
    if module_name not in PREDICTORS:
        raise ConfigError(f"task tags are not supported for {module_name}", key="--task_tag_file")
    class_name, model_attr = PREDICTORS[module_name]
    predictor = getattr(sys.modules[module_name], class_name)
    original = predictor.__call__

    @functools.wraps(original)
    def call_with_task_ids(self, *args, **kwargs):
        ids = {name: kwargs.pop(name, None) for name in TAG_OPTIONS.values()}
        getattr(self, model_attr).set_task_id(**{k: v for k, v in ids.items() if v is not None})
        return original(self, *args, **kwargs)

    with _patch_lock:
        predictor.__call__ = call_with_task_ids
        try:
            yield
        finally:
            predictor.__call__ = original


def install_st() -> None:
    """Give ESPnet2's ST task a ``--model`` choice (``espnet`` or ``task_conditioned``); idempotent."""
    from espnet2.tasks import st

    task = st.STTask
    if getattr(task, "_task_conditioned_installed", False):
        return
    add_task_arguments, build_model = task.add_task_arguments.__func__, task.build_model.__func__

    def add_with_model_choice(cls, parser: argparse.ArgumentParser):
        add_task_arguments(cls, parser)
        parser.add_argument(
            "--model",
            default="espnet",
            choices=sorted(ST_MODELS),
            help="ST model class: ESPnet's, or one taking task ids (head selection, adapters)",
        )

    def build_chosen_model(cls, args: argparse.Namespace):
        choice = getattr(args, "model", None) or "espnet"
        if choice not in ST_MODELS:
            raise ConfigError(f"'{choice}' is not one of {sorted(ST_MODELS)}", key="model")
        if choice == "espnet":
            return build_model(cls, args)
        # ESPnet's build_model names its model class as a module global: swap it for the call
        with _patch_lock:
            espnet_class = st.ESPnetSTModel
            st.ESPnetSTModel = _load_st_model(choice)
            try:
                return build_model(cls, args)
            finally:
                st.ESPnetSTModel = espnet_class

    task.add_task_arguments = classmethod(add_with_model_choice)
    task.build_model = classmethod(build_chosen_model)
    task._task_conditioned_installed = True


ST_MODELS = {
    "espnet": "espnet2.st.espnet_model:ESPnetSTModel",
    "task_conditioned": "espnet_ext.nets.task_models:TaskConditionedSTModel",
}


def _load_st_model(choice: str):
    import importlib

    module, _, name = ST_MODELS[choice].partition(":")
    return getattr(importlib.import_module(module), name)
