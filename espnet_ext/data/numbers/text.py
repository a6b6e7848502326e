"""Text modalities: number words per language, and English phonemes."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from espnet_ext.data.datadir import write_kaldi_map
from espnet_ext.data.g2p_offline import CMUDICT_ZIP, TAGGER_ZIP, build_nltk_data, data_sources
from espnet_ext.data.numbers.greek import MAX_GREEK
from espnet_ext.data.numbers.modality import Modality, Utterance
from espnet_ext.data.numbers.words import LANGUAGES, number_to_words
from espnet_ext.errors import ConfigError


@dataclass
class TextModality(Modality):
    """``text`` in the primary (first) language and ``text.<lang>`` for every language, aligned by id;
    the languages of ``compound_langs`` keep their compound number words (``words.number_to_words``)."""

    langs: tuple[str, ...] = ("en",)
    compound_langs: tuple[str, ...] = ()
    name = "text"

    def __post_init__(self):
        self.langs = tuple(self.langs)
        self.compound_langs = tuple(self.compound_langs)
        unknown = [lang for lang in self.langs if lang not in LANGUAGES]
        if not self.langs or unknown:
            raise ConfigError(
                f"languages must be some of {', '.join(LANGUAGES)}, got {', '.join(self.langs)}"
            )
        stray = [lang for lang in self.compound_langs if lang not in self.langs]
        if stray:
            raise ConfigError(
                f"compound languages must be among the corpus' languages ({', '.join(self.langs)}), "
                f"got {', '.join(stray)}",
                key="compound_langs",
            )

    def signature(self) -> dict:
        # compound_langs only when set: corpora written before it keep their signature
        return {"langs": list(self.langs)} | (
            {"compound_langs": list(self.compound_langs)} if self.compound_langs else {}
        )

    def words(self, number: int, lang: str) -> str:
        return number_to_words(number, lang, lang in self.compound_langs)

    def generate(self, utterances: Sequence[Utterance], out_dir: Path) -> None:
        largest = max((u.number for u in utterances), default=0)
        if "el" in self.langs and largest > MAX_GREEK:
            raise ConfigError(f"Greek number words go up to {MAX_GREEK}, the corpus has {largest}")
        for lang in self.langs:
            write_kaldi_map(
                out_dir / f"text.{lang}",
                {u.utt_id: self.words(u.number, lang) for u in utterances},
            )
        write_kaldi_map(
            out_dir / "text",
            {u.utt_id: self.words(u.number, self.langs[0]) for u in utterances},
        )


_ARPABET = re.compile(r"[A-Z]+[012]?")


@functools.cache
def _g2p(nltk_data: str | None):
    """g2p_en's converter, reading NLTK data from ``nltk_data`` (built there) or from $NLTK_DATA."""
    if nltk_data:
        root = str(build_nltk_data(nltk_data))
    elif os.environ.get("NLTK_DATA"):
        root = os.environ["NLTK_DATA"].split(os.pathsep)[0]
    else:
        raise ConfigError(
            "English phonemes need offline NLTK data: run 'python -m espnet_ext.data.g2p_offline DIR' and "
            "export NLTK_DATA=DIR (or pass the directory explicitly)"
        )
    import nltk

    if root not in nltk.data.path:
        nltk.data.path.insert(0, root)
    for resource in (CMUDICT_ZIP, TAGGER_ZIP):
        try:
            nltk.data.find(resource)
        except LookupError:
            # Refuse before g2p_en's import tries (and fails) to download it.
            raise ConfigError(
                f"NLTK resource {resource} not found under {root}: "
                f"run 'python -m espnet_ext.data.g2p_offline {root}'"
            ) from None
    from g2p_en import G2p

    return G2p()


def phonemes(text_en: str, nltk_data: str | None = None) -> str:
    """Space-separated ARPAbet phones (with stress digits) of English text, via g2p_en."""
    return " ".join(p for p in _g2p(nltk_data)(text_en) if _ARPABET.fullmatch(p))


@dataclass
class PhonemeModality(Modality):
    """``phn``: ARPAbet phones of the English number words (whatever the primary language)."""

    nltk_data: Path | None = None  # built there on demand; None: use $NLTK_DATA as it is
    name = "phonemes"

    def signature(self) -> dict:
        return {"g2p": "g2p_en", **data_sources()}

    def generate(self, utterances: Sequence[Utterance], out_dir: Path) -> None:
        data = None if self.nltk_data is None else str(Path(self.nltk_data).absolute())
        phones = {u.utt_id: phonemes(number_to_words(u.number, "en"), data) for u in utterances}
        write_kaldi_map(out_dir / "phn", phones)
