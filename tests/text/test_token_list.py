"""Token lists: SentencePiece's own vocabulary, ESPnet's tokenizers, ESPnet's char vocabulary writer."""

import os
import subprocess
import sys

import pytest
import sentencepiece as spm
from num2words import num2words

from espnet_ext.errors import ConfigError, InputError
from espnet_ext.text.token_list import SentencePieceOptions, make_token_list, read_transcripts


def write_text(path, numbers, lang="en", prefix="utt"):
    lines = [
        f"{prefix}{n:05d} {num2words(n, lang=lang).replace('-', ' ').replace(',', '')}\n"
        for n in numbers
    ]
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.fixture
def text_file(tmp_path):
    return write_text(tmp_path / "text", range(0, 1200, 7))


def read_list(path):
    return path.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_bpe_list_is_sentencepiece_vocabulary(tmp_path, text_file, model_type):
    out = tmp_path / "bpe"
    make_token_list(
        "bpe", [text_file], out, SentencePieceOptions(vocab_size=45, model_type=model_type)
    )
    processor = spm.SentencePieceProcessor(model_file=str(out / "bpe.model"))
    assert processor.GetPieceSize() == 45
    # ESPnet's asr.sh: <blank>, <unk>, the .vocab file without its first three lines (<unk> <s>
    # </s>), <sos/eos>.
    pieces = [processor.IdToPiece(i) for i in range(3, processor.GetPieceSize())]
    assert read_list(out / "tokens.txt") == ["<blank>", "<unk>", *pieces, "<sos/eos>"]
    assert [processor.IdToPiece(i) for i in range(3)] == ["<unk>", "<s>", "</s>"]


def test_bpe_round_trip_and_espnet_tokenizer(tmp_path, text_file):
    from espnet2.text.build_tokenizer import build_tokenizer
    from espnet2.text.token_id_converter import TokenIDConverter

    out = tmp_path / "bpe"
    make_token_list("bpe", [text_file], out, SentencePieceOptions(vocab_size=50))
    processor = spm.SentencePieceProcessor(model_file=str(out / "bpe.model"))
    for text in read_transcripts([text_file]):
        assert processor.DecodeIds(processor.EncodeAsIds(text)) == text

    tokenizer = build_tokenizer("bpe", str(out / "bpe.model"))
    converter = TokenIDConverter(str(out / "tokens.txt"))
    sentence = "nine hundred ninety nine"  # not in the training text (multiples of seven)
    tokens = tokenizer.text2tokens(sentence)
    ids = converter.tokens2ids(tokens)
    assert converter.unk_id == 1 and 1 not in ids
    assert 0 not in ids and len(converter.token_list) - 1 not in ids  # never <blank> or <sos/eos>
    assert tokenizer.tokens2text(converter.ids2tokens(ids)) == sentence


def test_user_defined_symbols_stay_whole(tmp_path, text_file):
    with open(text_file, "a", encoding="utf-8") as f:
        f.write("uttnoise <noise> one two\n")
    out = tmp_path / "bpe"
    make_token_list(
        "bpe",
        [text_file],
        out,
        SentencePieceOptions(vocab_size=45, user_defined_symbols=["<noise>"]),
    )
    assert "<noise>" in read_list(out / "tokens.txt")
    processor = spm.SentencePieceProcessor(model_file=str(out / "bpe.model"))
    assert "<noise>" in processor.EncodeAsPieces("<noise> one")


def test_bpe_is_deterministic_and_reads_several_files(tmp_path):
    english = write_text(tmp_path / "text.en", range(0, 900, 11))
    german = write_text(tmp_path / "text.de", range(3, 900, 13), lang="de", prefix="de")
    options = SentencePieceOptions(
        vocab_size=80, input_sentence_size=101
    )  # sampling must be seeded too
    make_token_list("bpe", [english, german], tmp_path / "a", options)
    make_token_list("bpe", [english, german], tmp_path / "b", options)
    assert (tmp_path / "a" / "bpe.model").read_bytes() == (
        tmp_path / "b" / "bpe.model"
    ).read_bytes()
    assert (tmp_path / "a" / "tokens.txt").read_bytes() == (
        tmp_path / "b" / "tokens.txt"
    ).read_bytes()
    # Both languages are covered: German compounds segment without <unk>.
    processor = spm.SentencePieceProcessor(model_file=str(tmp_path / "a" / "bpe.model"))
    assert processor.unk_id() not in processor.EncodeAsIds("siebenhundertneun")


def test_char_list_equals_espnet_tokenize_text(tmp_path):
    from espnet2.bin.tokenize_text import tokenize
    from espnet2.text.char_tokenizer import CharTokenizer

    text = tmp_path / "text"
    # Irregular spacing and non-ASCII characters; counts with ties.
    text.write_text("a1 héllo  wörld\nb2   zebra   ß\nc3 hello\td\n", encoding="utf-8")
    make_token_list("char", [text], tmp_path / "char")
    ours = read_list(tmp_path / "char" / "tokens.txt")

    reference = tmp_path / "espnet_tokens.txt"
    tokenize(
        input=str(text),
        output=str(reference),
        field="2-",
        delimiter=None,
        token_type="char",
        space_symbol="<space>",
        non_linguistic_symbols=None,
        bpemodel=None,
        log_level="ERROR",
        write_vocabulary=True,
        vocabulary_size=0,
        remove_non_linguistic_symbols=False,
        cutoff=0,
        add_symbol=["<blank>:0", "<unk>:1", "<sos/eos>:-1"],
        cleaner=None,
        g2p=None,
        add_nonsplit_symbol=[],
    )
    assert ours == read_list(reference)
    assert ours[0] == "<blank>" and ours[1] == "<unk>" and ours[-1] == "<sos/eos>"
    tokenizer = CharTokenizer()
    produced = {t for line in read_transcripts([text]) for t in tokenizer.text2tokens(line)}
    assert set(ours[2:-1]) == produced
    assert "<space>" in ours and " " not in ours


def test_cli(tmp_path, text_file):
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "espnet_ext.text.token_list",
            "--token_type",
            "bpe",
            "--text",
            str(text_file),
            "--out_dir",
            str(tmp_path / "out"),
            "--vocab_size",
            "50",
            "--model_type",
            "bpe",
            "--user_defined_symbols",
            "<noise>,<laugh>",
            "--hard_vocab_limit",
            "false",
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    assert run.returncode == 0, run.stderr
    tokens = read_list(tmp_path / "out" / "tokens.txt")
    assert tokens[2:4] == ["<noise>", "<laugh>"] and len(tokens) == 50
    assert "50 tokens" in run.stdout


def test_empty_and_non_utf8_transcripts(tmp_path, text_file):
    with open(text_file, "a", encoding="utf-8") as f:
        f.write("uttempty   \n")
    with pytest.raises(
        InputError, match=rf"text:{len(read_list(text_file))}: key 'uttempty': empty transcript"
    ):
        make_token_list("char", [text_file], tmp_path / "out")
    latin1 = tmp_path / "latin1"
    latin1.write_bytes("u1 ok\nu2 caf\xe9\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"latin1:2: not valid UTF-8"):
        make_token_list("bpe", [latin1], tmp_path / "out")
    assert not (tmp_path / "out" / "tokens.txt").exists()


def test_vocab_too_large_is_refused_and_leaves_nothing(tmp_path, text_file):
    out = tmp_path / "out"
    out.mkdir()
    (out / "tokens.txt").write_text("stale\n")
    with pytest.raises(ConfigError, match="Vocabulary size too high"):
        make_token_list("bpe", [text_file], out, SentencePieceOptions(vocab_size=5000))
    assert not (out / "tokens.txt").exists() and not (out / "bpe.model").exists()


def test_a_corpus_streams_to_sentencepiece_checked_first(tmp_path, text_file, monkeypatch):
    # WMT's millions of sentences: never a list in memory; SentencePiece samples at most 10M of them
    from espnet_ext.text import token_list

    seen = {}

    def record(transcripts, options):
        seen["type"], seen["count"] = type(transcripts), sum(1 for _ in transcripts)
        seen["cap"] = options.input_sentence_size
        raise RuntimeError("recorded")

    monkeypatch.setattr(token_list, "train_sentencepiece", record)
    with pytest.raises(RuntimeError, match="recorded"):
        make_token_list("bpe", [text_file], tmp_path / "bpe")
    assert seen["type"] is not list and seen["count"] == len(read_list(text_file))
    assert seen["cap"] == 10_000_000
    # a bad line is reported (file and line) before SentencePiece reads anything
    bad = tmp_path / "bad"
    bad.write_text(text_file.read_text() + "utt99999 \u00a0\n", encoding="utf-8")
    seen.clear()
    with pytest.raises(InputError, match="empty transcript"):
        make_token_list("bpe", [bad], tmp_path / "bad_bpe")
    assert not seen


def test_transcripts_stream_and_refuse_a_repeated_id(tmp_path, text_file):
    """One line at a time (no table held: WMT's millions of sentences): a line appended after the
    first transcript was read is still seen, here a sorted table's duplicate, refused at its line."""
    transcripts = read_transcripts([text_file])
    assert next(transcripts) == "zero"
    with open(text_file, "a", encoding="utf-8") as f:
        f.write("utt01197 one again\n")
    with pytest.raises(
        InputError, match=r"text:173: key 'utt01197': duplicate id \(first at line 172\)"
    ):
        list(transcripts)


def test_the_job_asks_for_the_memory_sentencepiece_holds(tmp_path):
    from espnet_ext.text.token_list import job_memory

    line = "utt-000001 " + "x" * 89 + "\n"  # 101 bytes a line
    corpus = tmp_path / "text"
    corpus.write_text(line * 20_000)
    # the whole corpus sampled: 2.02 MB x 26 + 2 GiB -> 3G; a 5,000-sentence sample: 0.5 MB x 26 -> still 3G
    assert job_memory("bpe", [corpus], 10_000_000) == "3G"
    assert job_memory("char", [corpus], 10_000_000) == "2G"
    # WMT-like: 80M lines of ~125 bytes, SentencePiece's 10M-sentence sample: 1.25 GB x 26 + 2 GiB
    big = tmp_path / "big"
    big.write_text(("u " + "y" * 122 + "\n") * 10_000)
    with open(big, "r+b") as f:
        f.truncate(80_000_000 * 125)  # sparse: the size counts, only the first MiB is read
    assert job_memory("bpe", [big], 10_000_000) == "33G"  # ceil((2 GiB + 32.5 GB) / GiB)
