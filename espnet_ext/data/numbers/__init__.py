"""Numbers world: deterministic mini corpora of spoken/written integers for offline recipes.

Every utterance says one integer; modalities render it (number words in ten languages, espeak-ng speech,
English phonemes). ``talks`` and ``tedx`` write the same numbers as MuST-C / mTEDx releases. See ``corpus``
for the layout and design choices, and ``python -m espnet_ext.data.numbers --help`` for the command line.
"""

from espnet_ext.data.numbers.corpus import CorpusSpec, generate_corpus, plan_corpus
from espnet_ext.data.numbers.modality import Modality, Speaker, Utterance
from espnet_ext.data.numbers.speech import SpeechModality
from espnet_ext.data.numbers.text import PhonemeModality, TextModality, phonemes
from espnet_ext.data.numbers.words import LANGUAGES, number_to_words

__all__ = [
    "CorpusSpec",
    "LANGUAGES",
    "Modality",
    "PhonemeModality",
    "Speaker",
    "SpeechModality",
    "TextModality",
    "Utterance",
    "generate_corpus",
    "number_to_words",
    "phonemes",
    "plan_corpus",
]
