"""Image classification as an ESPnet2 task (``python -m espnet_ext.bin.cls_train``).

Data: ``image`` (type ``image``) and ``label``, either ``text_int`` (``<id> <class index>``) or
``text`` (``<id> <class name>``) mapped through ``--class_list`` (one class name per line; line n is
index n-1). Models come from ``model_choices``; another model is one more entry there
(``espnet_ext.registry.register``). A model is an ``AbsESPnetModel`` with ``forward(image, label)``
for training and ``classify(image)`` -> logits for ``cls_inference``; images arrive as ``(B, H, W)``
grey or ``(B, H, W, C)``, labels as ``(B, 1)``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

import numpy as np
from espnet2.train.abs_espnet_model import AbsESPnetModel
from espnet2.train.class_choices import ClassChoices
from espnet2.train.collate_fn import CommonCollateFn
from espnet2.train.preprocessor import AbsPreprocessor
from espnet2.utils.types import int_or_none, str2bool, str_or_none

from espnet_ext.errors import ConfigError, InputError
from espnet_ext.nets.baselines.convnet_classifier import ConvNetClassifier
from espnet_ext.nets.swin.classifier import SwinClassifier
from espnet_ext.tasks.abs_ext_task import AbsExtTask, read_list

model_choices = ClassChoices(
    "model",
    classes=dict(convnet=ConvNetClassifier, swin=SwinClassifier),
    type_check=AbsESPnetModel,
    default="convnet",
)


class LabelPreprocessor(AbsPreprocessor):
    """``label`` as one class index: class names are looked up in the class list, indices range-checked."""

    def __init__(self, train: bool, num_classes: int, class_list: Sequence[str] | None = None):
        super().__init__(train)
        self.num_classes = num_classes
        self.class_to_index = (
            None if class_list is None else {name: i for i, name in enumerate(class_list)}
        )

    def __call__(self, uid: str, data: dict) -> dict:
        if "label" not in data:  # inference
            return data
        label = data["label"]
        if isinstance(label, str):
            if self.class_to_index is None:
                raise InputError("label is a class name but no --class_list was given", key=uid)
            if label.strip() not in self.class_to_index:
                raise InputError(f"label '{label}' is not in the class list", key=uid)
            index = self.class_to_index[label.strip()]
        else:
            if label.size != 1:
                raise InputError(f"expected one class index, got {label.tolist()}", key=uid)
            index = int(label.reshape(-1)[0])
            if not 0 <= index < self.num_classes:
                raise InputError(
                    f"class index {index} is outside 0..{self.num_classes - 1}", key=uid
                )
        data["label"] = np.array([index], dtype=np.int64)
        return data


def class_names(args: argparse.Namespace) -> list[str] | None:
    """The class list (stored in the args as a list, so config.yaml is self-contained), or None."""
    if args.class_list is None:
        return None
    args.class_list = read_list(args.class_list, "class_list")
    return args.class_list


def number_of_classes(args: argparse.Namespace) -> int:
    names = class_names(args)
    if names is not None:
        if args.num_classes is not None and args.num_classes != len(names):
            raise ConfigError(
                f"--num_classes {args.num_classes} but --class_list has {len(names)} classes"
            )
        return len(names)
    if args.num_classes is None:
        raise ConfigError("give --class_list (class names) or --num_classes (integer labels)")
    return args.num_classes


class ImageClassificationTask(AbsExtTask):
    class_choices_list = [model_choices]

    @classmethod
    def add_task_arguments(cls, parser: argparse.ArgumentParser):
        group = parser.add_argument_group(description="Task related")
        group.add_argument(
            "--class_list",
            type=str_or_none,
            default=None,
            help="Class names, one per line (line n = class index n-1); needed for class-name labels",
        )
        group.add_argument(
            "--num_classes", type=int_or_none, default=None, help="Class count, for index labels"
        )
        group.add_argument(
            "--use_preprocessor", type=str2bool, default=True, help="Map/check labels"
        )
        for class_choices in cls.class_choices_list:
            class_choices.add_arguments(group)

    @classmethod
    def build_collate_fn(cls, args: argparse.Namespace, train: bool) -> Callable:
        # One image and one label per example: batch them without *_lengths.
        return CommonCollateFn(
            float_pad_value=0.0, int_pad_value=-1, not_sequence=["image", "label"]
        )

    @classmethod
    def build_preprocess_fn(cls, args: argparse.Namespace, train: bool) -> Callable | None:
        if not args.use_preprocessor:
            return None
        return LabelPreprocessor(train, number_of_classes(args), class_names(args))

    @classmethod
    def required_data_names(cls, train: bool = True, inference: bool = False) -> tuple[str, ...]:
        return ("image",) if inference else ("image", "label")

    @classmethod
    def optional_data_names(cls, train: bool = True, inference: bool = False) -> tuple[str, ...]:
        return ()

    @classmethod
    def build_model(cls, args: argparse.Namespace) -> AbsESPnetModel:
        model_class = model_choices.get_class(args.model)
        return model_class(num_classes=number_of_classes(args), **args.model_conf)
