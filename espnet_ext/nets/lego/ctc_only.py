"""The modular plug (§IV-B3, §IV-C): LegoNN encoder modules trained in isolation, with CTC alone
(``model: legonn_ctc``).

The paper trains the Ro-En MT encoder of Table III (§V-C1) and the Europarl phoneme + pronunciation encoder
of Tables IV/V (§V-C2: "the LegoNN phoneme+pronunciation encoder-only model trained using CTC loss") this
way, then plugs in the decoder of a De-En MT model with no further training. The loss is eq. (11) without
its cross-entropy term: the sum of every encoder module's CTC loss, each against the target in its own
interface vocabulary (``model_conf.interface_text_keys``, as ``model: legonn``). There is no decoder:
``espnet_ext.bin.lego_export`` writes only the encoder artefacts, ``lego_compose`` chains them with a
decoder artefact of another experiment, ``lego_ctc_decode`` decodes a module greedily on its own.

ESPnet2's MT task always builds a decoder, so MT configs name ``decoder: legonn_none`` (``AbsentDecoder``,
no parameters); ASR configs name ``decoder: none``.
"""

from __future__ import annotations

import torch
from espnet2.asr.decoder.abs_decoder import AbsDecoder
from espnet2.asr.espnet_model import ESPnetASRModel
from espnet2.mt.espnet_model import ESPnetMTModel
from espnet2.torch_utils.device_funcs import force_gatherable

from espnet_ext.errors import ConfigError
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

    def ctc_only_forward(self, outputs, text, text_lengths, batch: dict, batch_size: int):
        ctc_losses, stats = self.interface_losses(outputs, text, text_lengths, batch)
        loss = torch.stack(ctc_losses).sum()
        stats["loss"] = loss.detach()
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
        # No BLEU (nothing is generated) and no decoder embedding to share.
        kwargs["report_bleu"] = False
        super().__init__(*args, decoder=AbsentDecoder(0, 0), **kwargs)  # ESPnet's type check
        self.decoder = None
        self.setup_interfaces(interface_text_keys, on_short_ctc, with_decoder=False)

    def interfaces(self, src_text, src_text_lengths):
        return text_interfaces(self, src_text, src_text_lengths)

    def forward(self, text, text_lengths, src_text, src_text_lengths, **kwargs):
        text = text[:, : text_lengths.max()]
        src_text = src_text[:, : src_text_lengths.max()]
        outputs = self.interfaces(src_text, src_text_lengths)
        return self.ctc_only_forward(outputs, text, text_lengths, kwargs, src_text.size(0))


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
