"""LegoNN encoder-decoder models for ESPnet2's MT and ASR tasks (``model: legonn``, with encoder and decoder
``legonn``).

Training minimises eq. (11): the decoder's cross-entropy plus the CTC loss of every encoder module, each
against its target in its own interface vocabulary. ``model_conf.interface_text_keys`` names, per module,
the batch key holding that target: ``text`` (the output vocabulary, allowed only when the module's
interface vocabulary *is* the output vocabulary, as for the shared-BPE MT setups of §V) or any extra
``text_int`` data key (e.g. ``phn`` for a phoneme interface; train with ``--allow_variable_data_keys``).
``encode`` returns the decoder's ingested memory, so ESPnet's inference and beam search run unchanged
(with ``--ctc_weight 0``: the interface CTC belongs to the encoder modules, not to ESPnet's CTC head).
"""

from __future__ import annotations

import torch
from espnet2.asr.espnet_model import ESPnetASRModel
from espnet2.mt.espnet_model import ESPnetMTModel
from espnet2.torch_utils.device_funcs import force_gatherable

from espnet_ext.errors import ConfigError, InputError
from espnet_ext.nets.lego.decoder import LegoNNDecoder
from espnet_ext.nets.lego.encoder import LegoNNEncoder
from espnet_ext.nets.lego.interface import (
    check_short_policy,
    ctc_loss,
    multi_module_loss,
    short_utterances,
)


class LegoNNLoss:
    """What both tasks share: interface checks, per-module CTC targets and losses (eq. 11)."""

    def setup_interfaces(
        self, interface_text_keys: list[str] | None, on_short_ctc: str, with_decoder: bool = True
    ) -> None:
        """``with_decoder`` False: an encoder-only model (``espnet_ext.nets.lego.ctc_only``)."""
        if not isinstance(self.encoder, LegoNNEncoder):
            raise ConfigError("a LegoNN model needs encoder: legonn", key="encoder")
        if with_decoder and not isinstance(self.decoder, LegoNNDecoder):
            raise ConfigError("model legonn needs encoder: legonn and decoder: legonn", key="model")
        token_lists = self.encoder.token_lists
        keys = list(interface_text_keys or ["text"] * len(token_lists))
        if len(keys) != len(token_lists):
            raise ConfigError(
                f"names {len(keys)} keys for {len(token_lists)} encoder modules",
                key="model_conf.interface_text_keys",
            )
        for i, (key, tokens) in enumerate(zip(keys, token_lists)):
            if key == "text" and tokens != list(self.token_list):
                raise ConfigError(
                    f"module {i}'s interface vocabulary differs from the output token_list, so its "
                    "CTC target cannot be 'text': name a text_int data key tokenized with it",
                    key=f"model_conf.interface_text_keys[{i}]",
                )
        expected = self.decoder.interface_token_list if with_decoder else None
        if expected is not None and expected != token_lists[-1]:
            raise ConfigError(
                "the decoder's interface vocabulary differs from the last encoder module's",
                key="decoder_conf.interface_token_list",
            )
        self.interface_text_keys = keys
        self.on_short_ctc = check_short_policy(on_short_ctc)

    def ctc_target(self, key: str, text, text_lengths, batch: dict):
        if key == "text":
            return text, text_lengths
        if key not in batch or f"{key}_lengths" not in batch:
            raise InputError(
                f"the batch has no {key!r} (CTC target of an encoder module): add it to the "
                "data path arguments as text_int and pass --allow_variable_data_keys true",
                key="model_conf.interface_text_keys",
            )
        lengths = batch[f"{key}_lengths"]
        return batch[key][:, : lengths.max()], lengths

    def interface_losses(self, outputs, text, text_lengths, batch: dict):
        """-> [F_CTC of module i] and their stats (with the count of too-short outputs)."""
        stats: dict[str, torch.Tensor] = {}
        losses = []
        for i, ((log_probs, lengths), key) in enumerate(zip(outputs, self.interface_text_keys)):
            targets, target_lengths = self.ctc_target(key, text, text_lengths, batch)
            short = short_utterances(
                lengths,
                targets,
                target_lengths,
                f"encoder_conf.modules[{i}].olc",
                self.on_short_ctc,
            )
            losses.append(ctc_loss(log_probs, lengths, targets, target_lengths, skip=short))
            stats[f"loss_ctc_{i}"] = losses[-1].detach()
            stats[f"ctc_too_short_{i}"] = short.sum().float()
        return losses, stats

    def encode(self, *inputs, **named_inputs):
        """Decoder memory (what ESPnet's beam search attends to): the ingested last interface."""
        return self.decoder.ingest(*self.interfaces(*inputs, **named_inputs)[-1])


def text_interfaces(model: ESPnetMTModel, src_text, src_text_lengths):
    """The encoder modules' interface outputs of a LegoNN MT model (source embedding, then the encoder)."""
    feats, feats_lengths = model._extract_feats(src_text, src_text_lengths)
    return model.encoder(feats, feats_lengths)[2]


class LegoNNMTModel(LegoNNLoss, ESPnetMTModel):
    def __init__(
        self,
        *args,
        interface_text_keys: list[str] | None = None,
        on_short_ctc: str = "error",
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.setup_interfaces(interface_text_keys, on_short_ctc)

    def interfaces(self, src_text, src_text_lengths):
        """Every encoder module's (log-probabilities, lengths)."""
        return text_interfaces(self, src_text, src_text_lengths)

    def forward(self, text, text_lengths, src_text, src_text_lengths, **kwargs):
        text = text[:, : text_lengths.max()]
        src_text = src_text[:, : src_text_lengths.max()]
        outputs = self.interfaces(src_text, src_text_lengths)
        ctc_losses, stats = self.interface_losses(outputs, text, text_lengths, kwargs)
        memory, memory_lengths = self.decoder.ingest(*outputs[-1])
        loss_ce, acc, bleu = self._calc_mt_att_loss(memory, memory_lengths, text, text_lengths)
        loss = multi_module_loss(loss_ce, ctc_losses)
        stats.update(loss=loss.detach(), loss_ce=loss_ce.detach(), acc=acc, bleu=bleu)
        return force_gatherable((loss, stats, src_text.size(0)), loss.device)


def speech_interfaces(model: ESPnetASRModel, speech, speech_lengths):
    """The encoder modules' interface outputs of a LegoNN ASR model (features, SpecAugment in training,
    normalisation, then the encoder)."""
    feats, feats_lengths = model._extract_feats(speech, speech_lengths)
    if model.specaug is not None and model.training:
        feats, feats_lengths = model.specaug(feats, feats_lengths)
    if model.normalize is not None:
        feats, feats_lengths = model.normalize(feats, feats_lengths)
    return model.encoder(feats, feats_lengths)[2]


class LegoNNASRModel(LegoNNLoss, ESPnetASRModel):
    def __init__(
        self,
        *args,
        interface_text_keys: list[str] | None = None,
        on_short_ctc: str = "error",
        ctc_weight: float = 0.0,
        **kwargs,
    ):
        if ctc_weight != 0.0:
            raise ConfigError(
                "a LegoNN model's CTC losses are its encoder modules' (eq. 11); ESPnet's extra CTC "
                "head is not used: leave ctc_weight at 0",
                key="model_conf.ctc_weight",
            )
        super().__init__(*args, ctc_weight=0.0, **kwargs)
        self.setup_interfaces(interface_text_keys, on_short_ctc)

    def interfaces(self, speech, speech_lengths):
        return speech_interfaces(self, speech, speech_lengths)

    def forward(self, speech, speech_lengths, text, text_lengths, **kwargs):
        text = text[:, : text_lengths.max()]
        outputs = self.interfaces(speech, speech_lengths)
        ctc_losses, stats = self.interface_losses(outputs, text, text_lengths, kwargs)
        memory, memory_lengths = self.decoder.ingest(*outputs[-1])
        loss_ce, acc, cer, wer = self._calc_att_loss(memory, memory_lengths, text, text_lengths)
        loss = multi_module_loss(loss_ce, ctc_losses)
        stats.update(loss=loss.detach(), loss_ce=loss_ce.detach(), acc=acc, cer=cer, wer=wer)
        return force_gatherable((loss, stats, speech.size(0)), loss.device)
