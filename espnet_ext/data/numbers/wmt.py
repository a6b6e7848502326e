"""Numbers-world translation corpora in the WMT release formats: number words of X <-> English.

Per language X a release dir that ``espnet_ext.data.wmt`` reads as it reads WMT's own files::

    <out>/<X>-en/train/train.<X>-en.<X>, train.<X>-en.en      line-parallel training text (plain)
    <out>/<X>-en/dev/newsdev-src.<X>.sgm, newsdev-ref.en.sgm  dev set, newstest-style SGML
    <out>/<X>-en/test/wmttest.<X>-en.xml, wmttest.en-<X>.xml  test set, WMT21+ XML, both directions
    <out>/<X>-en/.complete                                    the settings, written last

the layout ``espnet_ext.data.wmt prepare --dir`` reads, so the mini corpus runs the same readers as the real
releases. Each sentence is one integer written as words (num2words; normalised as ``words.normalize_words``,
German, Finnish and Turkish compounds split by ``words.separate_compounds``, so that BLEU has n-grams to
match, but in ``compound_langs``: a source language may keep its written form). The languages are those of
the head-selection paper's WMT set (footnote 2) that num2words writes -- cs, de, es, fi, fr, kk, lt, lv, ro,
ru, tr (not zh, et, gu) -- and el from our converter. Training sizes differ per language on purpose
(``train_sizes``: the high- and low-resource directions of Table 1); dev and test have the same size for
every language so BLEU per language compares like with like. Each language draws its own numbers (its own
seed stream); within a language, train, dev and test numbers are disjoint. For the LegoNN corpora (German
and Romanian -> English sharing the English decoder, English -> German) the same writer runs with de and ro,
and once more with German compounds for the De-En source (as WMT19 De-En is a release of its own).

    python -m espnet_ext.data.numbers.wmt --out DIR --train_sizes de=2000,fr=2000,ro=200,kk=100 [--compound_langs de]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from html import escape
from pathlib import Path

import numpy as np
from num2words import num2words

from espnet_ext.data.datadir import atomic_dir
from espnet_ext.data.numbers.corpus import (
    COMPLETE,
    comma_list,
    marker_matches,
    release_parser,
    write_marker,
)
from espnet_ext.data.numbers.greek import MAX_GREEK, greek_number_words
from espnet_ext.data.numbers.words import normalize_words, separate_compounds
from espnet_ext.errors import ConfigError, reports_input_errors
from espnet_ext.fileio import atomic_write

GENERATOR_VERSION = 3  # bump when the same settings would produce different output
# The paper's languages num2words writes (its code for Kazakh is "kz"), and Greek (our converter).
LANGUAGES = ("cs", "de", "es", "fi", "fr", "kk", "lt", "lv", "ro", "ru", "tr", "el")
NUM2WORDS_CODES = {"kk": "kz"}


def words(n: int, lang: str, compounds: bool = False) -> str:
    """Normalised number words of ``n`` in ``lang`` (English: "en"), compounds split unless ``compounds``."""
    if lang == "el":
        return normalize_words(greek_number_words(n))
    written = normalize_words(num2words(n, lang=NUM2WORDS_CODES.get(lang, lang)))
    return written if compounds else separate_compounds(written, lang)


@dataclass(frozen=True)
class WmtSpec:
    train_sizes: tuple[tuple[str, int], ...] = (("de", 2000), ("fr", 2000), ("ro", 200))
    valid_size: int = 100  # per language
    test_size: int = 100  # per language
    num_range: tuple[int, int] = (0, 9999)
    seed: int = 0
    doc_size: int = 10  # segments per document of the dev/test sets
    compound_langs: tuple[str, ...] = ()  # languages whose number words stay compounds

    def __post_init__(self):
        langs = [lang for lang, _ in self.train_sizes]
        if not langs or len(set(langs)) != len(langs) or set(langs) - set(LANGUAGES):
            raise ConfigError(
                f"needs distinct languages of {' '.join(LANGUAGES)}, got {langs}", key="train_sizes"
            )
        if set(self.compound_langs) - set(langs):
            raise ConfigError(
                f"compound languages must be among {langs}, got {list(self.compound_langs)}",
                key="compound_langs",
            )
        lo, hi = self.num_range
        needed = max(size for _, size in self.train_sizes) + self.valid_size + self.test_size
        if not 0 <= lo <= hi or hi - lo + 1 < needed:
            raise ConfigError(
                f"range {lo}:{hi} cannot hold {needed} distinct numbers per language", key="range"
            )
        if "el" in langs and hi > MAX_GREEK:
            raise ConfigError(f"Greek number words go up to {MAX_GREEK}", key="range")
        if (
            min(self.valid_size, self.test_size, self.doc_size, *dict(self.train_sizes).values())
            < 1
        ):
            raise ConfigError("every size must be >= 1", key="train_sizes")

    def numbers(self, lang: str) -> dict[str, list[int]]:
        """Disjoint numbers of the language's splits: test and dev first, then train."""
        seed = np.random.SeedSequence([self.seed, LANGUAGES.index(lang)])
        lo, hi = self.num_range
        order = [int(n) for n in np.random.default_rng(seed).permutation(hi - lo + 1) + lo]
        test, valid = order[: self.test_size], order[self.test_size :][: self.valid_size]
        train = order[self.test_size + self.valid_size :][: dict(self.train_sizes)[lang]]
        return {"train": train, "valid": valid, "test": test}


def _sgm(kind: str, setid: str, lang: str, docs: list[list[str]], doc_prefix: str) -> str:
    head = f'<{kind}set setid="{setid}" srclang="any"' + (
        f' trglang="{lang}">' if kind == "ref" else ">"
    )
    lines = [head]
    for d, segments in enumerate(docs):
        lines.append(f'<doc docid="{doc_prefix}{d:03d}" genre="numbers" origlang="{doc_prefix}">')
        lines += ["<p>", *(f'<seg id="{i}">{escape(s)}</seg>' for i, s in enumerate(segments, 1))]
        lines += ["</p>", "</doc>"]
    return "\n".join([*lines, f"</{kind}set>", ""])


def _xml(setid: str, src: tuple[str, list[list[str]]], ref: tuple, doc_prefix: str) -> str:
    lines = ["<?xml version='1.0' encoding='utf-8'?>", f'<dataset id="{setid}">']
    lines.append('  <collection id="numbers">')
    for d, (src_doc, ref_doc) in enumerate(zip(src[1], ref[1])):
        lines.append(f'    <doc id="{doc_prefix}{d:03d}" origlang="{doc_prefix}">')
        for tag, lang, segments in (("src", src[0], src_doc), ("ref", ref[0], ref_doc)):
            extra = ' translator="A"' if tag == "ref" else ""
            lines += [f'      <{tag} lang="{lang}"{extra}>', "        <p>"]
            lines += [
                f'          <seg id="{i}">{escape(s)}</seg>' for i, s in enumerate(segments, 1)
            ]
            lines += ["        </p>", f"      </{tag}>"]
        lines.append("    </doc>")
    return "\n".join([*lines, "  </collection>", "</dataset>", ""])


def signature(spec: WmtSpec, lang: str) -> dict:
    settings = asdict(spec)
    if not spec.compound_langs:  # releases written before the option keep their signature
        del settings["compound_langs"]
    return {"generator_version": GENERATOR_VERSION, "language": lang, "spec": settings}


def generate_language(out: Path, spec: WmtSpec, lang: str) -> Path:
    """Write ``<out>/<lang>-en/`` (returned); a finished one with these settings is kept."""
    release = Path(out) / f"{lang}-en"
    expected = signature(spec, lang)
    if marker_matches(release / COMPLETE, expected):
        return release
    numbers = spec.numbers(lang)
    text = {
        (split, side): [words(n, side, side in spec.compound_langs) for n in numbers[split]]
        for split in numbers
        for side in (lang, "en")
    }
    pair = f"{lang}-en"

    def docs(split: str, side: str) -> list[list[str]]:
        seg = text[split, side]
        return [seg[i : i + spec.doc_size] for i in range(0, len(seg), spec.doc_size)]

    files = {
        f"train/train.{pair}.{side}": "".join(line + "\n" for line in text["train", side])
        for side in (lang, "en")
    }
    files[f"dev/newsdev-src.{lang}.sgm"] = _sgm("src", "newsdev", lang, docs("valid", lang), lang)
    files["dev/newsdev-ref.en.sgm"] = _sgm("ref", "newsdev", "en", docs("valid", "en"), lang)
    ours, english = (lang, docs("test", lang)), ("en", docs("test", "en"))
    files[f"test/wmttest.{pair}.xml"] = _xml("wmttest", ours, english, lang)
    files[f"test/wmttest.en-{lang}.xml"] = _xml("wmttest", english, ours, lang)
    with atomic_dir(release) as building:
        for sub in ("train", "dev", "test"):
            (building / sub).mkdir()
        for name, content in files.items():
            with atomic_write(building / name) as f:
                f.write(content)
        write_marker(building / COMPLETE, expected)
    return release


def generate(out: Path, spec: WmtSpec) -> list[Path]:
    return [generate_language(out, spec, lang) for lang, _ in spec.train_sizes]


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = release_parser(
        "espnet_ext.data.numbers.wmt", __doc__, "writes OUT/<lang>-en/", WmtSpec()
    )
    parser.add_argument("--doc_size", type=int, default=10, help="segments per dev/test document")
    parser.add_argument(
        "--compound_langs",
        type=comma_list,
        default="",
        help="languages whose number words stay one compound ('dreihundertzwölf'; default: none)",
    )
    args = parser.parse_args(argv)
    spec = WmtSpec(
        args.train_sizes,
        args.valid_size,
        args.test_size,
        args.range,
        args.seed,
        args.doc_size,
        tuple(args.compound_langs),
    )
    for release in generate(args.out, spec):
        print(release)


if __name__ == "__main__":
    sys.exit(main())
