"""What our ESPnet2 tasks share.

- ``AbsExtTask``: ESPnet2's ``AbsTask`` with strict model loading, a check that every data file has
  the ids a batch needs, and an in-order iterator for collect_stats and inference that preprocesses
  once.
- The text side of image-to-sequence and lip reading: ESPnet's token options and a preprocessor
  built on ESPnet's tokenizers and ``TokenIDConverter``.
- The command-line frame of our ``*_inference`` entry points (one Kaldi ``text`` file of
  predictions).
"""

from __future__ import annotations

import argparse
import logging
import pickle
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path

import numpy as np
import torch
from espnet2.tasks.abs_task import AbsTask
from espnet2.text.build_tokenizer import build_tokenizer
from espnet2.text.cleaner import TextCleaner
from espnet2.text.token_id_converter import TokenIDConverter
from espnet2.train.dataset import ESPnetDataset
from espnet2.train.preprocessor import AbsPreprocessor
from espnet2.utils.types import str2bool, str2triple_str, str_or_none
from torch.utils.data import DataLoader

from espnet_ext.data.types import DATA_TYPES, MediaScpReader
from espnet_ext.errors import ConfigError, InputError
from espnet_ext.fileio import read_utf8_lines
from espnet_ext.tasks.attention_plots import AttentionPlotCheck
from espnet_ext.tasks.loader_seeds import RankSeededLoaders
from espnet_ext.tasks.trainer import InterruptSafeTrainer


def load_state_dict_strictly(
    model: torch.nn.Module, model_file: str | Path, device: str = "cpu"
) -> None:
    """Load weights into ``model``, refusing files whose keys do not match it exactly.

    ESPnet's ``build_model_from_file`` loads with ``strict=False``: a config/model mismatch would
    silently leave randomly initialised layers in a model used for decoding.
    """
    try:
        state = torch.load(model_file, map_location=device, weights_only=True)
    except (
        pickle.UnpicklingError
    ) as e:  # e.g. checkpoint.pth, which also holds the optimizer and reporter
        raise InputError(
            "not a file of model weights only (a training checkpoint?); use e.g. valid.acc.best.pth",
            path=model_file,
        ) from e
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as e:  # shapes differ
        raise InputError(
            f"the model file does not fit the model its config builds: {e}", path=model_file
        ) from e
    if missing or unexpected:
        raise InputError(
            f"the model file does not fit the model its config builds: missing keys {missing[:8]}"
            f"{' ...' if len(missing) > 8 else ''}, unexpected keys {unexpected[:8]}"
            f"{' ...' if len(unexpected) > 8 else ''}",
            path=model_file,
        )


def read_keys(path: str | Path) -> list[str]:
    """First column of a Kaldi-style table, in file order."""
    return [line.split(maxsplit=1)[0] for _, line in read_utf8_lines(path) if line.strip()]


def check_ids(dataset: ESPnetDataset, ids: Collection[str]) -> None:
    """Refuse a data file that lacks ids another file (or the shape/key file) asks for, naming it."""
    for name, loader in dataset.loader_dict.items():
        # a set of a 12.7M-entry table's keys costs ~1 GB; other Mappings may decode a file to test one
        available = loader if isinstance(loader, (dict, MediaScpReader)) else set(loader.keys())
        missing = sorted(k for k in ids if k not in available)
        if missing:
            path, _ = dataset.debug_info[name]
            message = f"{len(missing)} of {len(ids)} ids are not in this '{name}' file"
            raise InputError(message, path=path, key=missing[0])


def read_list(value: str | Sequence[str] | None, option: str) -> list[str]:
    """A token/class list given as a file (one entry per line) or already as a list (from config.yaml)."""
    if value is None:
        raise ConfigError(f"--{option} is required")
    if isinstance(value, str):
        entries = [line.rstrip() for _, line in read_utf8_lines(value)]
        where = value
    else:
        entries, where = list(value), None
    if not entries:
        raise ConfigError(f"--{option} is empty", path=where)
    return entries


class MediaDataset(ESPnetDataset):
    """ESPnet's map-style dataset that also reads our ``image`` and ``video`` types
    (``espnet_ext.data.types``, by exact name); every other type is ESPnet's. ``keys_to_load`` (ESPnet's
    argument) keeps only those entries of our tables, as of ESPnet's ``text``."""

    def _build_loader(self, path, loader_type, keys_to_load):
        if loader_type in DATA_TYPES:
            return DATA_TYPES[loader_type]["func"](path, keys_to_load=keys_to_load)
        return super()._build_loader(path, loader_type, keys_to_load)


class AbsExtTask(AttentionPlotCheck, AbsTask):
    """Base of our tasks: ESPnet2's trainer, checkpoints, ``--resume``, DDP; stricter about inputs.

    Data are read through ``MediaDataset`` (images, videos); only ESPnet's ``sequence`` iterator,
    whose dataset comes from ``build_dataset``, is offered; under DDP each process' loaders augment with
    random numbers of their own (``loader_seeds``).
    """

    num_optimizers: int = 1
    trainer = InterruptSafeTrainer

    @classmethod
    def build_model_from_file(
        cls,
        config_file: Path | str | None = None,
        model_file: Path | str | None = None,
        device: str = "cpu",
    ):
        if config_file is None:
            if model_file is None:
                raise ConfigError("give a config file, a model file or both")
            config_file = Path(model_file).parent / "config.yaml"
        model, args = super().build_model_from_file(config_file, None, device)
        if model_file is not None:
            load_state_dict_strictly(model, model_file, device)
        return model, args

    @classmethod
    def build_dataset(cls, args, iter_options, keys_to_load: set[str] | None = None):
        if args.multi_task_dataset:
            raise ConfigError(f"--multi_task_dataset is not supported by {cls.__name__}")
        dataset = MediaDataset(
            iter_options.data_path_and_name_and_type,
            float_dtype=args.train_dtype,
            preprocess=iter_options.preprocess_fn,
            max_cache_size=iter_options.max_cache_size,
            max_cache_fd=iter_options.max_cache_fd,
            allow_multi_rates=iter_options.allow_multi_rates,
            keys_to_load=keys_to_load,
        )
        cls.check_task_requirements(
            dataset, args.allow_variable_data_keys, train=iter_options.train
        )
        if keys_to_load:
            check_ids(dataset, keys_to_load)
        return dataset

    @classmethod
    def build_iter_factory(cls, args, distributed_option, mode: str, kwargs: dict | None = None):
        # ESPnet's other iterators build their own ESPnetDataset, which cannot read images or videos
        key = (
            "valid_iterator_type"
            if mode == "valid" and args.valid_iterator_type
            else "iterator_type"
        )
        if getattr(args, key) != "sequence":
            raise ConfigError(
                f"{cls.__name__} reads its data with the sequence iterator only, not "
                f"{getattr(args, key)!r}",
                key=key,
            )
        factory = super().build_iter_factory(args, distributed_option, mode, kwargs)
        if mode == "train" and distributed_option.distributed:  # its own augmentation per process
            factory = RankSeededLoaders(factory, distributed_option.dist_rank)
        return factory

    @classmethod
    def build_streaming_iterator(
        cls,
        data_path_and_name_and_type,
        preprocess_fn,
        collate_fn,
        key_file: str | None = None,
        batch_size: int = 1,
        dtype=np.float32,
        num_workers: int = 1,
        allow_variable_data_keys: bool = False,
        ngpu: int = 0,
        inference: bool = False,
        mode: str | None = None,
        multi_task_dataset: bool = False,
    ) -> DataLoader:
        """Examples in key order (collect_stats, inference), read through ESPnet's map-style dataset.

        ESPnet's streaming dataset hands the types it cannot stream (image, video) to an inner
        dataset that runs the preprocessor, then runs it again on the merged example; ours must run
        exactly once.
        """
        if multi_task_dataset:
            raise ConfigError(f"--multi_task_dataset is not supported by {cls.__name__}")
        keys = read_keys(key_file or data_path_and_name_and_type[0][0])
        dataset = MediaDataset(
            data_path_and_name_and_type,
            preprocess=preprocess_fn,
            float_dtype=np.dtype(dtype).name,
            # a statistics or decoding job's key file: the job holds its share of the tables only
            keys_to_load=set(keys) if key_file else None,
        )
        cls.check_task_requirements(
            dataset, allow_variable_data_keys, train=False, inference=inference
        )
        check_ids(dataset, keys)
        return DataLoader(
            dataset,
            batch_size=batch_size,
            sampler=keys,
            collate_fn=collate_fn,
            num_workers=num_workers,
            pin_memory=ngpu > 0,
        )


# --------------------------------------------------------------------------------------------------
# Text: ESPnet's token options and tokenization, for the tasks that output text.


def add_text_arguments(parser: argparse.ArgumentParser) -> None:
    """The token options of ESPnet's ASR task, so recipes pass the same ones (``--token_list`` is required)."""
    parser.set_defaults(required=parser.get_default("required") + ["token_list"])
    group = parser.add_argument_group(description="Text related")
    group.add_argument(
        "--use_preprocessor",
        type=str2bool,
        default=True,
        help="Tokenize the text (and prepare the inputs) in the data loader, as ESPnet's tasks",
    )
    group.add_argument(
        "--token_list", type=str_or_none, default=None, help="A text mapping int-id to token"
    )
    group.add_argument(
        "--token_type",
        type=str,
        default="bpe",
        choices=["bpe", "char", "word"],
        help="Tokenization of the text",
    )
    group.add_argument(
        "--bpemodel",
        type=str_or_none,
        default=None,
        help="The SentencePiece model (token_type=bpe)",
    )
    group.add_argument(
        "--non_linguistic_symbols",
        type=str_or_none,
        default=None,
        help="File of symbols kept as single tokens",
    )
    group.add_argument(
        "--cleaner",
        type=str_or_none,
        choices=[None, "tacotron", "jaconv", "vietnamese"],
        default=None,
        help="Apply text cleaning",
    )


class TextPreprocessor(AbsPreprocessor):
    """Turns the ``text`` entry into token ids (ESPnet's cleaner, tokenizer and ``TokenIDConverter``)."""

    def __init__(
        self,
        train: bool,
        token_type: str,
        token_list: str | Iterable[str],
        bpemodel: str | None = None,
        non_linguistic_symbols: str | None = None,
        cleaner: str | None = None,
        text_name: str = "text",
    ):
        super().__init__(train)
        self.text_name = text_name
        self.cleaner = TextCleaner(cleaner)
        self.tokenizer = build_tokenizer(
            token_type=token_type, bpemodel=bpemodel, non_linguistic_symbols=non_linguistic_symbols
        )
        self.converter = TokenIDConverter(token_list=token_list, unk_symbol="<unk>")

    @classmethod
    def from_args(cls, args: argparse.Namespace, train: bool) -> TextPreprocessor:
        return cls(
            train=train,
            token_type=args.token_type,
            token_list=args.token_list,
            bpemodel=args.bpemodel,
            non_linguistic_symbols=args.non_linguistic_symbols,
            cleaner=args.cleaner,
        )

    def __call__(self, uid: str, data: dict) -> dict:
        text = data.get(self.text_name)
        if isinstance(text, str):
            tokens = self.tokenizer.text2tokens(self.cleaner(text))
            if not tokens:
                raise InputError(f"empty transcript in '{self.text_name}'", key=uid)
            data[self.text_name] = np.array(self.converter.tokens2ids(tokens), dtype=np.int64)
        return data

    def ids_to_text(self, ids: Iterable[int]) -> str:
        return self.tokenizer.tokens2text(self.converter.ids2tokens(list(ids)))


# --------------------------------------------------------------------------------------------------
# Inference entry points: read data as in training, write one prediction per id, atomically.


def inference_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--data_path_and_name_and_type",
        type=str2triple_str,
        action="append",
        required=True,
        help="As in training, e.g. dump/test/image.scp,image,image (repeatable)",
    )
    parser.add_argument(
        "--key_file", type=str_or_none, default=None, help="Decode only these ids (a data split)"
    )
    parser.add_argument(
        "--train_config", type=str_or_none, default=None, help="config.yaml written by training"
    )
    parser.add_argument(
        "--model_file", type=str, required=True, help="e.g. exp/x/valid.acc.best.pth"
    )
    parser.add_argument(
        "--output_file", type=str, required=True, help="Kaldi text: '<id> <prediction>' per line"
    )
    parser.add_argument("--batch_size", type=int, default=1)
    parser.add_argument("--num_workers", type=int, default=0)
    parser.add_argument("--device", type=str, default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--log_level", type=lambda x: x.upper(), default="INFO")
    return parser


def inference_batches(
    task: type, train_args: argparse.Namespace, args: argparse.Namespace
) -> Iterable[tuple[list[str], dict]]:
    """``(ids, batch)`` in key order, preprocessed and collated exactly as for validation."""
    loader = task.build_streaming_iterator(
        data_path_and_name_and_type=args.data_path_and_name_and_type,
        preprocess_fn=task.build_preprocess_fn(train_args, train=False),
        collate_fn=task.build_collate_fn(train_args, train=False),
        key_file=args.key_file,
        batch_size=args.batch_size,
        num_workers=args.num_workers,
        inference=True,
    )
    for ids, batch in loader:
        yield ids, {name: value.to(args.device) for name, value in batch.items()}


def inference_main(
    get_parser: Callable[[], argparse.ArgumentParser], inference: Callable, cmd=None
) -> None:
    """The body of every ``*_inference`` entry point: parse, set up logging, run."""
    args = get_parser().parse_args(cmd)
    logging.basicConfig(
        level=args.log_level,
        format="%(asctime)s (%(module)s:%(lineno)d) %(levelname)s: %(message)s",
    )
    inference(args)
