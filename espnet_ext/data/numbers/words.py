"""Number words in the mini corpora's languages, normalised as ASR/MT transcripts.

num2words gives en, de, es, fr, it, pt, ru, ar, ro; Greek comes from our own converter. Normalisation:
NFC, lower-case, every character that is not a letter or a combining mark (hyphens, commas) becomes a
space, spaces collapse. Letters of every script stay (Cyrillic, Arabic, accented Greek), English keeps
"and" ("three hundred and twelve"). German and Italian write a number as one compound ("dreihundertzwölf",
"trecentododici"); here it is written as separate words at its number morphemes ("drei hundert zwölf",
"neun und neunzig", "tre cento dodici"), so that a German or Italian target has 2- to 4-grams and BLEU on
the mini translation corpora is not 0 by construction (a compound is a single token to sacreBLEU's 13a
tokenizer; the WMT writer splits Finnish and Turkish alike).

Italian elides a vowel where two morphemes meet inside the compound (venti + uno -> ventuno, trenta + otto
-> trentotto, cento + ottanta -> centottanta) and accents a final "tre" (ventitré). A piece standing alone
takes its citation form, the one Italian writes for it as a word of its own: "venti uno", "trenta otto",
"cento ottanta", "venti tre". So each morpheme is one word wherever it occurs (ventuno and ventitré share
"venti"), and the pieces are the 31 words of num2words' own tables (zero, uno..diciannove, venti..novanta,
cento, mille, mila) besides the separate words it already writes (un, milione, milioni, e). num2words'
contraction also turns cento + diciotto into "centodicotto" (its "io" -> "o" rule firing inside diciotto);
the split writes "cento diciotto".
"""

from __future__ import annotations

import functools
import re
import unicodedata

from num2words import num2words

from espnet_ext.data.numbers.greek import greek_number_words

LANGUAGES = ("en", "de", "es", "fr", "it", "pt", "ru", "ar", "ro", "el")
# Italian morphemes (num2words' CARDINAL_WORDS and tens) and the tens' elided forms. An elided form is
# tried first and only before the vowel that elided it, so "centotto" is cent + otto, never cento + "tto".
_IT_UNITS = ("zero", "uno", "due", "tre", "quattro", "cinque", "sei", "sette", "otto", "nove")
_IT_TEENS = ("dieci", "undici", "dodici", "tredici", "quattordici", "quindici", "sedici")
_IT_TEENS += ("diciassette", "diciotto", "diciannove")
_IT_TENS_ELIDED = ("vent", "trent", "quarant", "cinquant", "sessant", "settant", "ottant", "novant")
_IT_TENS = tuple(t + ("i" if t == "vent" else "a") for t in _IT_TENS_ELIDED)
_IT_WORDS = (*_IT_UNITS, *_IT_TEENS, *_IT_TENS, "cento", "mille", "mila")
_IT_ELIDED = (*(f"{t}(?=uno|otto)" for t in _IT_TENS_ELIDED), "cent(?=ott)")
# Where languages that write a number as one compound split it (the WMT mini corpus also has Finnish and
# Turkish). Longer alternatives first: at one position "hundert" wins over "und", "sataa" over "sata",
# "settanta" over "sette".
_COMPOUND_MORPHEMES = {
    "de": re.compile("(tausend|hundert|und)"),
    "fi": re.compile("(tuhatta|tuhat|sataa|sata|kymmentä|toista)"),
    "it": re.compile(
        "("
        + "|".join((*_IT_ELIDED, "dicotto", "tré", *sorted(_IT_WORDS, key=len, reverse=True)))
        + ")"
    ),
    "tr": re.compile(
        "(milyar|milyon|bin|yüz|doksan|seksen|yetmiş|altmış|elli|kırk|otuz|yirmi|on"
        "|dokuz|sekiz|yedi|altı|beş|dört|üç|iki|bir|sıfır)"
    ),
}
# A split-off piece in its citation form (Italian: the elided and accented forms above).
_CITATION_FORMS = {
    "it": dict(zip(_IT_TENS_ELIDED, _IT_TENS))
    | {"cent": "cento", "tré": "tre", "dicotto": "diciotto"},
}


def normalize_words(text: str) -> str:
    """Lower-case, keep letters and combining marks of any script, everything else -> single spaces."""
    text = unicodedata.normalize("NFC", text).lower()
    kept = "".join(c if unicodedata.category(c)[0] in "LM" else " " for c in text)
    return " ".join(kept.split())


def separate_compounds(text: str, lang: str) -> str:
    """``text`` (normalised number words) with compounds split at their number morphemes (de, fi, it, tr)."""
    if lang not in _COMPOUND_MORPHEMES:
        return text
    forms = _CITATION_FORMS.get(lang, {})
    split = _COMPOUND_MORPHEMES[lang].sub(lambda m: f" {forms.get(m[1], m[1])} ", text)
    return " ".join(split.split())


@functools.lru_cache(maxsize=200_000, typed=True)  # typed: True must not hit the entry of 1
def number_to_words(n: int, lang: str, compounds: bool = False) -> str:
    """Normalised words for the non-negative integer ``n`` in ``lang`` (one of ``LANGUAGES``); compounds
    split at their morphemes (``separate_compounds``) unless ``compounds``: a source language, whose
    n-grams no BLEU counts, may keep its written form ("dreihundertzwölf")."""
    if lang not in LANGUAGES:
        raise ValueError(f"unsupported language '{lang}', choose from {', '.join(LANGUAGES)}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"expected a non-negative integer, got {n!r}")
    raw = greek_number_words(n) if lang == "el" else num2words(n, lang=lang)
    words = normalize_words(raw)
    return words if compounds else separate_compounds(words, lang)
