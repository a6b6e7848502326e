"""What the corpus plan hands to each modality, and the contract a modality implements.

The plan (``corpus.plan_corpus``) decides which integer each utterance says, who says it and in which
split. A modality turns those utterances into files of a Kaldi-style data dir: text writes ``text`` and
``text.<lang>``, speech writes wavs and ``wav.scp``, later ones (lip video, digit images) their own
``*.scp``. Adding a modality means writing one such class; the plan and the writer stay as they are.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar


@dataclass(frozen=True)
class Speaker:
    """A synthetic speaker: an espeak-ng voice variant with its own base speaking rate and pitch."""

    spk_id: str
    variant: str  # espeak-ng variant, e.g. "m3" or "f2"
    rate: int  # words per minute (espeak-ng -s)
    pitch: int  # 0..99 (espeak-ng -p)


@dataclass(frozen=True)
class Utterance:
    utt_id: str  # "<spk_id>-<number>": Kaldi wants utterance ids to start with the speaker id
    number: int
    split: str
    speaker: Speaker
    seed: int  # per-utterance randomness (e.g. prosody jitter), independent of processing order


class Modality(abc.ABC):
    """One kind of data generated for every utterance of a split."""

    name: ClassVar[str]

    def signature(self) -> dict:
        """Settings that change this modality's output (recorded to detect stale corpora)."""
        return {}

    @abc.abstractmethod
    def generate(self, utterances: Sequence[Utterance], out_dir: Path) -> None:
        """Write this modality's files for one split into the data dir ``out_dir``.

        Tables go through ``espnet_ext.data.datadir.write_kaldi_map`` (sorted, atomic); large per-utterance
        files (wavs, videos) go elsewhere and are listed in an ``*.scp`` table.
        """
