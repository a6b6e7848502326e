"""Number words in the mini corpora's languages, normalised as ASR/MT transcripts.

num2words gives en, de, es, fr, it, pt, ru, ar, ro; Greek comes from our own converter. Normalisation:
NFC, lower-case, every character that is not a letter or a combining mark (hyphens, commas) becomes a
space, spaces collapse. Letters of every script stay (Cyrillic, Arabic, accented Greek), English keeps
"and" ("three hundred and twelve"). German writes a number as one compound ("dreihundertzwölf"); here it
is written as separate words at its number morphemes ("drei hundert zwölf", "neun und neunzig"), so that a
German target has 2- to 4-grams and BLEU on the mini translation corpora is not 0 by construction (German
compounds are single tokens to sacreBLEU's 13a tokenizer; the WMT writer splits Finnish and Turkish alike).
"""

from __future__ import annotations

import functools
import re
import unicodedata

from num2words import num2words

from espnet_ext.data.numbers.greek import greek_number_words

LANGUAGES = ("en", "de", "es", "fr", "it", "pt", "ru", "ar", "ro", "el")
# Where languages that write a number as one compound split it (the WMT mini corpus also has Finnish and
# Turkish). Longer alternatives first: at one position "hundert" wins over "und", "sataa" over "sata".
_COMPOUND_MORPHEMES = {
    "de": re.compile("(tausend|hundert|und)"),
    "fi": re.compile("(tuhatta|tuhat|sataa|sata|kymmentä|toista)"),
    "tr": re.compile(
        "(milyar|milyon|bin|yüz|doksan|seksen|yetmiş|altmış|elli|kırk|otuz|yirmi|on"
        "|dokuz|sekiz|yedi|altı|beş|dört|üç|iki|bir|sıfır)"
    ),
}


def normalize_words(text: str) -> str:
    """Lower-case, keep letters and combining marks of any script, everything else -> single spaces."""
    text = unicodedata.normalize("NFC", text).lower()
    kept = "".join(c if unicodedata.category(c)[0] in "LM" else " " for c in text)
    return " ".join(kept.split())


def separate_compounds(text: str, lang: str) -> str:
    """``text`` (normalised number words) with compounds split at their number morphemes (de, fi, tr)."""
    if lang not in _COMPOUND_MORPHEMES:
        return text
    return " ".join(_COMPOUND_MORPHEMES[lang].sub(r" \1 ", text).split())


@functools.lru_cache(maxsize=200_000, typed=True)  # typed: True must not hit the entry of 1
def number_to_words(n: int, lang: str) -> str:
    """Normalised words for the non-negative integer ``n`` in ``lang`` (one of ``LANGUAGES``)."""
    if lang not in LANGUAGES:
        raise ValueError(f"unsupported language '{lang}', choose from {', '.join(LANGUAGES)}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"expected a non-negative integer, got {n!r}")
    raw = greek_number_words(n) if lang == "el" else num2words(n, lang=lang)
    return separate_compounds(normalize_words(raw), lang)
