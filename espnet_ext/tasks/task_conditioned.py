"""Task ids of task-conditioned models (head selection, adapters) in ESPnet2's batches and decoding.

In training and validation batches (``OneTaskBatches``, a base of our ASR, MT and ST tasks) a task-id column
whose rows all hold one id is kept once, (B, 1) -> (1, 1), decided on the host while the batch is collated:
the layers then take one task's path (head selection: one product with that task's projection rows instead
of a batched product of rows gathered per utterance), with no read-back from the device.

ESPnet's ``Speech2Text`` / ``Text2Text`` see one utterance's input and nothing else, so our
inference entry points take the task tags from the data dir being decoded:

  ``--task_tag_file NAME``          a file of the data dir (``<utt> <tag>``) giving both sides' task,
  ``--encoder_task_tag_file NAME``  / ``--decoder_task_tag_file NAME``  one side's (e.g. the source
                                    language for the encoder, the target language for the decoder);
  ``--target_language_tag_file NAME``  the target language the decoder starts from (multilingual ST/MT);

the data dir is that of the first ``--data_path_and_name_and_type`` file. The tags become ids through
the model config's ``model_conf.task_tags`` (a side's file: ``model_conf.<side>_task_tags`` when given;
the target language: ``model_conf.target_languages``; an unknown tag is refused with the tag file's
path and line)
and reach ESPnet's loader as extra ``text_int`` data names (``task_id`` ...) (``task_id_data``). Our
inference classes (``espnet_ext.bin.inference_entry.OurDecoding``) take them off the batch and call
``model.set_task_id`` before ESPnet's own code: every utterance is decoded with its own task's heads (or
adapters).

The models: ``espnet_ext.nets.task_models``; ``model: task_conditioned`` in ESPnet2's ASR and MT tasks
(our registration) and in our ST task (``espnet_ext.tasks.st``: ESPnet2's has no model choice).
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import yaml

from espnet_ext.data.datadir import read_kaldi_entries
from espnet_ext.data.task_tags import task_ids, write_task_ids
from espnet_ext.errors import ConfigError
from espnet_ext.nets.task_models import TASK_KEYS

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


def _uses_adapters(config: dict) -> bool:
    return any(str(config.get(side, "")).startswith("adapter") for side in ("encoder", "decoder"))


@contextmanager
def task_id_data(
    files: dict[str, str], model_config: str | None, data: Sequence[tuple[str, str, str]]
) -> Iterator[list[tuple[str, str, str]]]:
    """Yield the extra ``(path, name, text_int)`` data of the tag files ``files`` (option -> file name in
    the data dir of the first of ``data``), as id tables in a temporary directory (see the module doc).

    A task-conditioned model (its config lists ``model_conf.task_tags``) without a tag file, or a tag
    file for a model without tags, is a ConfigError before anything is decoded.
    """
    config = {}
    if model_config is not None:
        with open(model_config, encoding="utf-8") as f:
            config = yaml.safe_load(f) or {}
    model_conf = config.get("model_conf") or {}
    listed = [key for keys in TAG_LISTS.values() for key in keys if model_conf.get(key)]
    if not files:
        if listed:
            raise ConfigError(
                f"the model is task-conditioned ({', '.join(dict.fromkeys(listed))}): give "
                f"{' or '.join(TAG_OPTIONS)} (a <utt> <tag> file of the data dir)",
                path=model_config,
                key=f"model_conf.{listed[0]}",
            )
        yield []
        return
    tag_lists = {}
    for option in files:
        given = [key for key in TAG_LISTS[option] if model_conf.get(key)]
        if not given:
            raise ConfigError(
                f"{option} given, but the model config lists no {' or '.join(TAG_LISTS[option])}",
                path=model_config,
                key=f"model_conf.{TAG_LISTS[option][0]}",
            )
        tag_lists[option] = [str(tag) for tag in model_conf[given[0]]]
    if not data:
        raise ConfigError("task tags need the data to decode", key="--data_path_and_name_and_type")
    decoded = Path(data[0][0])
    keys = [entry.key for entry in read_kaldi_entries(decoded, allow_empty=True)]
    extra = []
    with tempfile.TemporaryDirectory(prefix="task_ids.") as tmp:
        for option, name in files.items():
            ids = task_ids(
                decoded.parent / name, tag_lists[option], keys, adapters=_uses_adapters(config)
            )
            table = Path(tmp) / TAG_OPTIONS[option]
            write_task_ids(table, ids)
            extra.append((str(table), TAG_OPTIONS[option], "text_int"))
        yield extra


class OneTaskIds:
    """ESPnet's collate, then each task-id column (``TASK_KEYS``) whose rows all hold one id kept once:
    ``task_id`` (B, 1) -> (1, 1), ``task_id_lengths`` (B,) -> (1,) (see the module doc)."""

    def __init__(self, collate: Callable):
        self.collate = collate

    def __call__(self, data):
        ids, batch = self.collate(data)
        for key in TASK_KEYS:
            column = batch.get(key)
            if column is None or column.size(0) < 2 or not bool((column == column[:1]).all()):
                continue
            batch[key] = column[:1]
            if f"{key}_lengths" in batch:
                batch[f"{key}_lengths"] = batch[f"{key}_lengths"][:1]
        return ids, batch


class OneTaskBatches:
    """A task whose batches carry a one-task batch's id once (``OneTaskIds``). Not under ESPnet's
    DataParallel (--ngpu > 1 in one process): it splits every tensor of the batch along its first
    dimension, and a single id would reach one replica only. Nor in --collect_stats: ESPnet writes every
    data name's shape per utterance from the batch, and would write the first utterance's only."""

    @classmethod
    def build_collate_fn(cls, args: argparse.Namespace, train: bool) -> Callable:
        collate = super().build_collate_fn(args, train)
        data_parallel = getattr(args, "ngpu", 0) > 1 and not getattr(args, "distributed", False)
        if data_parallel or getattr(args, "collect_stats", False):
            return collate
        return OneTaskIds(collate)
