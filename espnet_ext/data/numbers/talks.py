"""Numbers-world "talks" in the MuST-C release layout: English speech, English transcripts, translations.

A talk is one speaker saying 20-40 numbers (espeak-ng, the speaker's voice with per-utterance prosody as in
``speech``), separated by silences, written as one long 16 kHz wav; the segment list gives each
number's offset and duration in it, with the English words and their translation on the same lines::

    <out>/en-<tgt>/data/<split>/wav/ted_<n>.wav
    <out>/en-<tgt>/data/<split>/txt/<split>.yaml     - {duration: D, offset: O, rW: W, uW: 0,
                                                        speaker_id: spk.<n>, wav: ted_<n>.wav}
    <out>/en-<tgt>/data/<split>/txt/<split>.{en,<tgt>}
    <out>/en-<tgt>/.complete                         the settings, written last

so ``espnet_ext.data.mustc`` prepares it exactly as it prepares the real release. Which numbers each split
holds and who says them is ``corpus.plan_corpus`` (numbers and speakers disjoint across splits); a
speaker's numbers are dealt into talks in a seeded order. Offsets are multiples of one sample and written
with 6 decimals (1/16000 s = 62.5 us, so rounding moves a cut by under a hundredth of a sample).
The release dir is built beside its place and renamed into it: nothing half-written looks finished.

    python -m espnet_ext.data.numbers.talks --out DIR [--splits train=2000,dev=200,tst-COMMON=200]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from espnet_ext.data.datadir import atomic_dir
from espnet_ext.data.numbers.corpus import (
    COMPLETE,
    CorpusSpec,
    inclusive_range,
    marker_matches,
    name_sizes,
    plan_corpus,
    write_marker,
)
from espnet_ext.data.numbers.modality import Utterance
from espnet_ext.data.numbers.speech import (
    ESPEAK_VOICES,
    SAMPLE_RATE,
    espeak_ng_version,
    synthesize,
    utterance_prosody,
    write_wav,
)
from espnet_ext.data.numbers.words import LANGUAGES, number_to_words
from espnet_ext.errors import ConfigError, InputError, reports_input_errors
from espnet_ext.fileio import atomic_write

GENERATOR_VERSION = 3  # bump when the same settings would produce different output
LEAD_SILENCE_S = 0.5  # before a talk's first number
GAP_S = (0.2, 0.8)  # silence after each number, drawn per gap in 10 ms steps


@dataclass(frozen=True)
class TalkSpec:
    corpus: CorpusSpec = field(
        default_factory=lambda: CorpusSpec(
            splits=(("train", 2000), ("dev", 200), ("tst-COMMON", 200)), num_speakers=8
        )
    )
    segments_per_talk: tuple[int, int] = (20, 40)  # inclusive; a speaker's last talk may be shorter
    tgt_lang: str = "de"

    def __post_init__(self):
        lo, hi = self.segments_per_talk
        if not 1 <= lo <= hi:
            raise ConfigError(f"segments per talk must satisfy 1 <= lo <= hi, got {lo}:{hi}")
        if self.tgt_lang == "en" or self.tgt_lang not in LANGUAGES:
            others = ", ".join(lang for lang in LANGUAGES if lang != "en")
            raise ConfigError(f"target language must be one of {others}, got '{self.tgt_lang}'")


@dataclass(frozen=True)
class Talk:
    number: int  # ted_<number>.wav
    split: str
    utterances: tuple[Utterance, ...]  # in speaking order; one speaker
    gaps: tuple[int, ...]  # silence after each utterance, in samples


def plan_talks(spec: TalkSpec) -> list[Talk]:
    """Talks of every split, numbered from 1 in split order, one speaker each."""
    rng = np.random.default_rng(np.random.SeedSequence([spec.corpus.seed, 1]))
    talks: list[Talk] = []
    for split, utterances in plan_corpus(spec.corpus).items():
        by_speaker: dict[str, list[Utterance]] = {}
        for utt in utterances:
            by_speaker.setdefault(utt.speaker.spk_id, []).append(utt)
        for spk_id in sorted(by_speaker):
            pending = [by_speaker[spk_id][i] for i in rng.permutation(len(by_speaker[spk_id]))]
            while pending:
                size = int(rng.integers(spec.segments_per_talk[0], spec.segments_per_talk[1] + 1))
                chunk, pending = pending[:size], pending[size:]
                steps = rng.integers(round(GAP_S[0] * 100), round(GAP_S[1] * 100) + 1, len(chunk))
                gaps = tuple(int(s) * SAMPLE_RATE // 100 for s in steps)
                talks.append(Talk(len(talks) + 1, split, tuple(chunk), gaps))
    return talks


def _speech(utt: Utterance) -> np.ndarray:
    rate, pitch = utterance_prosody(utt)
    voice = f"{ESPEAK_VOICES['en']}+{utt.speaker.variant}"
    return synthesize(number_to_words(utt.number, "en"), voice, rate, pitch)


def _write_talk(talk: Talk, speech: Sequence[np.ndarray], split_dir: Path) -> list[str]:
    """Write the talk's wav; its yaml lines."""
    lead = np.zeros(round(LEAD_SILENCE_S * SAMPLE_RATE), dtype=np.int16)
    pieces, lines, position = [lead], [], len(lead)
    for utt, samples, gap in zip(talk.utterances, speech, talk.gaps):
        words = len(number_to_words(utt.number, "en").split())
        lines.append(
            f"- {{duration: {len(samples) / SAMPLE_RATE:.6f}, offset: {position / SAMPLE_RATE:.6f}, "
            f"rW: {words}, uW: 0, speaker_id: spk.{talk.number}, wav: ted_{talk.number}.wav}}"
        )
        pieces += [samples, np.zeros(gap, dtype=np.int16)]
        position += len(samples) + gap
    write_wav(split_dir / "wav" / f"ted_{talk.number}.wav", np.concatenate(pieces))
    return lines


def signature(spec: TalkSpec) -> dict:
    return {
        "generator_version": GENERATOR_VERSION,
        "spec": asdict(spec),
        "espeak-ng": espeak_ng_version(),
        "sample_rate": SAMPLE_RATE,
    }


def generate_talks(out: Path, spec: TalkSpec, nj: int = 1) -> Path:
    """Write ``<out>/en-<tgt>/`` (the release dir, returned); a finished one with these settings is kept."""
    if nj < 1:
        raise ConfigError(f"nj must be >= 1, got {nj}")
    release = Path(out) / f"en-{spec.tgt_lang}"
    return write_release(
        release, spec, ("en", spec.tgt_lang), signature(spec), _speech, _write_talk, nj
    )


def write_release(
    release: Path,
    spec: TalkSpec,
    langs: Sequence[str],
    expected: dict,
    speak: Callable[[Utterance], np.ndarray],
    write_talk: Callable[[Talk, list[np.ndarray], Path], list[str]],
    nj: int,
) -> Path:
    """Write a release dir in MuST-C's layout, ``data/<split>/{wav/,txt/<split>.{yaml,<lang>...}}``
    (returned); a finished one whose marker records ``expected`` is kept.

    ``speak(utterance)`` synthesises one number (``nj`` at once), ``write_talk(talk, speech,
    split_dir)`` writes a talk's audio and returns its yaml lines; ``langs`` (the source first; once
    for ASR) get the number words, line-parallel with the yaml.
    """
    if marker_matches(release / COMPLETE, expected):
        return release
    talks = plan_talks(spec)
    utterances = [utt for talk in talks for utt in talk.utterances]
    with ThreadPoolExecutor(nj) as pool:  # each thread drives one espeak-ng process
        try:
            audio = dict(zip((u.utt_id for u in utterances), pool.map(speak, utterances)))
        except RuntimeError as e:
            raise InputError(f"espeak-ng failed: {e}") from e
    with atomic_dir(release) as building:
        for split, _ in spec.corpus.splits:
            split_dir = building / "data" / split
            (split_dir / "wav").mkdir(parents=True)
            (split_dir / "txt").mkdir()
            lines: dict[str, list[str]] = {ext: [] for ext in ("yaml", *langs)}
            for talk in (t for t in talks if t.split == split):
                lines["yaml"] += write_talk(
                    talk, [audio[u.utt_id] for u in talk.utterances], split_dir
                )
                for lang in dict.fromkeys(langs):
                    lines[lang] += [number_to_words(u.number, lang) for u in talk.utterances]
            for ext, content in lines.items():
                with atomic_write(split_dir / "txt" / f"{split}.{ext}") as f:
                    f.write("".join(line + "\n" for line in content))
        write_marker(building / COMPLETE, expected)
    return release


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m espnet_ext.data.numbers.talks", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", type=Path, required=True, help="writes OUT/en-<tgt_lang>/")
    parser.add_argument("--splits", type=name_sizes, default="train=2000,dev=200,tst-COMMON=200")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num_speakers", type=int, default=8, help="per split (disjoint)")
    parser.add_argument(
        "--segments_per_talk", type=inclusive_range, default="20:40", help="lo:hi, inclusive"
    )
    parser.add_argument(
        "--range", type=inclusive_range, default="0:9999", help="numbers lo:hi, inclusive"
    )
    parser.add_argument("--tgt_lang", default="de")
    parser.add_argument("--nj", type=int, default=1, help="espeak-ng processes at once")
    args = parser.parse_args(argv)
    corpus = CorpusSpec(
        splits=args.splits,
        num_range=args.range,
        seed=args.seed,
        num_speakers=args.num_speakers,
    )
    release = generate_talks(
        args.out, TalkSpec(corpus, args.segments_per_talk, args.tgt_lang), args.nj
    )
    print(release)


if __name__ == "__main__":
    sys.exit(main())
