"""Image classification as an ESPnet2 task (``python -m espnet_ext.bin.cls_train``).

Data: ``image`` (type ``image``) and ``label``, either ``text_int`` (``<id> <class index>``) or
``text`` (``<id> <class name>``) mapped through ``--class_list`` (one class name per line; line n is
index n-1). Models come from ``model_choices``; another model is one more entry there
(``espnet_ext.registry.register``). A model is an ``AbsESPnetModel`` with ``forward(image, label)``
for training and ``classify(image)`` -> logits for ``cls_inference``; images arrive as ``(B, H, W)``
grey or ``(B, H, W, C)``, labels as ``(B, 1)``.

``--image_transform_conf`` (e.g. ``{input_size: 224, auto_augment: rand-m9-mstd0.5-inc1, re_prob: 0.25}``)
passes every RGB image through timm's ``create_transform``: the training pipeline (random resized crop,
flip, RandAugment, random erasing, normalisation) for training, its evaluation pipeline (resize, centre
crop, normalisation) for validation and inference -- the Swin recipe's augmentation. Empty: images go
to the model as decoded, in [0, 1].
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

import numpy as np
from espnet2.train.abs_espnet_model import AbsESPnetModel
from espnet2.train.class_choices import ClassChoices
from espnet2.train.collate_fn import CommonCollateFn
from espnet2.train.preprocessor import AbsPreprocessor
from espnet2.utils.nested_dict_action import NestedDictAction
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


def timm_image_transform(conf: dict, train: bool) -> Callable[[np.ndarray], np.ndarray]:
    """timm's training or evaluation transform on one (H, W, 3) float image in [0, 1] -> (H', W', 3)."""
    from PIL import Image
    from timm.data import create_transform

    conf = dict(conf)
    if not train:  # evaluation: only the geometry and normalisation options apply
        keep = ("input_size", "interpolation", "mean", "std", "crop_pct", "crop_mode")
        conf = {k: conf[k] for k in keep if k in conf}
    try:
        transform = create_transform(is_training=train, **conf)
    except (TypeError, ValueError, AssertionError) as e:
        raise ConfigError(f"image_transform_conf: timm's create_transform refused it: {e}") from e

    def apply(image: np.ndarray) -> np.ndarray:
        if image.ndim != 3 or image.shape[-1] != 3:
            raise ValueError(f"the image transform needs RGB images, got shape {image.shape}")
        pil = Image.fromarray(np.round(np.clip(image, 0, 1) * 255).astype(np.uint8))
        return transform(pil).permute(1, 2, 0).numpy()

    return apply


class LabelPreprocessor(AbsPreprocessor):
    """``label`` as one class index: class names are looked up in the class list, indices range-checked.
    With ``image_transform`` the image goes through it (augmentation, resizing, normalisation)."""

    def __init__(
        self,
        train: bool,
        num_classes: int,
        class_list: Sequence[str] | None = None,
        image_transform: Callable[[np.ndarray], np.ndarray] | None = None,
    ):
        super().__init__(train)
        self.num_classes = num_classes
        self.class_to_index = (
            None if class_list is None else {name: i for i, name in enumerate(class_list)}
        )
        self.image_transform = image_transform

    def __call__(self, uid: str, data: dict) -> dict:
        if self.image_transform is not None and "image" in data:
            try:
                data["image"] = self.image_transform(data["image"])
            except ValueError as e:
                raise InputError(str(e), key=uid) from e
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
        group.add_argument(
            "--image_transform_conf",
            action=NestedDictAction,
            default=dict(),
            help="Options of timm.data.create_transform (augmentation, input_size); empty: none",
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
        conf = getattr(args, "image_transform_conf", None) or {}
        transform = timm_image_transform(conf, train) if conf else None
        return LabelPreprocessor(train, number_of_classes(args), class_names(args), transform)

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
