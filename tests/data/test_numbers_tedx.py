"""Numbers-world mTEDx talks: unequal amounts per language, each language's words and voice, read by the
real mTEDx reader."""

import dataclasses
import os
from pathlib import Path

import pytest
import soundfile

from espnet_ext.data import mtedx
from espnet_ext.data.datadir import read_kaldi_map
from espnet_ext.data.numbers import tedx
from espnet_ext.data.numbers.modality import Speaker, Utterance
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
    with pytest.raises(ConfigError, match="domain must be one of tedx other"):
        tedx.TedxSpec(domain="covost")


def test_asr_other_domain_has_its_own_numbers_and_voices(corpus, tmp_path):
    """Multi-domain ASR (Table 3): the other domain's es talks, read by the same reader."""
    _, data = corpus
    other = dataclasses.replace(SPEC, train_sizes=(("es", 6),), domain="other")
    tedx.generate(tmp_path, other)
    mtedx.prepare(tmp_path, ["es"], ["train"], tmp_path / "data")
    texts = [read_kaldi_map(d / "train" / "text") for d in (data, tmp_path / "data")]
    tedx_es = {u: t for u, t in texts[0].items() if u.startswith("es")}
    assert len(texts[1]) == 6 and sorted(texts[1].values()) != sorted(tedx_es.values())
    settings = (tmp_path / "es-es" / ".complete").read_text()
    assert '"domain": "other"' in settings


# Speech translation: directions, zero-shot directions without training data, a second domain

ST_SPEC = tedx.TedxSTSpec(
    train_sizes=(("es-en", 4), ("es-it", 2), ("it-en", 0)), valid_size=2, test_size=2,
    num_speakers=1, segments_per_talk=(2, 3),
)  # fmt: skip


@pytest.fixture(scope="module")
def st_corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("tedx_st")
    tedx.generate_st(out, ST_SPEC, nj=2)
    data = out / "data"
    mtedx.prepare_st(out, ["es-en", "es-it"], ["es-en", "es-it", "it-en"], data)
    return out, data


def test_st_translations_are_the_same_number_in_the_target_language(st_corpus):
    _, data = st_corpus
    src, tgt, direction = (
        read_kaldi_map(data / "train" / name) for name in ("text.src", "text.tgt", "direction")
    )
    assert sorted(direction.values()) == ["es-en"] * 4 + ["es-it"] * 2  # unequal amounts
    by_words = {
        lang: {number_to_words(n, lang): n for n in range(1000)} for lang in ("es", "it", "en")
    }
    for utt, pair in direction.items():
        s, t = pair.split("-")
        assert by_words[s][src[utt]] == by_words[t][tgt[utt]], (
            utt
        )  # e.g. "doscientos tres" -> "two hundred three"


def test_zero_shot_direction_has_only_valid_and_test(st_corpus):
    out, data = st_corpus
    assert sorted(p.name for p in (out / "it-en" / "data").iterdir()) == ["test", "valid"]
    assert sorted(p.name for p in (out / "es-en" / "data").iterdir()) == ["test", "train", "valid"]
    assert sorted(read_kaldi_map(data / "test_it-en" / "src_lang").values()) == ["it", "it"]
    text = read_kaldi_map(data / "test_it-en" / "text.src")
    assert all(w in {number_to_words(n, "it") for n in range(1000)} for w in text.values())


def test_st_corpus_is_deterministic(st_corpus, tmp_path):
    out, _ = st_corpus
    tedx.generate_st(tmp_path, ST_SPEC, nj=1)
    for direction in ("es-en", "it-en"):
        for split in ("valid", "test"):
            txt = Path(direction) / "data" / split / "txt"
            for ext in ("yaml", *direction.split("-")):
                name = txt / f"{split}.{ext}"
                assert (tmp_path / name).read_bytes() == (out / name).read_bytes()
            for flac in (out / direction / "data" / split / "wav").iterdir():
                other = tmp_path / direction / "data" / split / "wav" / flac.name
                assert (soundfile.read(other)[0] == soundfile.read(flac)[0]).all()


def test_other_domain_other_voices_and_a_faster_rate():
    spk = Utterance("spk1-0007", 7, "train", Speaker("spk1", "f2", 150, 50), seed=3)
    voice, rate, pitch = tedx.domain_voice("es", spk, "tedx")
    other_voice, other_rate, other_pitch = tedx.domain_voice("es", spk, "other")
    assert voice == "es+f2" and other_voice.startswith("es+klatt")
    assert other_rate == rate + tedx.OTHER_DOMAIN_RATE and other_pitch == pitch
    # the same number by the same speaker in the other domain is shorter (faster speech)
    assert len(tedx._speech("es", spk, "other")) < 0.9 * len(tedx._speech("es", spk, "tedx"))


def test_st_default_directions_are_the_papers(tmp_path):
    sizes = dict(tedx.ST_TRAIN_SIZES)
    assert {d for d, n in sizes.items() if n > 0} == set(mtedx.TRAIN_DIRECTIONS)
    assert {d for d, n in sizes.items() if n == 0} == set(mtedx.ZERO_SHOT_DIRECTIONS)
    assert len(set(n for n in sizes.values() if n > 0)) > 2  # unequal amounts
    with pytest.raises(ConfigError, match="'en-es' is not an mTEDx ST direction"):
        tedx.TedxSTSpec(train_sizes=(("en-es", 3),))
    with pytest.raises(ConfigError, match="domain must be one of tedx other"):
        tedx.TedxSTSpec(domain="covost")
    assert tedx.main(["--out", str(tmp_path), "--st_train_sizes", "es-xx=3"]) == 1
    assert not any(tmp_path.iterdir())
