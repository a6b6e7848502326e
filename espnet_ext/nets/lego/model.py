"""The LegoNN encoder-decoder as an ESPnet2 MT model (``model: legonn`` with encoder and decoder ``legonn``).

Training minimises eq. (11): the decoder's cross-entropy plus the CTC loss of every encoder module, each
against its target in its own interface vocabulary. ``model_conf.interface_text_keys`` names, per module,
the batch key holding that target: ``text`` (the output vocabulary, allowed only when the module's
interface vocabulary *is* the output vocabulary, as for the shared-BPE MT setups of §V) or any extra
``text_int`` data key (e.g. ``phn`` for a phoneme interface; train with ``--allow_variable_data_keys``).
``encode`` returns the decoder's ingested memory, so ESPnet's MT inference and beam search run unchanged.
"""

from __future__ import annotations

import torch
from espnet2.mt.espnet_model import ESPnetMTModel
from espnet2.torch_utils.device_funcs import force_gatherable

from espnet_ext.errors import ConfigError, InputError
from espnet_ext.nets.lego.decoder import LegoNNDecoder
from espnet_ext.nets.lego.encoder import LegoNNEncoder
from espnet_ext.nets.lego.interface import ctc_loss, multi_module_loss, short_utterances


class LegoNNMTModel(ESPnetMTModel):
    def __init__(
        self,
        *args,
        interface_text_keys: list[str] | None = None,
        on_short_ctc: str = "error",
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        if not isinstance(self.encoder, LegoNNEncoder) or not isinstance(
            self.decoder, LegoNNDecoder
        ):
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
        expected = self.decoder.interface_token_list
        if expected is not None and expected != token_lists[-1]:
            raise ConfigError(
                "the decoder's interface vocabulary differs from the last encoder module's",
                key="decoder_conf.interface_token_list",
            )
        self.interface_text_keys = keys
        self.on_short_ctc = on_short_ctc
        short_utterances(  # validates the policy name before any training
            torch.zeros(1, dtype=torch.long),
            torch.zeros(1, 0, dtype=torch.long),
            torch.zeros(1, dtype=torch.long),
            "model_conf.on_short_ctc",
            on_short_ctc,
        )

    def interfaces(self, src_text, src_text_lengths):
        """Every encoder module's (log-probabilities, lengths)."""
        feats, feats_lengths = self._extract_feats(src_text, src_text_lengths)
        return self.encoder(feats, feats_lengths)[2]

    def encode(self, src_text, src_text_lengths):
        log_probs, lengths = self.interfaces(src_text, src_text_lengths)[-1]
        return self.decoder.ingest(log_probs, lengths)

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

    def forward(self, text, text_lengths, src_text, src_text_lengths, **kwargs):
        batch_size = src_text.shape[0]
        text = text[:, : text_lengths.max()]
        src_text = src_text[:, : src_text_lengths.max()]
        outputs = self.interfaces(src_text, src_text_lengths)
        stats: dict[str, torch.Tensor | None] = {}
        ctc_losses = []
        for i, ((log_probs, lengths), key) in enumerate(zip(outputs, self.interface_text_keys)):
            targets, target_lengths = self.ctc_target(key, text, text_lengths, kwargs)
            short = short_utterances(
                lengths,
                targets,
                target_lengths,
                f"encoder_conf.modules[{i}].olc",
                self.on_short_ctc,
            )
            ctc_losses.append(ctc_loss(log_probs, lengths, targets, target_lengths, skip=short))
            stats[f"loss_ctc_{i}"] = ctc_losses[-1].detach()
            stats[f"ctc_too_short_{i}"] = short.sum().float()
        memory, memory_lengths = self.decoder.ingest(*outputs[-1])
        loss_ce, acc, bleu = self._calc_mt_att_loss(memory, memory_lengths, text, text_lengths)
        loss = multi_module_loss(loss_ce, ctc_losses)
        stats.update(loss=loss.detach(), loss_ce=loss_ce.detach(), acc=acc, bleu=bleu)
        return force_gatherable((loss, stats, batch_size), loss.device)
