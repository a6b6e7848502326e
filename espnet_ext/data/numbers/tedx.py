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

    python -m espnet_ext.data.numbers.tedx --out DIR --train_sizes es=800,fr=800,it=200,pt=100
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import soundfile

from espnet_ext.data.datadir import atomic_dir
from espnet_ext.data.mtedx import LANGUAGES
from espnet_ext.data.numbers.__main__ import _splits
from espnet_ext.data.numbers.corpus import CorpusSpec, inclusive_range
from espnet_ext.data.numbers.modality import Utterance
from espnet_ext.data.numbers.speech import (
    ESPEAK_VOICES,
    SAMPLE_RATE,
    espeak_ng_version,
    synthesize,
    utterance_prosody,
)
from espnet_ext.data.numbers.talks import COMPLETE, LEAD_SILENCE_S, Talk, TalkSpec, plan_talks
from espnet_ext.data.numbers.words import number_to_words
from espnet_ext.errors import ConfigError, InputError
from espnet_ext.fileio import atomic_write

GENERATOR_VERSION = 1  # bump when the same settings would produce different output


@dataclass(frozen=True)
class TedxSpec:
    train_sizes: tuple[tuple[str, int], ...] = (("es", 800), ("fr", 800), ("it", 200), ("pt", 100))
    valid_size: int = 40  # per language
    test_size: int = 60  # per language
    num_range: tuple[int, int] = (0, 999)
    seed: int = 0
    num_speakers: int = 6  # per language and split (disjoint)
    segments_per_talk: tuple[int, int] = (10, 20)

    def __post_init__(self):
        langs = [lang for lang, _ in self.train_sizes]
        if not langs or len(set(langs)) != len(langs) or set(langs) - set(LANGUAGES):
            raise ConfigError(
                f"train_sizes needs distinct mTEDx languages ({' '.join(LANGUAGES)}), got {langs}",
                key="train_sizes",
            )

    def language_spec(self, lang: str) -> TalkSpec:
        """The talks of one language: its own seed stream, train size, and the shared valid/test sizes."""
        size = dict(self.train_sizes)[lang]
        splits = (("train", size), ("valid", self.valid_size), ("test", self.test_size))
        seed = int(np.random.SeedSequence([self.seed, LANGUAGES.index(lang)]).generate_state(1)[0])
        corpus = CorpusSpec(splits, self.num_range, seed, num_speakers=self.num_speakers)
        return TalkSpec(corpus, self.segments_per_talk, tgt_lang=lang)  # the talks' language


def talk_name(talk: Talk) -> str:
    return f"talk{talk.number:04d}"


def _speech(lang: str, utt: Utterance) -> np.ndarray:
    rate, pitch = utterance_prosody(utt)
    voice = f"{ESPEAK_VOICES[lang]}+{utt.speaker.variant}"
    return synthesize(number_to_words(utt.number, lang), voice, rate, pitch)


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
        "spec": asdict(spec.language_spec(lang)),
        "espeak-ng": espeak_ng_version(),
        "sample_rate": SAMPLE_RATE,
    }


def generate_language(out: Path, spec: TedxSpec, lang: str, nj: int = 1) -> Path:
    """Write ``<out>/<lang>-<lang>/`` (returned); a finished one with these settings is kept."""
    release = Path(out) / f"{lang}-{lang}"
    expected = json.loads(json.dumps(signature(spec, lang)))
    try:
        if json.loads((release / COMPLETE).read_text(encoding="utf-8")) == expected:
            return release
    except (OSError, ValueError):
        pass
    talks = plan_talks(spec.language_spec(lang))
    utterances = [utt for talk in talks for utt in talk.utterances]
    with ThreadPoolExecutor(nj) as pool:  # each thread drives one espeak-ng process
        try:
            audio = list(pool.map(lambda u: _speech(lang, u), utterances))
        except RuntimeError as e:
            raise InputError(f"espeak-ng failed: {e}") from e
    by_id = dict(zip((u.utt_id for u in utterances), audio))
    with atomic_dir(release) as building:
        for split in ("train", "valid", "test"):
            split_dir = building / "data" / split
            (split_dir / "wav").mkdir(parents=True)
            (split_dir / "txt").mkdir()
            yaml_lines, words = [], []
            for talk in (t for t in talks if t.split == split):
                speech = [by_id[u.utt_id] for u in talk.utterances]
                yaml_lines += _write_talk(talk, speech, split_dir)
                words += [number_to_words(u.number, lang) for u in talk.utterances]
            for ext, content in (("yaml", yaml_lines), (lang, words)):
                with atomic_write(split_dir / "txt" / f"{split}.{ext}") as f:
                    f.write("".join(line + "\n" for line in content))
        with atomic_write(building / COMPLETE) as f:
            json.dump(expected, f, indent=1, sort_keys=True)
            f.write("\n")
    return release


def generate(out: Path, spec: TedxSpec, nj: int = 1) -> list[Path]:
    if nj < 1:
        raise ConfigError(f"nj must be >= 1, got {nj}", key="nj")
    return [generate_language(out, spec, lang, nj) for lang, _ in spec.train_sizes]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m espnet_ext.data.numbers.tedx", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", type=Path, required=True, help="writes OUT/<lang>-<lang>/")
    parser.add_argument("--train_sizes", type=_splits, default="es=800,fr=800,it=200,pt=100")
    parser.add_argument("--valid_size", type=int, default=40, help="per language")
    parser.add_argument("--test_size", type=int, default=60, help="per language")
    parser.add_argument(
        "--range", type=inclusive_range, default="0:999", help="numbers lo:hi, inclusive"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num_speakers", type=int, default=6, help="per language and split")
    parser.add_argument(
        "--segments_per_talk", type=inclusive_range, default="10:20", help="lo:hi, inclusive"
    )
    parser.add_argument("--nj", type=int, default=1, help="espeak-ng processes at once")
    args = parser.parse_args(argv)
    try:
        spec = TedxSpec(
            args.train_sizes,
            args.valid_size,
            args.test_size,
            args.range,
            args.seed,
            args.num_speakers,
            args.segments_per_talk,
        )
        for release in generate(args.out, spec, args.nj):
            print(release)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
