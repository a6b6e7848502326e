"""Numbers-world WMT-style corpora: languages of the paper's WMT set, unequal training sizes, release formats
that the WMT readers read back aligned."""

import pytest
from num2words import num2words

from espnet_ext.data import wmt
from espnet_ext.data.numbers import wmt as mini
from espnet_ext.errors import ConfigError

PAPER_LANGUAGES = {
    "zh",
    "cs",
    "et",
    "fi",
    "fr",
    "de",
    "gu",
    "kk",
    "lv",
    "lt",
    "ro",
    "ru",
    "es",
    "tr",
}


def test_at_least_eight_of_the_papers_languages_with_their_own_words():
    ours = set(mini.LANGUAGES) & PAPER_LANGUAGES
    assert len(ours) >= 8
    # Compounds split at their morphemes (words.separate_compounds).
    assert mini.words(312, "de") == "drei hundert zwölf"
    assert mini.words(3712, "tr") == "üç bin yedi yüz on iki"
    assert mini.words(3712, "fi") == "kolme tuhatta seitsemän sataa kaksi toista"
    assert mini.words(4321, "kk") == "төрт мың үш жүз жиырма бір"  # num2words' "kz"
    assert mini.words(21, "ro") == "douăzeci și unu"
    assert mini.words(312, "en") == "three hundred and twelve"
    assert len({mini.words(7, lang) for lang in ours}) == len(ours)  # really different languages


@pytest.mark.parametrize("lang", ["de", "fi", "tr"])
def test_compounds_split_into_words_that_join_back_to_num2words(lang):
    """Targets of >= 2 words (BLEU has n-grams to match) that are still num2words' number, spaced."""
    numbers = range(0, 10000, 7)
    texts = [mini.words(n, lang) for n in numbers]
    assert all(t.replace(" ", "") == mini.normalize_words(num2words(n, lang=lang)).replace(" ", "")
               for n, t in zip(numbers, texts))  # fmt: skip
    assert sum(len(t.split()) >= 2 for t in texts) / len(texts) > 0.95


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("wmt_mini")
    spec = mini.WmtSpec((("de", 30), ("kk", 6)), valid_size=5, test_size=7, doc_size=3)
    return out, spec, mini.generate(out, spec)


def test_unequal_training_sizes_equal_dev_and_test(corpus):
    out, _, releases = corpus
    assert [r.name for r in releases] == ["de-en", "kk-en"]
    sizes = {}
    for lang in ("de", "kk"):
        train = wmt.read_plain(
            out / f"{lang}-en/train/train.{lang}-en.{lang}",
            out / f"{lang}-en/train/train.{lang}-en.en",
        )
        dev = wmt.read_sgm(
            out / f"{lang}-en/dev/newsdev-src.{lang}.sgm", out / f"{lang}-en/dev/newsdev-ref.en.sgm"
        )
        test = wmt.read_xml(out / f"{lang}-en/test/wmttest.{lang}-en.xml", lang, "en")
        sizes[lang] = (len(train), len(dev), len(test))
        assert train.dropped == 0
    assert sizes == {"de": (30, 5, 7), "kk": (6, 5, 7)}


def test_pairs_translate_the_same_number_and_splits_are_disjoint(corpus):
    out, spec, _ = corpus
    numbers = spec.numbers("de")
    assert not set(numbers["train"]) & set(numbers["test"])
    assert not set(numbers["valid"]) & (set(numbers["test"]) | set(numbers["train"]))
    test = list(wmt.read_xml(out / "de-en/test/wmttest.de-en.xml", "de", "en"))
    assert [(p.src, p.tgt) for p in test] == [
        (mini.words(n, "de"), mini.words(n, "en")) for n in numbers["test"]
    ]
    # English -> German targets are several words (compounds split), so their BLEU can be above 0.
    assert sum(len(p.src.split()) >= 2 for p in test) >= len(test) - 1
    reverse = list(wmt.read_xml(out / "de-en/test/wmttest.en-de.xml", "en", "de"))
    assert [(p.src, p.tgt) for p in reverse] == [(p.tgt, p.src) for p in test]
    assert [p.id for p in test][:4] == [
        "wmttest-de000-0001",
        "wmttest-de000-0002",
        "wmttest-de000-0003",
        "wmttest-de001-0001",
    ]


def test_deterministic_per_language_and_rerun_keeps_finished_output(corpus, tmp_path):
    out, spec, _ = corpus
    again = mini.generate(tmp_path, mini.WmtSpec((("kk", 6),), 5, 7, doc_size=3))
    for name in ("train/train.kk-en.kk", "test/wmttest.en-kk.xml", "dev/newsdev-ref.en.sgm"):
        assert (again[0] / name).read_bytes() == (out / "kk-en" / name).read_bytes()
    stamp = (out / "de-en" / ".complete").stat().st_mtime_ns
    mini.generate(out, spec)
    assert (out / "de-en" / ".complete").stat().st_mtime_ns == stamp


def test_compound_languages_keep_the_written_form_of_the_same_numbers(corpus, tmp_path):
    """The De-En source of the mini LegoNN release: German as German writes numbers, the same numbers and
    English as the split release; a release without the option keeps its signature (not rewritten)."""
    out, spec, _ = corpus
    compound = mini.WmtSpec((("de", 30),), 5, 7, doc_size=3, compound_langs=("de",))
    (release,) = mini.generate(tmp_path, compound)
    split = wmt.read_plain(out / "de-en/train/train.de-en.de", out / "de-en/train/train.de-en.en")
    joined = wmt.read_plain(release / "train/train.de-en.de", release / "train/train.de-en.en")
    numbers = spec.numbers("de")["train"]
    assert [p.src for p in joined] == [mini.words(n, "de", compounds=True) for n in numbers]
    assert [p.src.replace(" ", "") for p in split] == [p.src for p in joined]
    assert [p.tgt for p in split] == [p.tgt for p in joined]
    assert mini.words(312, "de", compounds=True) == "dreihundertzwölf"
    assert "compound_langs" not in mini.signature(spec, "de")["spec"]
    assert mini.signature(compound, "de")["spec"]["compound_langs"] == ("de",)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(train_sizes=(("zh", 10),)), "needs distinct languages"),
        (dict(train_sizes=(("de", 10), ("de", 5))), "needs distinct languages"),
        (dict(train_sizes=(("de", 90),), num_range=(0, 99)), "cannot hold 290 distinct numbers"),
        (
            dict(train_sizes=(("de", 10),), compound_langs=("ro",)),
            "compound languages must be among",
        ),
    ],
)
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        mini.WmtSpec(**{"valid_size": 100, "test_size": 100, **kwargs})
