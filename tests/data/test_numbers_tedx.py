"""Numbers-world mTEDx talks: unequal amounts per language, each language's words and voice, read by the
real mTEDx reader."""

import os

import pytest
import soundfile

from espnet_ext.data import mtedx
from espnet_ext.data.datadir import read_kaldi_map
from espnet_ext.data.numbers import tedx
from espnet_ext.data.numbers.words import number_to_words
from espnet_ext.errors import ConfigError

SPEC = tedx.TedxSpec(
    train_sizes=(("es", 6), ("it", 3)), valid_size=2, test_size=2, num_speakers=1,
    segments_per_talk=(2, 4),
)  # fmt: skip


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("tedx")
    tedx.generate(out, SPEC, nj=2)
    data = out / "data"
    mtedx.prepare(out, ["es", "it"], mtedx.SPLITS, data)
    return out, data


def test_unequal_training_amounts_and_equal_test_sets(corpus):
    _, data = corpus
    lang = read_kaldi_map(data / "train" / "lang")
    assert sorted(lang.values()).count("es") == 6 and sorted(lang.values()).count("it") == 3
    for split, size in (("valid", 2), ("test", 2)):
        tags = list(read_kaldi_map(data / split / "lang").values())
        assert tags.count("es") == tags.count("it") == size
    assert sorted(read_kaldi_map(data / "test_it" / "lang").values()) == ["it", "it"]


def test_transcripts_are_number_words_of_each_language(corpus):
    _, data = corpus
    text, lang = (read_kaldi_map(data / "train" / name) for name in ("text", "lang"))
    words = {lg: {number_to_words(n, lg) for n in range(1000)} for lg in ("es", "it")}
    assert all(text[u] in words[lang[u]] for u in text)
    assert "uno" not in {w for u in text if lang[u] == "it" for w in text[u].split()}


def test_segments_cut_speech_out_of_the_talks(corpus):
    _, data = corpus
    wav = read_kaldi_map(data / "train" / "wav.scp")
    for utt, seg in read_kaldi_map(data / "train" / "segments").items():
        talk, start, end = seg.split()
        audio, rate = soundfile.read(wav[talk], dtype="int16")
        piece = audio[round(float(start) * rate) : round(float(end) * rate)]
        assert rate == 16000 and len(piece) > 0.3 * rate and abs(piece).max() > 1000, utt


def test_a_finished_corpus_is_kept_and_bad_specs_refused(corpus):
    out, _ = corpus
    flac = next((out / "es-es" / "data" / "train" / "wav").iterdir())
    before = os.stat(flac).st_mtime_ns
    tedx.generate(out, SPEC)
    assert os.stat(flac).st_mtime_ns == before
    with pytest.raises(ConfigError, match="train_sizes"):
        tedx.TedxSpec(train_sizes=(("en", 3),))
    with pytest.raises(ConfigError, match="train_sizes"):
        tedx.TedxSpec(train_sizes=(("es", 3), ("es", 4)))
