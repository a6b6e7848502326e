"""Token lists for ESPnet2 from Kaldi ``text`` files: SentencePiece subwords or characters.

    python -m espnet_ext.text.token_list --token_type bpe  --text data/train/text --out_dir D --vocab_size 500
    python -m espnet_ext.text.token_list --token_type char --text data/train/text --out_dir D

``bpe`` trains SentencePiece (``--model_type unigram`` or ``bpe``) on the transcripts (utterance ids
stripped) and writes ``D/bpe.model``; both write ``D/tokens.txt`` in ESPnet's order: ``<blank>``,
``<unk>``, the tokens, ``<sos/eos>``. Subwords keep SentencePiece's piece order; characters are
sorted by descending count (ties in order of first appearance), with a space written as ``<space>``,
exactly as ``espnet2.bin.tokenize_text --write_vocabulary true`` does. ``tokens.txt`` is written
last.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import sentencepiece as spm

from espnet_ext import smoke
from espnet_ext.data.datadir import iter_kaldi_entries, without_adjacent_repeats
from espnet_ext.errors import ConfigError, InputError, reports_input_errors
from espnet_ext.fileio import atomic_write

BLANK, UNK, SOS_EOS = "<blank>", "<unk>", "<sos/eos>"
SPACE = "<space>"

PathLike = str | Path


def read_transcripts(text_files: Iterable[PathLike]) -> Iterator[str]:
    """Transcripts of Kaldi ``<id> <words>`` files with whitespace runs collapsed (as ESPnet's ``--field 2-``),
    one at a time: a corpus of millions of sentences (WMT) is never held in memory. An id repeated on
    consecutive lines (a sorted table's duplicate) is refused; ids are not otherwise compared, as that
    would hold them."""
    for path in text_files:
        for entry in without_adjacent_repeats(path, iter_kaldi_entries(path, what="transcript")):
            text = " ".join(entry.value.split())
            if not text:  # only non-ASCII blanks after the id
                raise InputError("empty transcript", path=path, line=entry.line, key=entry.key)
            yield text


def with_special_symbols(tokens: Iterable[str]) -> list[str]:
    return [BLANK, UNK, *tokens, SOS_EOS]


def char_tokens(transcripts: Iterable[str], space_symbol: str = SPACE) -> list[str]:
    """Characters by descending count, ties in order of first appearance; space as ``space_symbol``."""
    counts = Counter(space_symbol if char == " " else char for text in transcripts for char in text)
    # Counter keeps first-appearance order and sorted() is stable, which breaks ties like ESPnet.
    return [char for char, _ in sorted(counts.items(), key=lambda item: -item[1])]


@dataclass
class SentencePieceOptions:
    vocab_size: int = 5000
    model_type: str = "unigram"
    character_coverage: float = 1.0
    # SentencePiece holds the sentences it samples (~26 bytes a character in unigram training) and refuses
    # more than 2^31 characters: ESPnet's 100M would hold a whole WMT corpus (~9M En-De lines: ~33 GB) or
    # fail on the multilingual one; 10M sampled sentences train a 32k-64k vocabulary as well.
    input_sentence_size: int = 10_000_000
    user_defined_symbols: list[str] = field(default_factory=list)
    hard_vocab_limit: bool = True
    max_sentencepiece_length: int = 16
    num_threads: int = 1  # one thread keeps training bit-for-bit reproducible
    seed: int = 1  # sentence sampling when there are more than input_sentence_size sentences


def train_sentencepiece(transcripts: Iterable[str], options: SentencePieceOptions) -> bytes:
    """A serialized SentencePiece model trained on ``transcripts``."""
    if options.model_type not in ("unigram", "bpe"):
        raise ConfigError(f"--model_type must be unigram or bpe, got {options.model_type!r}")
    spm.set_random_generator_seed(options.seed)
    model = io.BytesIO()
    kwargs = dict(
        sentence_iterator=iter(transcripts),
        model_writer=model,
        vocab_size=options.vocab_size,
        model_type=options.model_type,
        character_coverage=options.character_coverage,
        input_sentence_size=options.input_sentence_size,
        shuffle_input_sentence=True,
        hard_vocab_limit=str(options.hard_vocab_limit).lower(),
        max_sentencepiece_length=options.max_sentencepiece_length,
        num_threads=options.num_threads,
        minloglevel=2,  # keep job logs readable: warnings and errors only
    )
    if options.user_defined_symbols:
        kwargs["user_defined_symbols"] = list(options.user_defined_symbols)
    try:
        spm.SentencePieceTrainer.train(**kwargs)
    except (
        RuntimeError
    ) as e:  # e.g. "Vocabulary size too high (5000). Please set it to a value <= 120."
        raise ConfigError(f"SentencePiece training failed: {e}") from e
    return model.getvalue()


def sentencepiece_tokens(model: bytes | PathLike) -> list[str]:
    """The model's pieces in id order, without its control symbols and ``<unk>`` (ESPnet adds its own)."""
    processor = spm.SentencePieceProcessor()
    if isinstance(model, bytes):
        processor.LoadFromSerializedProto(model)
    else:
        processor.Load(str(model))
    return [
        processor.IdToPiece(i)
        for i in range(processor.GetPieceSize())
        if not (processor.IsControl(i) or processor.IsUnknown(i))
    ]


def write_token_list(tokens: Sequence[str], path: PathLike) -> None:
    duplicates = sorted(token for token, count in Counter(tokens).items() if count > 1)
    if duplicates:
        raise ConfigError(f"token list would contain duplicates: {duplicates}")
    with atomic_write(path) as f:
        f.writelines(f"{token}\n" for token in tokens)


def make_token_list(
    token_type: str,
    text_files: Sequence[PathLike],
    out_dir: PathLike,
    options: SentencePieceOptions | None = None,
    space_symbol: str = SPACE,
) -> Path:
    """Write ``out_dir/tokens.txt`` (and ``out_dir/bpe.model`` for bpe); returns the token list path."""
    out_dir = Path(out_dir)
    tokens_path = out_dir / "tokens.txt"
    tokens_path.unlink(missing_ok=True)  # a rerun must not leave an old list looking current
    # one pass that checks every line (an error names its file and line, not SentencePiece's), then the
    # tokens from a second one: nothing but the counts and SentencePiece's sample is held
    if not sum(1 for _ in read_transcripts(text_files)):
        raise InputError("no transcripts", path=", ".join(map(str, text_files)))
    if token_type == "char":
        tokens = char_tokens(read_transcripts(text_files), space_symbol)
    elif token_type == "bpe":
        model = train_sentencepiece(read_transcripts(text_files), options or SentencePieceOptions())
        with atomic_write(out_dir / "bpe.model", mode="wb") as f:
            f.write(model)
        tokens = sentencepiece_tokens(model)
    else:
        raise ConfigError(f"--token_type must be bpe or char, got {token_type!r}")
    write_token_list(with_special_symbols(tokens), tokens_path)
    return tokens_path


# SentencePiece's unigram trainer holds ~26 bytes a character of the sentences it samples (measured; see
# SentencePieceOptions); the rest of a job (Python, the reader) stays under this.
TRAINER_BYTES_PER_CHAR = 26
JOB_BASE_BYTES = 2 << 30
SAMPLE_BYTES = 1 << 20  # the first MiB tells the average line length


def job_memory(token_type: str, text_files: Sequence[PathLike], input_sentence_size: int) -> str:
    """The memory to ask the job backend for (Slurm's ``--mem``, e.g. ``35G``) to make the token list of
    ``text_files``: SentencePiece's sample of at most ``input_sentence_size`` sentences at the trainer's
    bytes per character, the average line length taken from the first MiB (a cluster's default memory per
    job is a few GB: WMT's 10M sampled sentences take ~30 GB). Reads only the files' sizes and first MiB."""
    if token_type != "bpe":
        return f"{JOB_BASE_BYTES >> 30}G"  # character counts only
    total = sum(Path(p).stat().st_size for p in text_files)
    with open(text_files[0], "rb") as f:
        head = f.read(SAMPLE_BYTES)
    line_bytes = len(head) / max(1, head.count(b"\n"))
    sampled = min(total, input_sentence_size * line_bytes)  # bytes of the sampled sentences
    need = JOB_BASE_BYTES + sampled * TRAINER_BYTES_PER_CHAR
    return f"{-(-int(need) // (1 << 30))}G"


def _str2bool(value: str) -> bool:
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def get_parser() -> argparse.ArgumentParser:
    defaults = SentencePieceOptions()
    parser = argparse.ArgumentParser(
        prog="python -m espnet_ext.text.token_list",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--token_type", choices=("bpe", "char"), required=True)
    parser.add_argument(
        "--text", nargs="+", required=True, help="Kaldi text files: '<id> <transcript>' lines"
    )
    parser.add_argument("--out_dir", type=Path, required=True)
    parser.add_argument("--space_symbol", default=SPACE, help="char: what a space becomes")
    spm_group = parser.add_argument_group("SentencePiece (bpe), passed through to its trainer")
    spm_group.add_argument("--vocab_size", type=int, default=defaults.vocab_size)
    spm_group.add_argument("--model_type", choices=("unigram", "bpe"), default=defaults.model_type)
    spm_group.add_argument("--character_coverage", type=float, default=defaults.character_coverage)
    spm_group.add_argument("--input_sentence_size", type=int, default=defaults.input_sentence_size)
    spm_group.add_argument(
        "--user_defined_symbols",
        default="",
        help="comma-separated symbols kept whole (e.g. noise tags)",
    )
    spm_group.add_argument("--hard_vocab_limit", type=_str2bool, default=defaults.hard_vocab_limit)
    spm_group.add_argument(
        "--max_sentencepiece_length", type=int, default=defaults.max_sentencepiece_length
    )
    spm_group.add_argument("--num_threads", type=int, default=defaults.num_threads)
    spm_group.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument(
        "--print_job_memory",
        action="store_true",
        help="print the memory the job making this token list needs (e.g. 35G) and exit",
    )
    return parser


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    args = get_parser().parse_args(argv)
    if args.print_job_memory:
        print(job_memory(args.token_type, args.text, args.input_sentence_size))
        return
    options = SentencePieceOptions(
        vocab_size=args.vocab_size,
        model_type=args.model_type,
        character_coverage=args.character_coverage,
        input_sentence_size=args.input_sentence_size,
        user_defined_symbols=[s for s in args.user_defined_symbols.split(",") if s],
        # a smoke run's few sentences cannot give a real vocabulary size: a soft limit (espnet_ext.smoke)
        hard_vocab_limit=args.hard_vocab_limit and not smoke.enabled(),
        max_sentencepiece_length=args.max_sentencepiece_length,
        num_threads=args.num_threads,
        seed=args.seed,
    )
    path = make_token_list(args.token_type, args.text, args.out_dir, options, args.space_symbol)
    with open(path, encoding="utf-8") as f:
        count = sum(1 for _ in f)
    print(f"token_list: {count} tokens ({args.token_type}) -> {path}")


if __name__ == "__main__":
    sys.exit(main())
