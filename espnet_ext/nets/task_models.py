"""ESPnet2 ASR/ST/MT models that feed each utterance's task id to head selection and adapters.

ESPnet's encoders see only ``(xs_pad, ilens)`` and its decoders only tokens and memory, so the task id
does not travel through their calls: the model's ``forward`` receives it as an extra data name and sets it
on every task-conditioned module (``set_task_id``) before running ESPnet's own forward. Data names:

  ``task_id``          one id per utterance (LongTensor (B,) or (B, 1)), for encoder and decoder;
  ``encoder_task_id``  / ``decoder_task_id``  override it per side, e.g. the source language for the
                       encoder and the target language for the decoder, which is how head selection serves
                       zero-shot directions (each side's language was seen in training).

A recipe passes them as ESPnet2 data files (``--train_data_path_and_name_and_type tags,task_id,...`` with
``--allow_variable_data_keys true``, since ESPnet's tasks do not list them). Decoding outside ``forward``
(ESPnet's ``Speech2Text`` / ``Text2Text``) calls ``model.set_task_id(...)`` once per utterance first.

  ``target_language_id``  the target language of a multilingual decoder (``target_languages`` below).

Options (``model_conf``): ``selection_kl_weight`` w of the eq. (3) KL added to the loss (reported as
``selection_kl`` in the stats), normalised as the authors' ``HeadSelectionLoss`` (fairseq
examples/attention_head_selection): per side (encoder, decoder) the KL of an utterance's task averaged over
layers and candidate heads, the sides added, utterances weighted by their target tokens (with <eos>) and
divided as ESPnet divides the cross-entropy (tokens with ``length_normalized_loss``, else utterances), so
w means what their ``--kl-weight`` (default 0) means; ``selection_kl_form`` "bernoulli" (eq. (3), the
default) or "authors" (their term: y log(y/p) of the Gumbel sample, ``head_selection.authors_kl``);
``train_adapters_only`` freezes everything but the adapters;
``task_tags`` the tags of the tasks in id order (``[ar, de, es]``: ar is task 0), which decoding uses to
map a data dir's tag file to ids (``espnet_ext.tasks.task_conditioned``); every task-conditioned module
must have exactly that many tasks. ``encoder_task_tags`` / ``decoder_task_tags`` give one side its own
list (e.g. the encoder the source languages of the ASR model it starts from, the decoder the target
languages). ``target_languages`` (ST/MT): the decoder starts from a learned vector of the utterance's
target language instead of <sos> (``espnet_ext.nets.target_language``), ids from ``target_language_id``.
"""

from __future__ import annotations

import torch
from espnet2.asr.espnet_model import ESPnetASRModel
from espnet2.mt.espnet_model import ESPnetMTModel
from espnet2.st.espnet_model import ESPnetSTModel
from torch import nn

from espnet_ext.attention.head_selection import (
    HeadSelectionAttention,
    TaskConditioned,
    check_kl_form,
    set_task_id,
)
from espnet_ext.errors import ConfigError, InputError
from espnet_ext.nets.adapters import freeze_all_but_adapters
from espnet_ext.nets.target_language import attach_target_language_start

TASK_KEYS = ("task_id", "encoder_task_id", "decoder_task_id", "target_language_id")


def check_task_tags(
    model, tags: list[str], key: str = "model_conf.task_tags", prefix: str = ""
) -> None:
    """Refuse a tag list that is not one distinct tag per task of every task-conditioned module
    (of ``model``, named ``prefix`` + its name in errors)."""
    if len(set(tags)) != len(tags):
        raise ConfigError(f"task tags repeat: {tags}", key=key)
    for name, module in model.named_modules():
        if isinstance(module, TaskConditioned) and module.num_tasks != len(tags):
            raise ConfigError(
                f"{len(tags)} task tags, but {prefix}{name} has num_tasks {module.num_tasks}",
                key=key,
            )


def side_selection_kl(module: nn.Module | None) -> torch.Tensor | None:
    """Per-utterance KL (B,) of one side of the last training forward: the layers' head means averaged
    over its head-selection layers (the authors' one selector per side divides by layers x heads)."""
    if module is None:
        return None
    terms = [
        m.selection_kl
        for m in module.modules()
        if isinstance(m, HeadSelectionAttention) and m.selection_kl is not None
    ]
    return torch.stack(terms).mean(0) if terms else None


def selection_kl_loss(
    model: nn.Module, target_tokens: torch.Tensor, per_token: bool
) -> torch.Tensor | None:
    """The eq. (3) KL term of a batch as the authors weight it: Σ_sides Σ_b n_b KL_b / (Σ_b n_b if
    ``per_token`` else B), n_b = ``target_tokens`` (B,) of utterance b. None without head selection.

    Their ``HeadSelectionLoss`` weights each task's mean KL by its target tokens in the batch and fairseq
    divides the summed loss by the batch's tokens; the same division as the cross-entropy keeps that ratio.
    """
    sides = [side_selection_kl(getattr(model, side, None)) for side in ("encoder", "decoder")]
    sides = [kl for kl in sides if kl is not None]
    if not sides:
        return None
    per_utt = torch.stack(sides).sum(0)
    tokens = target_tokens.to(per_utt.dtype)
    total = (per_utt * tokens).sum()
    return total / (tokens.sum() if per_token else tokens.numel())


def _ce_divides_by_tokens(model: nn.Module) -> bool:
    """Whether ESPnet's attention cross-entropy of ``model`` is per token (``length_normalized_loss``)."""
    for name in ("criterion_att", "criterion_st", "criterion_mt"):
        criterion = getattr(model, name, None)
        if criterion is not None:
            return bool(criterion.normalize_length)
    return False


class TaskConditionedModel:
    """Mixin before an ESPnet2 model class: task ids in, eq. (3) KL added to the loss."""

    def __init__(
        self,
        *args,
        selection_kl_weight: float = 1.0,
        selection_kl_form: str = "bernoulli",
        train_adapters_only: bool = False,
        task_tags: list[str] | None = None,
        encoder_task_tags: list[str] | None = None,
        decoder_task_tags: list[str] | None = None,
        target_languages: list[str] | None = None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.selection_kl_weight = selection_kl_weight
        check_kl_form(selection_kl_form)
        for module in self.modules():  # the loss term is the model's choice; each layer computes it
            if isinstance(module, HeadSelectionAttention):
                module.kl_form = selection_kl_form
        self.task_tags = None if task_tags is None else [str(tag) for tag in task_tags]
        for side, own in (("encoder", encoder_task_tags), ("decoder", decoder_task_tags)):
            tags = self.task_tags if own is None else [str(t) for t in own]
            key = "model_conf.task_tags" if own is None else f"model_conf.{side}_task_tags"
            if tags is not None and getattr(self, side, None) is not None:
                check_task_tags(getattr(self, side), tags, key, prefix=f"{side}.")
        self.target_language_start = None
        if target_languages:
            if len(set(target_languages)) != len(target_languages):
                raise ConfigError(
                    f"target languages repeat: {target_languages}",
                    key="model_conf.target_languages",
                )
            self.target_language_start = attach_target_language_start(
                self.decoder, len(target_languages), self.sos
            )
        if train_adapters_only:
            freeze_all_but_adapters(self)

    def set_task_id(
        self, task_id=None, encoder_task_id=None, decoder_task_id=None, target_language_id=None
    ) -> None:
        """Task ids per utterance for the encoder and the decoder (a side's own id wins), and the
        target language of the decoder's start (models with ``target_languages``)."""
        if self.target_language_start is not None:
            if target_language_id is None:
                raise InputError(
                    "the model starts decoding from a target language: give target_language_id "
                    "(a <utt> <language> tag file)",
                    key="target_language_id",
                )
            self.target_language_start.set_language_id(target_language_id)
        sides = {"encoder": encoder_task_id, "decoder": decoder_task_id}
        for side, own in sides.items():
            ids = own if own is not None else task_id
            module = getattr(self, side, None)
            if module is None:
                continue
            if ids is None:
                if any(isinstance(m, TaskConditioned) for m in module.modules()):
                    raise InputError(f"the {side} needs a task id per utterance", key="task_id")
                continue
            set_task_id(module, ids)

    def forward(self, *args, **kwargs):
        ids = {key: kwargs.pop(key, None) for key in TASK_KEYS}
        for key in TASK_KEYS:
            kwargs.pop(f"{key}_lengths", None)
        self.set_task_id(**ids)
        text_lengths = kwargs.get("text_lengths")
        loss, stats, weight = super().forward(*args, **kwargs)
        kl = None
        if text_lengths is not None:  # ESPnet's target: the tokens and <eos>
            kl = selection_kl_loss(self, text_lengths + 1, _ce_divides_by_tokens(self))
        if kl is not None:
            loss = loss + self.selection_kl_weight * kl
            stats["selection_kl"] = kl.detach().reshape(
                1
            )  # the batch weight's shape, as DDP averages
            stats["loss"] = loss.detach()
        return loss, stats, weight

    def collect_feats(self, *args, **kwargs):
        for key in TASK_KEYS:
            kwargs.pop(key, None)
            kwargs.pop(f"{key}_lengths", None)
        return super().collect_feats(*args, **kwargs)


class TaskConditionedASRModel(TaskConditionedModel, ESPnetASRModel):
    pass


class TaskConditionedSTModel(TaskConditionedModel, ESPnetSTModel):
    pass


class TaskConditionedMTModel(TaskConditionedModel, ESPnetMTModel):
    pass
