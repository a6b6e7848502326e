"""The numbers-world corpus: a seeded plan of who says which integer in which split, written as Kaldi data dirs.

Layout written under ``out``::

    <out>/<split>/{text,text.<lang>,wav.scp,phn,...}   one file per modality output, sorted by utterance id
    <out>/<split>/{utt2spk,spk2utt,utt2num}            speakers, and the integer each utterance says
    <out>/<split>/.complete                             written last: the split dir is whole
    <out>/.complete                                     the corpus' settings, written after every split

A split dir is built beside its final place and renamed into it (``datadir.atomic_dir``), so a crash
never leaves a dir that looks finished. Rerunning with the same settings finds ``<out>/.complete`` and
does nothing; other settings regenerate the corpus.

Design choices:
- Numbers are disjoint across splits. Filters hold a pattern out of the filtered splits (train by
  default): ``exclude_last_digits`` an ending, ``exclude_words`` whole words of the numbers' written form
  in ``exclude_words_lang`` (e.g. "seven": no "seven" in the training targets at all, while "seventy"
  stays, so the sound is still heard). ``domain_digits`` does the opposite for ``domain_splits``: their
  numbers all match a pattern of their decimal digits (e.g. ``repeated_tens``, the tens digit repeats the
  hundreds digit), a test domain with a regularity that uniform training transcripts lack and an LM
  trained on that domain's text can learn. Domain splits are drawn first (their pattern is scarce), then
  unfiltered splits, then the filtered ones: so dev/test are uniform samples of the range (unless in a
  domain) and a held-out pattern appears there at its natural rate. Each split takes the first free
  numbers of one seeded permutation: the domain splits take the domain's numbers from its front, so the
  splits drawn after them hold few (train 24 of 2,000 with 200 domain dev/test numbers; ~10 % would be
  the natural rate), which is what a test domain the training transcripts lack needs.
- Speakers are disjoint across splits by default, as in LibriSpeech: test speakers are unseen voices
  (an unseen base rate/pitch on a voice variant the model has heard), which is what an ASR test should
  measure. ``speakers="shared"`` reuses the same speakers in every split.
- Randomness comes from independent streams of one seed (numbers, speakers, per-utterance seeds), so e.g.
  changing the number of speakers does not change which numbers are in which split.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from espnet_ext.data.datadir import atomic_dir, spk2utt_from_utt2spk, write_kaldi_map
from espnet_ext.data.numbers.modality import Modality, Speaker, Utterance
from espnet_ext.data.numbers.speech import random_speakers
from espnet_ext.data.numbers.words import LANGUAGES, normalize_words, number_to_words
from espnet_ext.errors import ConfigError
from espnet_ext.fileio import atomic_write

GENERATOR_VERSION = 3  # bump when the same settings would produce different output
COMPLETE = ".complete"
MAX_RANGE_SIZE = 10_000_000  # the plan permutes the whole range
# Named digit domains (domain_digits): repeated_tens, the tens digit repeats the hundreds digit (3,335;
# 1,557; 220): 990 of 0..9999, 9,000 of 10000..99999.
DIGIT_DOMAINS = {"repeated_tens": r"\d*(\d)\1\d"}


def resolve_domain(domain_digits: str) -> str:
    """The regular expression of a named digit domain; any other value is taken as a regular expression."""
    return DIGIT_DOMAINS.get(domain_digits, domain_digits)


@dataclass(frozen=True)
class CorpusSpec:
    """Which numbers, splits and speakers; what each utterance looks/sounds like is up to the modalities."""

    splits: tuple[tuple[str, int], ...] = (("train", 2000), ("dev", 200), ("test", 200))
    num_range: tuple[int, int] = (0, 9999)  # inclusive
    seed: int = 0
    exclude_last_digits: tuple[int, ...] = ()
    exclude_words: tuple[str, ...] = ()  # whole words, as number_to_words writes them
    exclude_words_lang: str = "en"
    exclude_splits: tuple[str, ...] = ("train",)  # splits the exclusions apply to
    domain_digits: str = ""  # regex their decimal digits must match (all of them), in domain_splits
    domain_splits: tuple[str, ...] = ()
    speakers: str = "disjoint"  # or "shared" across splits
    num_speakers: int = 12  # per split

    def __post_init__(self):
        names = [name for name, _ in self.splits]
        if not names or len(set(names)) != len(names):
            raise ConfigError(f"split names must be non-empty and unique, got {names}")
        for name, size in self.splits:
            if not name or "/" in name or name.startswith(".") or size < 1:
                raise ConfigError(f"bad split '{name}={size}': need a plain name and a size >= 1")
        lo, hi = self.num_range
        if not 0 <= lo <= hi:
            raise ConfigError(f"number range must satisfy 0 <= lo <= hi, got {lo}:{hi}")
        if hi - lo + 1 > MAX_RANGE_SIZE:
            raise ConfigError(f"number range {lo}:{hi} spans more than {MAX_RANGE_SIZE} numbers")
        if self.seed < 0:
            raise ConfigError(f"seed must be >= 0, got {self.seed}")
        if any(not 0 <= d <= 9 for d in self.exclude_last_digits):
            raise ConfigError(f"excluded last digits must be 0..9, got {self.exclude_last_digits}")
        if any(not w or " " in w or normalize_words(w) != w for w in self.exclude_words):
            raise ConfigError(
                f"excluded words must be single lower-case words as transcripts write them, "
                f"got {self.exclude_words}"
            )
        if self.exclude_words_lang not in LANGUAGES:
            raise ConfigError(
                f"exclude_words_lang '{self.exclude_words_lang}' is not one of {', '.join(LANGUAGES)}"
            )
        unknown = set(self.exclude_splits) - set(names)
        if self.excludes and unknown:
            raise ConfigError(f"exclusion names unknown splits: {', '.join(sorted(unknown))}")
        try:
            re.compile(self.domain_digits)
        except re.error as e:
            raise ConfigError(
                f"domain_digits '{self.domain_digits}' is not a regular expression: {e}"
            ) from None
        unknown = set(self.domain_splits) - set(names)
        if unknown:
            raise ConfigError(f"domain_splits names unknown splits: {', '.join(sorted(unknown))}")
        if bool(self.domain_digits) != bool(self.domain_splits):
            raise ConfigError("domain_digits and domain_splits go together: give both or neither")
        if self.speakers not in ("disjoint", "shared"):
            raise ConfigError(f"speakers must be 'disjoint' or 'shared', got '{self.speakers}'")
        if self.num_speakers < 1:
            raise ConfigError(f"num_speakers must be >= 1, got {self.num_speakers}")

    @property
    def excludes(self) -> bool:
        return bool(self.exclude_last_digits or self.exclude_words)

    def excluded(self, numbers: np.ndarray) -> np.ndarray:
        """(N,) bool: which of ``numbers`` the filtered splits hold out."""
        out = np.isin(numbers % 10, list(self.exclude_last_digits))
        if self.exclude_words:
            words = set(self.exclude_words)
            lang = self.exclude_words_lang
            out |= np.array(
                [not words.isdisjoint(number_to_words(int(n), lang).split()) for n in numbers],
                dtype=bool,
            )
        return out

    def in_domain(self, numbers: np.ndarray) -> np.ndarray:
        """(N,) bool: which of ``numbers`` the domain splits may use (their digits match domain_digits)."""
        pattern = re.compile(self.domain_digits)
        return np.array([pattern.fullmatch(str(int(n))) is not None for n in numbers], dtype=bool)

    def restricts(self, split: str) -> bool:
        """Whether the numbers of ``split`` are not a uniform sample of the range."""
        return (self.excludes and split in self.exclude_splits) or split in self.domain_splits


def comma_list(text: str) -> tuple[str, ...]:
    """argparse type of comma-separated options: the stripped, non-empty items."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def name_sizes(text: str) -> tuple[tuple[str, int], ...]:
    """argparse type of ``name=size[,name=size...]`` options (splits, per-language train sizes)."""
    try:
        return tuple(
            (name.strip(), int(size))
            for name, size in (item.split("=") for item in comma_list(text))
        )
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected name=size[,name=size...], got '{text}'"
        ) from None


def release_parser(module: str, doc: str, out_help: str, defaults) -> argparse.ArgumentParser:
    """The parser of a per-language release generator ``python -m <module>`` (``numbers.wmt``,
    ``numbers.tedx``): --out, then --train_sizes, --valid_size, --test_size, --range and --seed
    defaulting to the fields of its spec ``defaults``; the caller adds its own options."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help=out_help)
    train_sizes = ",".join(f"{name}={size}" for name, size in defaults.train_sizes)
    lo, hi = defaults.num_range
    parser.add_argument("--train_sizes", type=name_sizes, default=train_sizes)
    parser.add_argument("--valid_size", type=int, default=defaults.valid_size, help="per language")
    parser.add_argument("--test_size", type=int, default=defaults.test_size, help="per language")
    parser.add_argument(
        "--range", type=inclusive_range, default=f"{lo}:{hi}", help="numbers lo:hi, inclusive"
    )
    parser.add_argument("--seed", type=int, default=defaults.seed)
    return parser


def inclusive_range(text: str) -> tuple[int, int]:
    """argparse type of the ``lo:hi`` options (number ranges, segments per talk): inclusive bounds."""
    try:
        lo, hi = (int(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected lo:hi (two integers), got '{text}'") from None
    return lo, hi


def _draw_order(spec: CorpusSpec, split: str) -> int:
    if split in spec.domain_splits:
        return 0
    return 2 if spec.restricts(split) else 1


def _split_numbers(spec: CorpusSpec, rng: np.random.Generator) -> dict[str, list[int]]:
    lo, hi = spec.num_range
    order = rng.permutation(hi - lo + 1) + lo
    used = np.zeros(hi - lo + 1, dtype=bool)
    excluded = spec.excluded(order) if spec.excludes else np.zeros(len(order), dtype=bool)
    in_domain = spec.in_domain(order) if spec.domain_splits else np.ones(len(order), dtype=bool)
    numbers = {}
    # Domain splits first (their pattern is the scarce part of the range), then unrestricted splits, then
    # those with exclusions (see the module doc). Every split takes the first free numbers of one
    # permutation, so a split drawn after a domain split holds few of the domain's numbers.
    for name, size in sorted(spec.splits, key=lambda split: _draw_order(spec, split[0])):
        allowed = ~used[order - lo]
        if name in spec.exclude_splits:
            allowed &= ~excluded
        if name in spec.domain_splits:
            allowed &= in_domain
        chosen = order[allowed][:size]
        if len(chosen) < size:
            raise ConfigError(
                f"split '{name}' wants {size} numbers but only {len(chosen)} of {lo}:{hi} remain "
                "(after earlier splits, exclusions and the domain pattern)"
            )
        used[chosen - lo] = True
        numbers[name] = sorted(int(n) for n in chosen)
    return {name: numbers[name] for name, _ in spec.splits}


def _speakers(spec: CorpusSpec, rng: np.random.Generator) -> dict[str, list[Speaker]]:
    names = [name for name, _ in spec.splits]
    groups = 1 if spec.speakers == "shared" else len(names)
    width = max(2, len(str(groups * spec.num_speakers)))
    per_group = [
        random_speakers(
            [f"spk{g * spec.num_speakers + k + 1:0{width}d}" for k in range(spec.num_speakers)], rng
        )
        for g in range(groups)
    ]
    return {name: per_group[0 if spec.speakers == "shared" else i] for i, name in enumerate(names)}


def plan_corpus(spec: CorpusSpec) -> dict[str, list[Utterance]]:
    """Utterances per split (in the spec's split order), each sorted by utterance id."""
    numbers_ss, speakers_ss, assign_ss = np.random.SeedSequence(spec.seed).spawn(3)
    numbers = _split_numbers(spec, np.random.default_rng(numbers_ss))
    speakers = _speakers(spec, np.random.default_rng(speakers_ss))
    assign_rng = np.random.default_rng(assign_ss)
    width = len(str(spec.num_range[1]))
    plan = {}
    for name, _ in spec.splits:
        # Shuffle, then deal round-robin: each speaker gets an equal share of random numbers.
        dealt = assign_rng.permutation(numbers[name])
        spk = speakers[name]
        utts = [
            Utterance(
                utt_id=f"{spk[i % len(spk)].spk_id}-{int(n):0{width}d}",
                number=int(n),
                split=name,
                speaker=spk[i % len(spk)],
                seed=int(np.random.SeedSequence([spec.seed, int(n)]).generate_state(1)[0]),
            )
            for i, n in enumerate(dealt)
        ]
        plan[name] = sorted(utts, key=lambda u: u.utt_id)
    return plan


def _write_speaker_tables(utterances: Sequence[Utterance], out_dir: Path) -> None:
    utt2spk = {u.utt_id: u.speaker.spk_id for u in utterances}
    write_kaldi_map(out_dir / "utt2spk", utt2spk)
    write_kaldi_map(out_dir / "spk2utt", spk2utt_from_utt2spk(utt2spk))
    write_kaldi_map(out_dir / "utt2num", {u.utt_id: str(u.number) for u in utterances})


def write_marker(path: Path, content: dict) -> None:
    with atomic_write(path) as f:
        json.dump(content, f, indent=1, sort_keys=True)
        f.write("\n")


def corpus_signature(spec: CorpusSpec, modalities: Sequence[Modality]) -> dict:
    return {
        "generator_version": GENERATOR_VERSION,
        "spec": asdict(spec),
        "modalities": {m.name: m.signature() for m in modalities},
    }


def read_marker(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def marker_matches(path: Path, signature: dict) -> bool:
    """True when the marker ``path`` records exactly ``signature`` (a finished dir of these settings)."""
    # Through JSON, so tuples compare equal to the lists read back.
    return read_marker(path) == json.loads(json.dumps(signature))


def is_complete(out: Path, signature: dict) -> bool:
    """True when ``out`` holds a finished corpus generated with exactly these settings."""
    if not marker_matches(out / COMPLETE, signature):
        return False
    return all((out / name / COMPLETE).is_file() for name, _ in signature["spec"]["splits"])


def _remove_old_splits(out: Path, keep: Sequence[str]) -> None:
    """Remove split dirs a previous generation wrote that the new settings no longer have."""
    previous = read_marker(out / COMPLETE).get("spec", {}).get("splits", [])
    for name, _ in previous:
        if name not in keep and (out / name / COMPLETE).is_file():
            shutil.rmtree(out / name)


def generate_corpus(out: Path, spec: CorpusSpec, modalities: Sequence[Modality]) -> bool:
    """Write the corpus under ``out``; returns False when it was already complete with these settings."""
    out = Path(out)
    names = [m.name for m in modalities]
    if len(set(names)) != len(names):
        raise ConfigError(f"modalities listed twice: {names}")
    signature = corpus_signature(spec, modalities)
    if is_complete(out, signature):
        return False
    out.mkdir(parents=True, exist_ok=True)
    _remove_old_splits(out, keep=[name for name, _ in spec.splits])
    # Nothing of the previous generation may look finished while its wavs are being replaced.
    (out / COMPLETE).unlink(missing_ok=True)
    for name, _ in spec.splits:
        (out / name / COMPLETE).unlink(missing_ok=True)
    for split, utterances in plan_corpus(spec).items():
        with atomic_dir(out / split) as building:
            for modality in modalities:
                modality.generate(utterances, building)
            _write_speaker_tables(utterances, building)
            write_marker(building / COMPLETE, {"split": split, "utterances": len(utterances)})
    write_marker(out / COMPLETE, signature)
    return True
