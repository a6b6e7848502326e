"""Image-to-sequence (text recognition, OCR) as an ESPnet2 task (``python -m espnet_ext.bin.ocr_train``).

Data: ``image`` (type ``image``) and ``text`` (Kaldi text, tokenized like ASR: ``--token_type char|bpe|word``
with ``--token_list`` and ``--bpemodel``). Images are read across, so the preprocessor turns them
width-first, ``(W, H[, C])``: ESPnet's collate then pads the width and gives ``image_lengths`` = widths,
and collect_stats writes widths as the lengths the batch samplers sort by.
Models come from ``model_choices``: an ``AbsESPnetModel`` with ``forward(image, image_lengths, text,
text_lengths)`` for training and ``recognize(image, image_lengths)`` -> token ids per image for ``ocr_inference``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
from espnet2.train.abs_espnet_model import AbsESPnetModel
from espnet2.train.class_choices import ClassChoices
from espnet2.train.collate_fn import CommonCollateFn

from espnet_ext.nets.baselines.crnn import CRNN
from espnet_ext.nets.sharp.model import (
    HardAttentionRecognizer,
    SharpAttentionRecognizer,
    SoftAttentionRecognizer,
)
from espnet_ext.tasks.abs_ext_task import (
    AbsExtTask,
    TextPreprocessor,
    add_text_arguments,
    read_list,
)

model_choices = ClassChoices(
    "model",
    classes=dict(
        crnn=CRNN,
        soft_attention=SoftAttentionRecognizer,
        hard_attention=HardAttentionRecognizer,
        sharp_attention=SharpAttentionRecognizer,
    ),
    type_check=AbsESPnetModel,
    default="crnn",
)


class ImageTextPreprocessor(TextPreprocessor):
    """Tokenizes ``text`` and turns ``image`` width-first: (H, W[, C]) -> (W, H[, C])."""

    def __call__(self, uid: str, data: dict) -> dict:
        data = super().__call__(uid, data)
        image = data["image"]
        data["image"] = np.ascontiguousarray(np.swapaxes(image, 0, 1))
        return data


class ImageToSequenceTask(AbsExtTask):
    class_choices_list = [model_choices]

    @classmethod
    def add_task_arguments(cls, parser: argparse.ArgumentParser):
        add_text_arguments(parser)
        group = parser.add_argument_group(description="Task related")
        for class_choices in cls.class_choices_list:
            class_choices.add_arguments(group)

    @classmethod
    def build_collate_fn(cls, args: argparse.Namespace, train: bool) -> Callable:
        return CommonCollateFn(float_pad_value=0.0, int_pad_value=-1)  # token 0 is the CTC blank

    @classmethod
    def build_preprocess_fn(cls, args: argparse.Namespace, train: bool) -> Callable | None:
        return ImageTextPreprocessor.from_args(args, train) if args.use_preprocessor else None

    @classmethod
    def required_data_names(cls, train: bool = True, inference: bool = False) -> tuple[str, ...]:
        return ("image",) if inference else ("image", "text")

    @classmethod
    def optional_data_names(cls, train: bool = True, inference: bool = False) -> tuple[str, ...]:
        return ()

    @classmethod
    def build_model(cls, args: argparse.Namespace) -> AbsESPnetModel:
        args.token_list = read_list(
            args.token_list, "token_list"
        )  # stored in config.yaml as a list
        model_class = model_choices.get_class(args.model)
        return model_class(
            vocab_size=len(args.token_list), token_list=args.token_list, **args.model_conf
        )
