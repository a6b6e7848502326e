"""Command line of the numbers-world generator: ``python -m espnet_ext.data.numbers --help``."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from espnet_ext.data.numbers.corpus import (
    DIGIT_DOMAINS,
    CorpusSpec,
    comma_list,
    generate_corpus,
    name_sizes,
    resolve_domain,
)
from espnet_ext.data.numbers.modality import Modality
from espnet_ext.data.numbers.speech import SpeechModality
from espnet_ext.data.numbers.text import PhonemeModality, TextModality
from espnet_ext.data.numbers.video import VideoModality
from espnet_ext.data.numbers.words import LANGUAGES
from espnet_ext.errors import reports_input_errors

# name -> (what it writes, how to build it from the parsed options). A new modality adds one line here.
MODALITIES: dict[str, tuple[str, Callable[[argparse.Namespace], Modality]]] = {
    "text": (
        "number words: 'text' (first language) and 'text.<lang>' for each language",
        lambda a: TextModality(langs=a.langs, compound_langs=a.compound_langs),
    ),
    "speech": (
        "espeak-ng speech of the first language, 16 kHz wavs + 'wav.scp'",
        lambda a: SpeechModality(
            lang=a.langs[0], wav_dir=a.wav_dir or a.out / "wav", nj=a.nj, snr_db=a.snr_db
        ),
    ),
    "phonemes": (
        "'phn': ARPAbet phones of the English words (g2p_en, offline NLTK data)",
        lambda a: PhonemeModality(nltk_data=a.nltk_data),
    ),
    "video": (
        "lip videos of the first language's speech: 88x88 grey, 25 fps, '.npy' + 'video.scp'",
        lambda a: VideoModality(lang=a.langs[0], video_dir=a.out / "video", nj=a.nj),
    ),
}


def _range(text: str) -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected lo:hi (inclusive), got '{text}'") from None
    return lo, hi


def _snr_range(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected lo:hi in dB, e.g. 0:10, got '{text}'") from None
    if not lo <= hi:
        raise argparse.ArgumentTypeError(f"expected lo <= hi, got '{text}'")
    return lo, hi


def _digits(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in comma_list(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected digits like 7 or 3,7, got '{text}'") from None


def get_parser() -> argparse.ArgumentParser:
    modalities = "\n".join(f"  {name:9s} {text}" for name, (text, _) in MODALITIES.items())
    parser = argparse.ArgumentParser(
        prog="python -m espnet_ext.data.numbers",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="""\
Generate a deterministic 'numbers world' mini corpus: each utterance says one integer.

Writes Kaldi-style data dirs <out>/<split>/ (text, text.<lang>, wav.scp, phn, utt2spk,
spk2utt, utt2num; sorted by utterance id, UTF-8), <out>/<split>/.complete when a split is
whole and <out>/.complete when the corpus is. Numbers are disjoint across splits;
utterance ids are <speaker>-<number>. Rerunning with the same options does nothing;
other options regenerate the corpus.""",
        epilog=f"""\
modalities:
{modalities}

examples:
  ASR corpus:        --out data/mini --langs en --modalities speech,text --nj 2
  MT corpus (text):  --out data/mt --langs de,en --modalities text --splits train=6000,dev=300,test=300
  LM text, wider:    --out data/lm --modalities text --range 0:99999 --splits train=50000
  held-out pattern:  --exclude_last_digit 7   (no number ending in 7 in train)
  held-out word:     --exclude_words seven    (no "seven" in train; "seventy" stays)
  test domain:       --domain_digits repeated_tens --domain_splits dev,test  (3,335; 1,557; 220)""",
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="corpus root; one data dir per split below it"
    )
    parser.add_argument(
        "--langs",
        type=comma_list,
        default="en",
        help=f"comma-separated languages of {','.join(LANGUAGES)}; the first is spoken and goes to 'text' "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--compound_langs",
        type=comma_list,
        default="",
        help="languages of --langs whose number words stay one compound word ('dreihundertzwölf'); the "
        "others are split at their number morphemes ('drei hundert zwölf') so that targets have n-grams "
        "for BLEU (default: none)",
    )
    parser.add_argument(
        "--modalities",
        type=comma_list,
        default="speech,text",
        help=f"comma-separated, of {','.join(MODALITIES)}; 'text' is always written (default: %(default)s)",
    )
    parser.add_argument(
        "--splits",
        type=name_sizes,
        default="train=2000,dev=200,test=200",
        help="split names and sizes (default: %(default)s)",
    )
    parser.add_argument(
        "--range",
        dest="num_range",
        type=_range,
        default="0:9999",
        help="inclusive range lo:hi the numbers are drawn from (default: %(default)s)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of everything random: numbers, speakers, prosody (default: %(default)s)",
    )
    parser.add_argument(
        "--exclude_last_digit",
        type=_digits,
        default="",
        help="hold numbers ending in these digits (e.g. 7 or 3,7) out of --exclude_splits",
    )
    parser.add_argument(
        "--exclude_words",
        type=comma_list,
        default="",
        help="hold numbers whose words (in --exclude_words_lang) contain one of these whole words "
        "out of --exclude_splits",
    )
    parser.add_argument(
        "--exclude_words_lang",
        default="en",
        help="language whose words --exclude_words names (default: %(default)s)",
    )
    parser.add_argument(
        "--exclude_splits",
        type=comma_list,
        default="train",
        help="splits that --exclude_last_digit and --exclude_words apply to (default: %(default)s)",
    )
    parser.add_argument(
        "--domain_digits",
        default="",
        help="a regular expression the decimal digits of every number of --domain_splits must match "
        f"(whole), or a named one: {', '.join(f'{k} = {v}' for k, v in DIGIT_DOMAINS.items())}",
    )
    parser.add_argument(
        "--domain_splits",
        type=comma_list,
        default="",
        help="splits whose numbers follow --domain_digits (e.g. dev,test: a test domain)",
    )
    parser.add_argument(
        "--speakers",
        choices=("disjoint", "shared"),
        default="disjoint",
        help="disjoint: every split has its own speakers (unseen test voices, as in LibriSpeech); "
        "shared: the same speakers in every split (default: %(default)s)",
    )
    parser.add_argument(
        "--num_speakers", type=int, default=12, help="speakers per split (default: %(default)s)"
    )
    parser.add_argument(
        "--wav_dir",
        type=Path,
        default=None,
        help="where wavs go, as <wav_dir>/<split>/<utt>.wav (default: <out>/wav)",
    )
    parser.add_argument(
        "--snr_db",
        type=_snr_range,
        default=None,
        help="speech: add white noise at a signal-to-noise ratio drawn per utterance from lo:hi dB "
        "(default: clean audio)",
    )
    parser.add_argument(
        "--nltk_data",
        type=Path,
        default=None,
        help="offline NLTK data dir for phonemes, built there if needed (default: $NLTK_DATA)",
    )
    parser.add_argument(
        "--nj",
        type=int,
        default=1,
        help="parallel speech synthesis processes (default: %(default)s)",
    )
    return parser


@reports_input_errors
def main(argv=None) -> None:
    parser = get_parser()
    args = parser.parse_args(argv)
    names = list(dict.fromkeys(("text",) + tuple(args.modalities)))
    unknown = [name for name in names if name not in MODALITIES]
    if unknown:
        parser.error(
            f"unknown modalities {', '.join(unknown)}; choose from {', '.join(MODALITIES)}"
        )
    start = time.time()
    spec = CorpusSpec(
        splits=args.splits,
        num_range=args.num_range,
        seed=args.seed,
        exclude_last_digits=args.exclude_last_digit,
        exclude_words=args.exclude_words,
        exclude_words_lang=args.exclude_words_lang,
        exclude_splits=args.exclude_splits,
        domain_digits=resolve_domain(args.domain_digits),
        domain_splits=args.domain_splits,
        speakers=args.speakers,
        num_speakers=args.num_speakers,
    )
    modalities = [MODALITIES[name][1](args) for name in names]
    generated = generate_corpus(args.out, spec, modalities)
    sizes = ", ".join(f"{name} {size}" for name, size in spec.splits)
    state = (
        f"generated in {time.time() - start:.1f} s"
        if generated
        else "already complete, nothing to do"
    )
    print(f"{args.out}: {sizes} ({'+'.join(names)}): {state}")


if __name__ == "__main__":
    sys.exit(main())
