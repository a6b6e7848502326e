"""Greek number words for 0..999,999 (num2words has no Greek).

Counting uses the neuter forms (ένα, τρία, τέσσερα, διακόσια). The thousands word χιλιάδες is feminine,
so the count in front of it takes the feminine forms where Greek has them: μία, τρεις, τέσσερις,
δεκατρείς, δεκατέσσερις and the hundreds in -ες (διακόσιες χιλιάδες). 1000 itself is χίλια.
εκατό becomes εκατόν when another number word follows inside the same group (εκατόν είκοσι),
but stays εκατό before χιλιάδες (εκατό χιλιάδες). We use the formal spellings επτά, οκτώ, εννέα
and the common εννιακόσια.
"""

from __future__ import annotations

MAX_GREEK = 999_999

_BELOW_20 = [
    "μηδέν",
    "ένα",
    "δύο",
    "τρία",
    "τέσσερα",
    "πέντε",
    "έξι",
    "επτά",
    "οκτώ",
    "εννέα",
    "δέκα",
    "έντεκα",
    "δώδεκα",
    "δεκατρία",
    "δεκατέσσερα",
    "δεκαπέντε",
    "δεκαέξι",
    "δεκαεπτά",
    "δεκαοκτώ",
    "δεκαεννέα",
]
_FEMININE_BELOW_20 = {1: "μία", 3: "τρεις", 4: "τέσσερις", 13: "δεκατρείς", 14: "δεκατέσσερις"}
_TENS = dict(
    enumerate(
        ["είκοσι", "τριάντα", "σαράντα", "πενήντα", "εξήντα", "εβδομήντα", "ογδόντα", "ενενήντα"],
        start=2,
    )
)
# Stems of 200..900; neuter adds -α, feminine -ες.
_HUNDRED_STEMS = {
    2: "διακόσι",
    3: "τριακόσι",
    4: "τετρακόσι",
    5: "πεντακόσι",
    6: "εξακόσι",
    7: "επτακόσι",
    8: "οκτακόσι",
    9: "εννιακόσι",
}


def _below_20(n: int, feminine: bool) -> str:
    return _FEMININE_BELOW_20.get(n, _BELOW_20[n]) if feminine else _BELOW_20[n]


def _below_1000(n: int, feminine: bool) -> list:
    """Words for 1..999 (an empty list for 0)."""
    hundreds, rest = divmod(n, 100)
    words = []
    if hundreds == 1:
        words.append("εκατόν" if rest else "εκατό")
    elif hundreds > 1:
        words.append(_HUNDRED_STEMS[hundreds] + ("ες" if feminine else "α"))
    if rest >= 20:
        tens, units = divmod(rest, 10)
        words.append(_TENS[tens])
        if units:
            words.append(_below_20(units, feminine))
    elif rest:
        words.append(_below_20(rest, feminine))
    return words


def greek_number_words(n: int) -> str:
    """Greek words for ``0 <= n <= 999,999``, e.g. 3120 -> "τρεις χιλιάδες εκατόν είκοσι"."""
    if not 0 <= n <= MAX_GREEK:
        raise ValueError(f"Greek number words cover 0..{MAX_GREEK}, got {n}")
    if n == 0:
        return _BELOW_20[0]
    thousands, rest = divmod(n, 1000)
    words = []
    if thousands == 1:
        words.append("χίλια")
    elif thousands > 1:
        words += _below_1000(thousands, feminine=True) + ["χιλιάδες"]
    words += _below_1000(rest, feminine=False)
    return " ".join(words)
