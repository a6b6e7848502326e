"""Number words in the mini corpora's languages, normalised as ASR/MT transcripts.

num2words gives en, de, es, fr, it, pt, ru, ar, ro; Greek comes from our own converter. Normalisation:
NFC, lower-case, every character that is not a letter or a combining mark (hyphens, commas) becomes a
space, spaces collapse. Letters of every script stay (Cyrillic, Arabic, accented Greek), English keeps
"and" ("three hundred and twelve") and German stays one compound word ("dreihundertzwölf").
"""

from __future__ import annotations

import functools
import unicodedata

from num2words import num2words

from espnet_ext.data.numbers.greek import greek_number_words

LANGUAGES = ("en", "de", "es", "fr", "it", "pt", "ru", "ar", "ro", "el")


def normalize_words(text: str) -> str:
    """Lower-case, keep letters and combining marks of any script, everything else -> single spaces."""
    text = unicodedata.normalize("NFC", text).lower()
    kept = "".join(c if unicodedata.category(c)[0] in "LM" else " " for c in text)
    return " ".join(kept.split())


@functools.lru_cache(maxsize=200_000, typed=True)  # typed: True must not hit the entry of 1
def number_to_words(n: int, lang: str) -> str:
    """Normalised words for the non-negative integer ``n`` in ``lang`` (one of ``LANGUAGES``)."""
    if lang not in LANGUAGES:
        raise ValueError(f"unsupported language '{lang}', choose from {', '.join(LANGUAGES)}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"expected a non-negative integer, got {n!r}")
    raw = greek_number_words(n) if lang == "el" else num2words(n, lang=lang)
    return normalize_words(raw)
