import unicodedata

import pytest
from num2words import num2words

from espnet_ext.data.numbers.greek import MAX_GREEK, greek_number_words
from espnet_ext.data.numbers.words import _IT_WORDS, LANGUAGES, normalize_words, number_to_words
from espnet_ext.scoring.bleu import score_bleu
from espnet_ext.scoring.ref_hyp import Pair

# Hand-checked Greek counting forms (neuter; feminine before χιλιάδες; εκατόν before a following number).
GREEK_REFERENCES = {
    0: "μηδέν",
    1: "ένα",
    2: "δύο",
    3: "τρία",
    4: "τέσσερα",
    7: "επτά",
    8: "οκτώ",
    9: "εννέα",
    10: "δέκα",
    11: "έντεκα",
    12: "δώδεκα",
    13: "δεκατρία",
    14: "δεκατέσσερα",
    16: "δεκαέξι",
    19: "δεκαεννέα",
    20: "είκοσι",
    21: "είκοσι ένα",
    34: "τριάντα τέσσερα",
    70: "εβδομήντα",
    99: "ενενήντα εννέα",
    100: "εκατό",
    101: "εκατόν ένα",
    120: "εκατόν είκοσι",
    200: "διακόσια",
    312: "τριακόσια δώδεκα",
    444: "τετρακόσια σαράντα τέσσερα",
    999: "εννιακόσια ενενήντα εννέα",
    1000: "χίλια",
    1001: "χίλια ένα",
    1100: "χίλια εκατό",
    1234: "χίλια διακόσια τριάντα τέσσερα",
    2000: "δύο χιλιάδες",
    2024: "δύο χιλιάδες είκοσι τέσσερα",
    3000: "τρεις χιλιάδες",
    3120: "τρεις χιλιάδες εκατόν είκοσι",
    4000: "τέσσερις χιλιάδες",
    5000: "πέντε χιλιάδες",
    9999: "εννέα χιλιάδες εννιακόσια ενενήντα εννέα",
    13000: "δεκατρείς χιλιάδες",
    14000: "δεκατέσσερις χιλιάδες",
    21000: "είκοσι μία χιλιάδες",
    23000: "είκοσι τρεις χιλιάδες",
    100000: "εκατό χιλιάδες",
    100100: "εκατό χιλιάδες εκατό",
    101000: "εκατόν μία χιλιάδες",
    200000: "διακόσιες χιλιάδες",
    304004: "τριακόσιες τέσσερις χιλιάδες τέσσερα",
    999999: "εννιακόσιες ενενήντα εννέα χιλιάδες εννιακόσια ενενήντα εννέα",
}

# Known number words, normalised (lower case, hyphens and commas -> spaces).
KNOWN = {
    "en": {
        0: "zero",
        21: "twenty one",
        312: "three hundred and twelve",
        1001: "one thousand and one",
    },
    "de": {
        0: "null",
        21: "ein und zwanzig",
        312: "drei hundert zwölf",
        9999: "neun tausend neun hundert neun und neunzig",
    },
    "es": {
        0: "cero",
        21: "veintiuno",
        312: "trescientos doce",
        9999: "nueve mil novecientos noventa y nueve",
    },
    "fr": {0: "zéro", 21: "vingt et un", 80: "quatre vingts", 312: "trois cent douze"},
    "it": {0: "zero", 21: "venti uno", 312: "tre cento dodici", 2000: "due mila"},
    "pt": {0: "zero", 21: "vinte e um", 312: "trezentos e doze", 1000: "mil"},
    "ru": {0: "ноль", 21: "двадцать один", 312: "триста двенадцать", 2000: "две тысячи"},
    "ar": {0: "صفر", 7: "سبعة", 1000: "ألف", 100: "مائة"},
    "ro": {0: "zero", 7: "șapte", 312: "trei sute doisprezece", 1000: "o mie"},
    "el": {0: "μηδέν", 21: "είκοσι ένα", 312: "τριακόσια δώδεκα", 3000: "τρεις χιλιάδες"},
}


@pytest.mark.parametrize("n,expected", sorted(GREEK_REFERENCES.items()))
def test_greek_matches_hand_checked_reference(n, expected):
    assert greek_number_words(n) == expected
    assert number_to_words(n, "el") == expected


def test_greek_refuses_out_of_range():
    greek_number_words(MAX_GREEK)
    with pytest.raises(ValueError, match="999999"):
        greek_number_words(MAX_GREEK + 1)
    with pytest.raises(ValueError):
        greek_number_words(-1)


def test_greek_words_are_distinct_for_all_numbers_below_10000():
    words = {greek_number_words(n) for n in range(10000)}
    assert len(words) == 10000


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_language_gives_known_values(lang):
    for n, expected in KNOWN[lang].items():
        assert number_to_words(n, lang) == expected, (lang, n)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_normalised_words_are_letters_and_single_spaces(lang):
    for n in list(range(0, 130)) + [999, 1000, 1001, 2024, 7777, 9999, 12345, 99999]:
        text = number_to_words(n, lang)
        assert text and text == text.strip() and "  " not in text
        assert text == text.lower()
        assert all(c == " " or unicodedata.category(c)[0] in "LM" for c in text), (lang, n, text)


def test_scripts_and_conventions_are_kept():
    assert "and" in number_to_words(112, "en").split()
    assert number_to_words(112, "en") == "one hundred and twelve"
    assert (
        number_to_words(9999, "en") == "nine thousand nine hundred and ninety nine"
    )  # comma dropped
    # German compounds are split at their morphemes, and joining the words back gives num2words' compound.
    assert all(
        number_to_words(n, "de").replace(" ", "") == normalize_words(num2words(n, lang="de"))
        for n in range(10000)
    )
    assert all("\u0400" <= c <= "\u04ff" for c in number_to_words(1999, "ru").replace(" ", ""))
    assert all("\u0600" <= c <= "\u06ff" for c in number_to_words(1999, "ar").replace(" ", ""))
    assert "ά" in number_to_words(1000, "el") or "ί" in number_to_words(1000, "el")


@pytest.mark.parametrize("lang", ["de", "it"])
def test_compound_language_mini_targets_have_ngrams_for_bleu(lang):
    """A German or Italian number has >= 2 words (mostly >= 4 from 1,000 on: "drei tausend sieben hundert
    zwölf", "tre mila sette cento dodici"), so BLEU on the mini translation corpora measures n-gram overlap
    instead of being 0 by construction."""
    words = {n: number_to_words(n, lang).split() for n in range(10000)}
    assert sum(len(w) >= 2 for w in words.values()) / len(words) > 0.99
    assert sum(len(w) >= 4 for n, w in words.items() if n >= 1000) / 9000 > 0.95
    refs = [number_to_words(n, lang) for n in (3712, 4815, 9999, 1207)]
    pairs = [Pair(str(i), ref, ref) for i, ref in enumerate(refs)]
    assert score_bleu(pairs)["bleu"] == pytest.approx(100.0)
    # Wrong numbers sharing 2- to 4-grams with the references ("drei tausend sieben hundert" ...).
    hyps = [number_to_words(n, lang) for n in (3713, 4816, 9998, 1208)]
    near = score_bleu([Pair(str(i), r, h) for i, (r, h) in enumerate(zip(refs, hyps))])
    assert 0.0 < near["bleu"] < 100.0 and near["precisions"][1] > 0.0


def test_compounds_keep_the_written_form_whose_split_is_the_default():
    """A source language may keep its compounds (IWSLT14's German source); the split form is that
    compound cut at its morphemes, nothing else."""
    assert number_to_words(3712, "de", compounds=True) == "dreitausendsiebenhundertzwölf"
    for n in (21, 312, 3712, 9999):  # (Italian's split restores elided forms: venti uno, ventuno)
        assert number_to_words(n, "de").replace(" ", "") == number_to_words(n, "de", True)
    assert number_to_words(21, "it", compounds=True) == "ventuno"
    assert number_to_words(312, "en", compounds=True) == number_to_words(312, "en")


def test_german_split_keeps_the_und_inside_hundert():
    words = number_to_words(312, "de").split()
    assert "hundert" in words and "und" not in number_to_words(300, "de").split()


# Italian's own spelling of a compound from its pieces: a tens word loses its final vowel before uno / otto,
# cento its "o" before otto / ottanta (never before uno: "centouno"), mille and mila nothing. (A final "tre"
# is accented, ventitré; num2words accents only some, "centotré" but "centoventitre", so the comparison
# below leaves accents out.)
def _italian_compound(pieces: list[str]) -> str:
    tens = {w for w in _IT_WORDS if w.endswith(("nti", "nta"))}  # venti ... novanta
    word = ""
    for i, piece in enumerate(pieces):
        after = pieces[i + 1] if i + 1 < len(pieces) else ""
        elided = (piece in tens and after in ("uno", "otto")) or (
            piece == "cento" and after.startswith("ott")
        )
        word += piece[:-1] if elided else piece
    return word


ITALIAN_SPLITS = {
    21: "venti uno",
    23: "venti tre",
    38: "trenta otto",
    118: "cento diciotto",
    180: "cento ottanta",
    281: "due cento ottanta uno",
    1200: "mille due cento",
    2000: "due mila",
    2345: "due mila tre cento quaranta cinque",
    21000: "venti uno mila",
    2_000_003: "due milioni e tre",
}


def test_italian_compounds_split_into_the_citation_forms_of_their_morphemes():
    """Every piece is one of the 31 number words (elided and accented forms restored), and spelling the
    pieces back as Italian does gives num2words' compound, except for num2words' "centodicotto" (its
    io -> o contraction firing inside diciotto), whose pieces are the correct "cento diciotto"; "tre" is
    unaccented wherever it stands."""
    for n, expected in ITALIAN_SPLITS.items():
        assert number_to_words(n, "it") == expected, n
    vocabulary = {*_IT_WORDS, "un", "milione", "milioni", "e"}
    assert len(_IT_WORDS) == 31
    for n in [*range(20000), *range(20000, 1_000_000, 97)]:
        pieces = number_to_words(n, "it").split()
        assert set(pieces) <= vocabulary, (n, pieces)
        compound = (
            normalize_words(num2words(n, lang="it"))
            .replace("dicotto", "diciotto")
            .replace("é", "e")
        )
        assert _italian_compound(pieces) == compound, (n, pieces)


def test_normalize_words():
    assert normalize_words("Nine thousand, nine hundred and ninety-nine") == (
        "nine thousand nine hundred and ninety nine"
    )
    assert normalize_words("  Quatre-Vingt-Dix ") == "quatre vingt dix"
    assert normalize_words("ΤΡΙΑΚΌΣΙΑ") == "τριακόσια"


def test_number_to_words_validates_input():
    with pytest.raises(ValueError, match="unsupported language"):
        number_to_words(3, "xx")
    for bad in (-1, 2.5, True, "3"):
        with pytest.raises(ValueError):
            number_to_words(bad, "en")
