"""Lip reading (visual speech recognition) as an ESPnet2 task (``python -m espnet_ext.bin.vsr_train``).

Data: ``video`` (type ``video``: grey mouth crops; or pre-extracted features with ``--input_size``
and ``--frontend none``) and ``text`` (tokenized like ASR). The model is ESPnet's ASR model: the
visual frontend comes from this module's ``frontend_choices``; specaug, normalize, preencoder,
encoder, postencoder and decoder are ESPnet's own ``espnet2.tasks.asr`` tables (so whatever is
registered there, ours included, is available here too), and decoding uses ESPnet's beam search
(``vsr_inference``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from espnet2.asr.ctc import CTC
from espnet2.asr.frontend.abs_frontend import AbsFrontend
from espnet2.tasks import asr
from espnet2.torch_utils.initialize import initialize
from espnet2.train.abs_espnet_model import AbsESPnetModel
from espnet2.train.class_choices import ClassChoices
from espnet2.train.collate_fn import CommonCollateFn
from espnet2.utils.get_default_kwargs import get_default_kwargs
from espnet2.utils.nested_dict_action import NestedDictAction
from espnet2.utils.types import int_or_none, str_or_none

from espnet_ext.errors import ConfigError
from espnet_ext.nets.baselines.visual_frontend import Conv3dResNetFrontend, ESPnetVSRModel
from espnet_ext.tasks.abs_ext_task import (
    AbsExtTask,
    TextPreprocessor,
    add_text_arguments,
    read_list,
)

frontend_choices = ClassChoices(
    "frontend",
    classes=dict(conv3d_resnet18=Conv3dResNetFrontend),
    type_check=AbsFrontend,
    default="conv3d_resnet18",
    optional=True,
)
model_choices = ClassChoices(
    "model",
    classes=dict(espnet=ESPnetVSRModel),
    type_check=AbsESPnetModel,
    default="espnet",
)


def _build_optional(choices: ClassChoices, name: str | None, conf: dict, **kwargs):
    return None if name is None else choices.get_class(name)(**kwargs, **conf)


class LipReadingTask(AbsExtTask):
    class_choices_list = [
        frontend_choices,
        asr.specaug_choices,
        asr.normalize_choices,
        model_choices,
        asr.preencoder_choices,
        asr.encoder_choices,
        asr.postencoder_choices,
        asr.decoder_choices,
    ]

    @classmethod
    def add_task_arguments(cls, parser: argparse.ArgumentParser):
        add_text_arguments(parser)
        group = parser.add_argument_group(description="Task related")
        group.add_argument(
            "--input_size",
            type=int_or_none,
            default=None,
            help="Feature dimension of pre-extracted visual features (then no frontend is built)",
        )
        group.add_argument(
            "--ctc_conf",
            action=NestedDictAction,
            default=get_default_kwargs(CTC),
            help="Keyword arguments of CTC",
        )
        group.add_argument(
            "--init",
            type=lambda x: str_or_none(x.lower()),
            default=None,
            choices=[
                "chainer",
                "xavier_uniform",
                "xavier_normal",
                "kaiming_uniform",
                "kaiming_normal",
                "normal",
                None,
            ],
            help="The initialization method",
        )
        for class_choices in cls.class_choices_list:
            class_choices.add_arguments(group)

    @classmethod
    def build_collate_fn(cls, args: argparse.Namespace, train: bool) -> Callable:
        return CommonCollateFn(
            float_pad_value=0.0, int_pad_value=-1
        )  # -1: ESPnet's ignore_id for text

    @classmethod
    def build_preprocess_fn(cls, args: argparse.Namespace, train: bool) -> Callable | None:
        return TextPreprocessor.from_args(args, train) if args.use_preprocessor else None

    @classmethod
    def required_data_names(cls, train: bool = True, inference: bool = False) -> tuple[str, ...]:
        return ("video",) if inference else ("video", "text")

    @classmethod
    def optional_data_names(cls, train: bool = True, inference: bool = False) -> tuple[str, ...]:
        return ()

    @classmethod
    def build_model(cls, args: argparse.Namespace) -> AbsESPnetModel:
        args.token_list = read_list(
            args.token_list, "token_list"
        )  # stored in config.yaml as a list
        vocab_size = len(args.token_list)

        if args.input_size is None:
            if args.frontend is None:
                raise ConfigError(
                    "--frontend none needs --input_size (the dimension of the given features)"
                )
            frontend = frontend_choices.get_class(args.frontend)(**args.frontend_conf)
            input_size = frontend.output_size()
        else:  # features were extracted beforehand
            args.frontend, args.frontend_conf = None, {}
            frontend, input_size = None, args.input_size

        specaug = _build_optional(asr.specaug_choices, args.specaug, args.specaug_conf)
        normalize = _build_optional(asr.normalize_choices, args.normalize, args.normalize_conf)
        preencoder = _build_optional(asr.preencoder_choices, args.preencoder, args.preencoder_conf)
        if preencoder is not None:
            input_size = preencoder.output_size()
        encoder = asr.encoder_choices.get_class(args.encoder)(
            input_size=input_size, **args.encoder_conf
        )
        encoder_output_size = encoder.output_size()
        postencoder = _build_optional(
            asr.postencoder_choices,
            args.postencoder,
            args.postencoder_conf,
            input_size=encoder_output_size,
        )
        if postencoder is not None:
            encoder_output_size = postencoder.output_size()
        if args.decoder == "transducer":
            raise ConfigError("transducer decoders are not supported by LipReadingTask")
        decoder = _build_optional(
            asr.decoder_choices,
            args.decoder,
            args.decoder_conf,
            vocab_size=vocab_size,
            encoder_output_size=encoder_output_size,
        )
        ctc = CTC(odim=vocab_size, encoder_output_size=encoder_output_size, **args.ctc_conf)

        model_class = model_choices.get_class(args.model)
        # The model counts its updates for freeze_finetune_updates: a mini-batch is 1/accum_grad of one.
        accum = (
            {"accum_grad": getattr(args, "accum_grad", 1)}
            if issubclass(model_class, ESPnetVSRModel)
            else {}
        )
        model = model_class(
            vocab_size=vocab_size,
            token_list=args.token_list,
            frontend=frontend,
            specaug=specaug,
            normalize=normalize,
            preencoder=preencoder,
            encoder=encoder,
            postencoder=postencoder,
            decoder=decoder,
            ctc=ctc,
            joint_network=None,
            **args.model_conf,
            **accum,
        )
        if args.init is not None:
            initialize(model, args.init)
        return model
