"""Numbers-world talks in the mTEDx release layout: spoken numbers in several languages, unequal amounts.

Per language L a release dir as ``espnet_ext.data.mtedx`` reads it::

    <out>/<L>-<L>/data/<split>/wav/talk<n>.flac      one talk: one speaker saying numbers in L, silences between
    <out>/<L>-<L>/data/<split>/txt/<split>.yaml      - {duration: D, offset: O, speaker_id: talk<n>, wav: talk<n>.wav}
    <out>/<L>-<L>/data/<split>/txt/<split>.<L>       the number words in L (num2words; Greek: our converter)
    <out>/<L>-<L>/.complete                          the settings, written last

The amount of training speech differs per language on purpose (``train_sizes``: high- and low-resource
languages, the setting where the head-selection paper expects sharing to help the low-resource ones);
valid and test are the same size for every language, so WER per language compares like with like. Each
language has its own numbers and speakers (its own seed stream); within a language, splits have disjoint
numbers and speakers (``corpus.plan_corpus``) and talks are dealt as ``talks.plan_talks`` deals them.
espeak-ng speaks each language with its own voice (``speech.ESPEAK_VOICES``) and the speaker's variant.

Speech translation (``TedxSTSpec``, ``generate_st``): per direction ``<src>-<tgt>`` a release dir in the
same layout, speech and transcript in ``<src>``, the translation in ``<tgt>`` on the same line of
``<split>.<tgt>``: the same number's words in the target language (num2words; Greek: our converter), so
"doscientos tres" translates to "two hundred three" and "due cento tre" (Italian compounds are written
split at their morphemes, ``words.separate_compounds``, so Italian targets have n-grams for BLEU).
Directions and amounts follow mTEDx (the paper's Table 9): ten trained directions with deliberately
unequal training amounts, and the zero-shot directions it-en, it-es, pt-es (train size 0) released, as in
mTEDx, with valid and test lists only. Each direction has its own numbers and speakers (its own seed
stream).

A second domain (``domain="other"``, for multi-domain ASR and ST) speaks with other voices and at another
rate: espeak-ng's Klatt variants instead of the m/f ones and ``OTHER_DOMAIN_RATE`` words per minute
faster, and its own numbers and speakers (its own seed streams); it is written in the same layout under
another root and read by the same reader.

    python -m espnet_ext.data.numbers.tedx --out DIR --train_sizes es=800,fr=800,it=200,pt=100 [--domain other]
    python -m espnet_ext.data.numbers.tedx --out DIR --st_train_sizes es-en=400,fr-en=300,it-en=0 \
        [--domain other]
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import soundfile

from espnet_ext.data.mtedx import LANGUAGES, parse_direction
from espnet_ext.data.numbers.corpus import (
    CorpusSpec,
    inclusive_range,
    release_parser,
)
from espnet_ext.data.numbers.modality import Utterance
from espnet_ext.data.numbers.speech import (
    ESPEAK_VOICES,
    SAMPLE_RATE,
    VOICE_VARIANTS,
    espeak_ng_version,
    synthesize,
    utterance_prosody,
)
from espnet_ext.data.numbers.talks import LEAD_SILENCE_S, Talk, TalkSpec, write_release
from espnet_ext.data.numbers.words import LANGUAGES as WORD_LANGUAGES
from espnet_ext.data.numbers.words import number_to_words
from espnet_ext.errors import ConfigError, InputError, reports_input_errors

GENERATOR_VERSION = 2  # bump when the same settings would produce different output
DOMAINS = ("tedx", "other")


@dataclass(frozen=True)
class TedxSpec:
    train_sizes: tuple[tuple[str, int], ...] = (("es", 800), ("fr", 800), ("it", 200), ("pt", 100))
    valid_size: int = 40  # per language
    test_size: int = 60  # per language
    num_range: tuple[int, int] = (0, 999)
    seed: int = 0
    num_speakers: int = 6  # per language and split (disjoint)
    segments_per_talk: tuple[int, int] = (10, 20)
    domain: str = "tedx"

    def __post_init__(self):
        langs = [lang for lang, _ in self.train_sizes]
        if not langs or len(set(langs)) != len(langs) or set(langs) - set(LANGUAGES):
            raise ConfigError(
                f"train_sizes needs distinct mTEDx languages ({' '.join(LANGUAGES)}), got {langs}",
                key="train_sizes",
            )
        if self.domain not in DOMAINS:
            raise ConfigError(f"domain must be one of {' '.join(DOMAINS)}", key="domain")

    def language_spec(self, lang: str) -> TalkSpec:
        """The talks of one language: its own seed stream, train size, and the shared valid/test sizes."""
        size = dict(self.train_sizes)[lang]
        splits = (("train", size), ("valid", self.valid_size), ("test", self.test_size))
        # TEDx keeps the stream it had before there were domains; another domain has its own
        key = [self.seed, LANGUAGES.index(lang)] + [DOMAINS.index(self.domain)] * (
            self.domain != "tedx"
        )
        seed = int(np.random.SeedSequence(key).generate_state(1)[0])
        corpus = CorpusSpec(splits, self.num_range, seed, num_speakers=self.num_speakers)
        return TalkSpec(corpus, self.segments_per_talk, tgt_lang=lang)  # the talks' language


# ST training utterances per direction: mTEDx's ten trained directions, unequal as in its Table 9 (es-en,
# fr-en, pt-en, es-pt, fr-es high; el-en, ru-en, es-it, es-fr low), and its three zero-shot ones (0)
ST_TRAIN_SIZES = (
    ("el-en", 60), ("es-en", 400), ("es-fr", 60), ("es-it", 80), ("es-pt", 240),
    ("fr-en", 360), ("fr-es", 240), ("fr-pt", 150), ("pt-en", 360), ("ru-en", 60),
    ("it-en", 0), ("it-es", 0), ("pt-es", 0),
)  # fmt: skip
OTHER_DOMAIN_VARIANTS = ("klatt", "klatt2", "klatt3", "klatt4", "klatt5", "klatt6")
OTHER_DOMAIN_RATE = 50  # words per minute faster than the same speaker in TEDx


@dataclass(frozen=True)
class TedxSTSpec:
    train_sizes: tuple[tuple[str, int], ...] = (
        ST_TRAIN_SIZES  # (direction, utterances); 0: zero-shot
    )
    valid_size: int = 40  # per direction with training data
    test_size: int = 60  # per direction
    num_range: tuple[int, int] = (0, 999)
    seed: int = 0
    num_speakers: int = 6  # per direction and split (disjoint)
    segments_per_talk: tuple[int, int] = (10, 20)
    domain: str = "tedx"

    def __post_init__(self):
        directions = [d for d, _ in self.train_sizes]
        if not directions or len(set(directions)) != len(directions):
            raise ConfigError(
                f"train_sizes needs distinct directions, got {directions}", key="train_sizes"
            )
        for direction, size in self.train_sizes:
            try:
                src, tgt = parse_direction(direction)
            except InputError as e:
                raise ConfigError(str(e), key="train_sizes") from None
            if tgt not in WORD_LANGUAGES or size < 0:
                raise ConfigError(
                    f"'{direction}={size}': the target must be one of {' '.join(WORD_LANGUAGES)} "
                    "and the size >= 0 (0: a zero-shot direction, valid and test only)",
                    key="train_sizes",
                )
        if self.domain not in DOMAINS:
            raise ConfigError(f"domain must be one of {' '.join(DOMAINS)}", key="domain")

    def direction_spec(self, direction: str) -> TalkSpec:
        """The talks of one direction: its own seed stream; no train split for a zero-shot direction."""
        size = dict(self.train_sizes)[direction]
        splits = ((("train", size),) if size else ()) + (
            ("valid", self.valid_size),
            ("test", self.test_size),
        )
        key = [self.seed, DOMAINS.index(self.domain), *direction.encode()]
        seed = int(np.random.SeedSequence(key).generate_state(1)[0])
        corpus = CorpusSpec(splits, self.num_range, seed, num_speakers=self.num_speakers)
        return TalkSpec(corpus, self.segments_per_talk, tgt_lang=parse_direction(direction)[0])


def talk_name(talk: Talk) -> str:
    return f"talk{talk.number:04d}"


def domain_voice(lang: str, utt: Utterance, domain: str = "tedx") -> tuple[str, int, int]:
    """(espeak-ng voice, rate, pitch) of an utterance in a domain: the other domain swaps the speaker's
    m/f variant for a Klatt one and speaks faster."""
    rate, pitch = utterance_prosody(utt)
    variant = utt.speaker.variant
    if domain == "other":
        variant = OTHER_DOMAIN_VARIANTS[VOICE_VARIANTS.index(variant) % len(OTHER_DOMAIN_VARIANTS)]
        rate += OTHER_DOMAIN_RATE
    return f"{ESPEAK_VOICES[lang]}+{variant}", rate, pitch


def _speech(lang: str, utt: Utterance, domain: str = "tedx") -> np.ndarray:
    return synthesize(number_to_words(utt.number, lang), *domain_voice(lang, utt, domain))


def _write_talk(talk: Talk, speech: Sequence[np.ndarray], split_dir: Path) -> list[str]:
    """Write the talk's flac; its yaml lines (mTEDx's: 2 decimals would move cuts, so 6 are written)."""
    name = talk_name(talk)
    lead = np.zeros(round(LEAD_SILENCE_S * SAMPLE_RATE), dtype=np.int16)
    pieces, lines, position = [lead], [], len(lead)
    for samples, gap in zip(speech, talk.gaps):
        lines.append(
            f"- {{duration: {len(samples) / SAMPLE_RATE:.6f}, offset: {position / SAMPLE_RATE:.6f}, "
            f"speaker_id: {name}, wav: {name}.wav}}"
        )
        pieces += [samples, np.zeros(gap, dtype=np.int16)]
        position += len(samples) + gap
    soundfile.write(split_dir / "wav" / f"{name}.flac", np.concatenate(pieces), SAMPLE_RATE)
    return lines


def signature(spec: TedxSpec, lang: str) -> dict:
    return {
        "generator_version": GENERATOR_VERSION,
        "language": lang,
        "domain": spec.domain,
        "spec": asdict(spec.language_spec(lang)),
        "espeak-ng": espeak_ng_version(),
        "sample_rate": SAMPLE_RATE,
    }


def _generate_release(
    release: Path, talk_spec: TalkSpec, src: str, tgt: str, signature: dict, nj: int, domain: str
) -> Path:
    """Write one release dir ``<src>-<tgt>`` (ASR: src == tgt); a finished one with ``signature`` is kept."""
    speak = functools.partial(_speech, src, domain=domain)
    return write_release(release, talk_spec, (src, tgt), signature, speak, _write_talk, nj)


def generate_language(out: Path, spec: TedxSpec, lang: str, nj: int = 1) -> Path:
    """Write ``<out>/<lang>-<lang>/`` (returned); a finished one with these settings is kept."""
    release = Path(out) / f"{lang}-{lang}"
    return _generate_release(
        release, spec.language_spec(lang), lang, lang, signature(spec, lang), nj, spec.domain
    )


def st_signature(spec: TedxSTSpec, direction: str) -> dict:
    return {
        "generator_version": GENERATOR_VERSION,
        "direction": direction,
        "domain": spec.domain,
        "spec": asdict(spec.direction_spec(direction)),
        "espeak-ng": espeak_ng_version(),
        "sample_rate": SAMPLE_RATE,
    }


def generate_st(out: Path, spec: TedxSTSpec, nj: int = 1) -> list[Path]:
    """Write ``<out>/<src>-<tgt>/`` per direction (returned); finished ones with these settings are kept."""
    if nj < 1:
        raise ConfigError(f"nj must be >= 1, got {nj}", key="nj")
    return [
        _generate_release(
            Path(out) / direction,
            spec.direction_spec(direction),
            *parse_direction(direction),
            st_signature(spec, direction),
            nj,
            spec.domain,
        )
        for direction, _ in spec.train_sizes
    ]


def generate(out: Path, spec: TedxSpec, nj: int = 1) -> list[Path]:
    if nj < 1:
        raise ConfigError(f"nj must be >= 1, got {nj}", key="nj")
    return [generate_language(out, spec, lang, nj) for lang, _ in spec.train_sizes]


def _direction_sizes(text: str) -> tuple[tuple[str, int], ...]:
    """argparse type of ``--st_train_sizes``: ``es-en=400,it-en=0``."""
    pairs = []
    for item in text.split(","):
        direction, eq, size = item.partition("=")
        if not eq or not size.isdigit():
            raise argparse.ArgumentTypeError(f"'{item}' is not <src>-<tgt>=<utterances>")
        pairs.append((direction, int(size)))
    return tuple(pairs)


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = release_parser(
        "espnet_ext.data.numbers.tedx", __doc__, "writes OUT/<lang>-<lang>/", TedxSpec()
    )
    parser.add_argument("--num_speakers", type=int, default=6, help="per language and split")
    parser.add_argument(
        "--segments_per_talk", type=inclusive_range, default="10:20", help="lo:hi, inclusive"
    )
    parser.add_argument("--nj", type=int, default=1, help="espeak-ng processes at once")
    parser.add_argument(
        "--st_train_sizes",
        type=_direction_sizes,
        help="speech translation instead: <src>-<tgt>=N,... (N 0: zero-shot, valid and test only); "
        "writes OUT/<src>-<tgt>/",
    )
    parser.add_argument("--domain", choices=DOMAINS, default="tedx", help="the speech's domain")
    args = parser.parse_args(argv)
    shared = (
        args.valid_size,
        args.test_size,
        args.range,
        args.seed,
        args.num_speakers,
        args.segments_per_talk,
    )
    if args.st_train_sizes is not None:
        releases = generate_st(
            args.out, TedxSTSpec(args.st_train_sizes, *shared, args.domain), args.nj
        )
    else:
        releases = generate(args.out, TedxSpec(args.train_sizes, *shared, args.domain), args.nj)
    for release in releases:
        print(release)


if __name__ == "__main__":
    sys.exit(main())
