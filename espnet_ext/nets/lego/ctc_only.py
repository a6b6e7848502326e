"""The modular plug (§IV-B3, §IV-C): LegoNN encoder modules trained in isolation, with CTC alone
(``model: legonn_ctc``).

The paper trains the Ro-En MT encoder of Table III (§V-C1) and the Europarl phoneme + pronunciation encoder
of Tables IV/V (§V-C2: "the LegoNN phoneme+pronunciation encoder-only model trained using CTC loss") this
way, then plugs in the decoder of a De-En MT model with no further training. The loss is eq. (11) without
its cross-entropy term: the sum of every encoder module's CTC loss, each against the target in its own
interface vocabulary (``model_conf.interface_text_keys``, as ``model: legonn``). There is no decoder:
``espnet_ext.bin.lego_export`` writes only the encoder artefacts, ``lego_compose`` chains them with a
decoder artefact of another experiment, ``lego_ctc_decode`` decodes a module greedily on its own.

An MT model whose last module emits the output vocabulary (CTC target ``text``) reports the validation BLEU
of that module's greedy path, as ESPnet's MT models report the BLEU of their decoder's: the §V rule "average
a moving window of 10 checkpoints and pick the one with the best validation BLEU" (``window10.valid.bleu.max``)
then selects the encoder-only model too (Table I's "Encoder Only" row has its dev BLEU).

ESPnet2's MT task always builds a decoder, so MT configs name ``decoder: legonn_none`` (``AbsentDecoder``,
no parameters); ASR configs name ``decoder: none``.
"""

from __future__ import annotations

import nltk
import torch
from espnet2.asr.decoder.abs_decoder import AbsDecoder
from espnet2.asr.espnet_model import ESPnetASRModel
from espnet2.mt.espnet_model import ESPnetMTModel
from espnet2.torch_utils.device_funcs import force_gatherable

from espnet_ext.errors import ConfigError
from espnet_ext.nets.lego.interface import greedy_decode
from espnet_ext.nets.lego.model import LegoNNLoss, speech_interfaces, text_interfaces

# ``model`` names of LegoNN models (the export, decoding and analysis tools accept both).
LEGONN_MODELS = ("legonn", "legonn_ctc")


def _no_decoder(*args, **kwargs):
    raise ConfigError(
        "an encoder-only LegoNN model has no decoder: compose its modules with one "
        "(espnet_ext.bin.lego_compose) or decode them with espnet_ext.bin.lego_ctc_decode",
        key="decoder",
    )


class AbsentDecoder(AbsDecoder):
    """What ESPnet2's MT task gets for ``decoder: legonn_none``: no parameters, never run."""

    def __init__(self, vocab_size: int, encoder_output_size: int):
        super().__init__()

    forward = score = batch_score = _no_decoder


def _check_no_decoder(decoder) -> None:
    if decoder is not None and not isinstance(decoder, AbsentDecoder):
        raise ConfigError(
            "model legonn_ctc trains encoder modules alone: decoder: legonn_none (MT) or none (ASR)",
            key="decoder",
        )


class LegoNNCTCOnly(LegoNNLoss):
    """The CTC-only loss over the encoder modules; ``encode`` is refused (there is no decoder memory)."""

    def ctc_only_forward(
        self, outputs, text, text_lengths, batch: dict, batch_size: int, stats: dict | None = None
    ):
        ctc_losses, loss_stats = self.interface_losses(outputs, text, text_lengths, batch)
        loss = torch.stack(ctc_losses).sum()
        stats = {**loss_stats, **(stats or {}), "loss": loss.detach()}
        return force_gatherable((loss, stats, batch_size), loss.device)

    encode = _no_decoder


class LegoNNCTCMTModel(LegoNNCTCOnly, ESPnetMTModel):
    def __init__(
        self,
        *args,
        decoder=None,
        interface_text_keys: list[str] | None = None,
        on_short_ctc: str = "error",
        **kwargs,
    ):
        _check_no_decoder(decoder)
        # No decoder to score or embedding to share: the BLEU reported is the greedy CTC path's.
        kwargs["report_bleu"] = False
        super().__init__(*args, decoder=AbsentDecoder(0, 0), **kwargs)  # ESPnet's type check
        self.decoder = None
        self.setup_interfaces(interface_text_keys, on_short_ctc, with_decoder=False)
        # the greedy path's BLEU needs the output vocabulary at the last interface
        self.report_ctc_bleu = self.interface_text_keys[-1] == "text"

    def validation_bleu(self, log_probs, lengths, text, text_lengths) -> float | None:
        """Corpus BLEU (x100, nltk) of the last module's greedy CTC path in this batch, over its tokens (the
        model holds no detokenizer; as a selection criterion token BLEU ranks checkpoints as BLEU does). None
        in training, as ESPnet's MT models report theirs. (ESPnet's ``ErrorCalculator`` is not reused: it
        cuts each hypothesis at its reference's length, which suits teacher-forced outputs only.)"""
        if self.training or not self.report_ctc_bleu:
            return None
        hyps = greedy_decode(log_probs, lengths)
        refs = [[r[:n].tolist()] for r, n in zip(text.cpu(), text_lengths.tolist())]
        return nltk.bleu_score.corpus_bleu(refs, hyps) * 100

    def interfaces(self, src_text, src_text_lengths):
        return text_interfaces(self, src_text, src_text_lengths)

    def forward(self, text, text_lengths, src_text, src_text_lengths, **kwargs):
        text = text[:, : text_lengths.max()]
        src_text = src_text[:, : src_text_lengths.max()]
        outputs = self.interfaces(src_text, src_text_lengths)
        bleu = self.validation_bleu(*outputs[-1], text, text_lengths)
        return self.ctc_only_forward(
            outputs, text, text_lengths, kwargs, src_text.size(0), stats={"bleu": bleu}
        )


class LegoNNCTCASRModel(LegoNNCTCOnly, ESPnetASRModel):
    def __init__(
        self,
        *args,
        decoder=None,
        interface_text_keys: list[str] | None = None,
        on_short_ctc: str = "error",
        ctc_weight: float = 1.0,
        **kwargs,
    ):
        _check_no_decoder(decoder)
        if ctc_weight != 1.0:
            raise ConfigError(
                "an encoder-only LegoNN model is trained with its modules' CTC alone: leave "
                "ctc_weight at 1",
                key="model_conf.ctc_weight",
            )
        kwargs.update(report_cer=False, report_wer=False)
        super().__init__(*args, decoder=None, ctc_weight=1.0, **kwargs)
        # ESPnet's CTC head would project the interface log-probabilities again: the modules' own
        # CTC interfaces (eq. 6) are the outputs.
        self.ctc = None
        self.setup_interfaces(interface_text_keys, on_short_ctc, with_decoder=False)

    def interfaces(self, speech, speech_lengths):
        return speech_interfaces(self, speech, speech_lengths)

    def forward(self, speech, speech_lengths, text, text_lengths, **kwargs):
        text = text[:, : text_lengths.max()]
        outputs = self.interfaces(speech, speech_lengths)
        return self.ctc_only_forward(outputs, text, text_lengths, kwargs, speech.size(0))
