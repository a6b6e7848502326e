"""Our MT task: ESPnet2's ``MTTask`` without the CTC head that its ``build_model`` makes and drops.

ESPnet2's MT ``build_model`` builds ``CTC(odim=vocabulary, encoder_output_size=encoder.output_size())`` for
every model and hands it only to ``discrete_asr``. A LegoNN encoder (``espnet_ext.nets.lego``) outputs a
distribution over its interface vocabulary, so that head is a vocabulary x vocabulary linear layer: at the
WMT De-En + Ro-En dictionary of 41k tokens, 1.7G parameters (6.7 GB, about 13 s of single-threaded
initialisation) made and garbage-collected in every training process, before the first update.
tools/upstream/espnet-mt-ctc-when-used.patch builds the head only for ``discrete_asr``; until it lands,
``MTTask.build_model`` builds the LegoNN models (``LEGONN_MODELS``) from ESPnet's own choice tables in
ESPnet's order without it and leaves every other model to ESPnet. Its CTC head is built after the modules
a LegoNN model keeps, so with one seed both paths give the same weights (tests/tasks/test_mt.py).

Decoding still builds the model with ESPnet's ``MTTask`` (the module global of ``espnet2.bin.mt_inference``),
head included, until the patch lands; the LegoNN tools (export, compose, CTC decoding) use this task.
"""

from __future__ import annotations

import argparse

from espnet2.mt.espnet_model import ESPnetMTModel
from espnet2.tasks import mt
from espnet2.torch_utils.initialize import initialize

from espnet_ext.errors import ConfigError
from espnet_ext.nets.lego.ctc_only import LEGONN_MODELS
from espnet_ext.tasks.abs_ext_task import read_list
from espnet_ext.tasks.attention_plots import AttentionPlotCheck
from espnet_ext.tasks.task_conditioned import OneTaskBatches
from espnet_ext.tasks.trainer import InterruptSafeTrainer

# Pieces of ESPnet's MT model a LegoNN model has no use for: set, they are refused, not dropped.
_UNUSED_BY_LEGONN = ("specaug", "preencoder", "postencoder")


class MTTask(OneTaskBatches, AttentionPlotCheck, mt.MTTask):
    """ESPnet2's MT task, building LegoNN models without the unused CTC head (see the module doc)."""

    trainer = InterruptSafeTrainer

    @classmethod
    def build_model(cls, args: argparse.Namespace) -> ESPnetMTModel:
        if getattr(args, "model", None) not in LEGONN_MODELS:
            return super().build_model(args)
        for key in _UNUSED_BY_LEGONN:
            if getattr(args, key, None) is not None:
                raise ConfigError(
                    f"a LegoNN model has no {key}: leave it unset",
                    path=getattr(args, "config", None),
                    key=key,
                )
        # read as ESPnet does and stored back as lists, so the config a run writes is self-contained
        token_list = args.token_list = read_list(args.token_list, "token_list")
        src_token_list = src_vocab_size = None
        if args.src_token_list is not None:
            src_token_list = args.src_token_list = read_list(args.src_token_list, "src_token_list")
            src_vocab_size = len(src_token_list)
        if args.input_size is None:  # token ids in, embedded by the frontend
            frontend_class = mt.frontend_choices.get_class(args.frontend)
            frontend = frontend_class(input_size=src_vocab_size, **args.frontend_conf)
            input_size = frontend.output_size()
        else:
            args.frontend, args.frontend_conf, frontend = None, {}, None
            input_size = args.input_size
        encoder = mt.encoder_choices.get_class(args.encoder)(
            input_size=input_size, **args.encoder_conf
        )
        decoder = mt.decoder_choices.get_class(args.decoder)(
            vocab_size=len(token_list),
            encoder_output_size=encoder.output_size(),
            **args.decoder_conf,
        )
        model = mt.model_choices.get_class(args.model)(
            vocab_size=len(token_list),
            src_vocab_size=src_vocab_size,
            frontend=frontend,
            preencoder=None,
            encoder=encoder,
            postencoder=None,
            decoder=decoder,
            token_list=token_list,
            src_token_list=src_token_list,
            **args.model_conf,
        )
        if args.init is not None:
            initialize(model, args.init)
        return model
