"""Speech modality of the numbers world: espeak-ng audio at 16 kHz, deterministic, with speaker variety."""

import shutil
import wave
from pathlib import Path

import numpy as np
import pytest

from espnet_ext.data.datadir import validate_data_dir
from espnet_ext.data.numbers import (
    CorpusSpec,
    SpeechModality,
    TextModality,
    generate_corpus,
    plan_corpus,
    speech,
)
from espnet_ext.data.numbers.modality import Speaker, Utterance
from espnet_ext.data.numbers.words import LANGUAGES, number_to_words
from espnet_ext.errors import InputError

pytestmark = pytest.mark.skipif(
    shutil.which("espeak-ng") is None,
    reason="espeak-ng is not installed (Debian package espeak-ng, see tools/apt-packages.txt)",
)

SPEC = CorpusSpec(
    splits=(("train", 6), ("dev", 2), ("test", 2)), num_range=(0, 9999), seed=5, num_speakers=3
)


def read_wav(path) -> tuple:
    with wave.open(str(path), "rb") as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getcomptype()) == (1, 2, "NONE")
        return w.getframerate(), np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")


def read_table(path: Path) -> dict:
    return dict(line.split(" ", 1) for line in path.read_text(encoding="utf-8").splitlines())


def make_corpus(out: Path, spec=SPEC, nj=1, lang="en"):
    modalities = [
        TextModality(langs=(lang,)),
        SpeechModality(lang=lang, wav_dir=out / "wav", nj=nj),
    ]
    return generate_corpus(out, spec, modalities)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("speech") / "mini"
    make_corpus(out, nj=2)
    return out


def test_wav_scp_lists_readable_16khz_wavs_of_plausible_length(corpus):
    for split, size in SPEC.splits:
        assert len(validate_data_dir(corpus / split, check_audio=True)) == size
        scp = read_table(corpus / split / "wav.scp")
        text = read_table(corpus / split / "text")
        assert list(scp) == sorted(scp) == sorted(text) and len(scp) == size
        for utt, path in scp.items():
            assert Path(path).is_absolute() and Path(path) == corpus / "wav" / split / f"{utt}.wav"
            rate, samples = read_wav(path)
            assert rate == 16000
            seconds = len(samples) / rate
            # espeak-ng speaks ~2.5 words per second at these rates; allow generous margins.
            words = len(text[utt].split())
            assert 0.2 * words < seconds < 1.2 * words + 1.0, (utt, text[utt], seconds)
            assert np.sqrt(np.mean(samples.astype(float) ** 2)) > 300  # speech, not silence
            assert np.abs(samples).max() < 32767  # no clipping


def test_same_seed_gives_identical_bytes_whatever_nj(corpus, tmp_path):
    make_corpus(tmp_path / "again", nj=1)
    for split, _ in SPEC.splits:
        for name in ("text", "utt2spk", "spk2utt", "utt2num"):
            assert (corpus / split / name).read_bytes() == (
                tmp_path / "again" / split / name
            ).read_bytes()
        ours = read_table(corpus / split / "wav.scp")
        again = read_table(tmp_path / "again" / split / "wav.scp")
        assert list(ours) == list(again)
        for utt in ours:
            assert Path(ours[utt]).read_bytes() == Path(again[utt]).read_bytes(), utt


def test_other_seed_gives_other_corpus(corpus, tmp_path):
    make_corpus(tmp_path / "other", CorpusSpec(**{**SPEC.__dict__, "seed": 6}))
    ours = {p.name: p.read_bytes() for p in (corpus / "wav" / "train").glob("*.wav")}
    other = {p.name: p.read_bytes() for p in (tmp_path / "other" / "wav" / "train").glob("*.wav")}
    assert ours.keys() != other.keys()
    assert not set(ours.values()) & set(other.values())


def test_rerun_is_a_no_op_and_regeneration_removes_stale_wavs(corpus, tmp_path):
    out = tmp_path / "c"
    small = CorpusSpec(splits=(("train", 3),), seed=1, num_speakers=1)
    assert make_corpus(out, small) is True
    first = sorted((out / "wav" / "train").iterdir())
    stamp = [p.stat().st_mtime_ns for p in first]
    assert make_corpus(out, small) is False
    assert [p.stat().st_mtime_ns for p in first] == stamp
    assert make_corpus(out, CorpusSpec(splits=(("train", 3),), seed=2, num_speakers=1)) is True
    now = sorted((out / "wav" / "train").iterdir())
    assert set(now).isdisjoint(first) and len(now) == 3
    assert sorted(Path(p) for p in read_table(out / "train" / "wav.scp").values()) == now


def test_speakers_sound_different_and_prosody_jitters(corpus):
    text = "three hundred and twelve"
    speakers = speech.random_speakers(["a", "b", "c"], np.random.default_rng(0))
    assert len({s.variant for s in speakers}) == 3
    audio = [speech.synthesize(text, f"en-us+{s.variant}", s.rate, s.pitch) for s in speakers]
    for i in range(3):
        for j in range(i + 1, 3):
            assert len(audio[i]) != len(audio[j]) or not np.array_equal(audio[i], audio[j])
    # Same voice variant, different pitch: still different audio.
    low = speech.synthesize(text, "en-us+m1", 160, 30)
    high = speech.synthesize(text, "en-us+m1", 160, 70)
    assert not np.array_equal(low, high)
    # Per utterance, rate and pitch vary around the speaker's within the jitter.
    spk = Speaker("s", "m1", 160, 50)
    prosody = {
        speech.utterance_prosody(Utterance(f"s-{k}", k, "train", spk, seed=k)) for k in range(30)
    }
    assert len(prosody) > 10
    assert all(
        abs(r - 160) <= speech.RATE_JITTER and abs(p - 50) <= speech.PITCH_JITTER
        for r, p in prosody
    )
    # In the corpus, each split's speakers use several voice variants.
    plan = plan_corpus(SPEC)
    assert len({u.speaker.variant for u in plan["train"]}) == 3


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_language_speaks(lang):
    short = speech.synthesize(number_to_words(7, lang), f"{speech.ESPEAK_VOICES[lang]}+m1", 160, 50)
    long = speech.synthesize(
        number_to_words(4321, lang), f"{speech.ESPEAK_VOICES[lang]}+m1", 160, 50
    )
    assert np.sqrt(np.mean(long.astype(float) ** 2)) > 300
    assert (
        len(long) > 1.5 * len(short) > 0.2 * 16000
    )  # more words take longer: the words are read, not skipped


def test_greek_corpus_speaks_greek(tmp_path):
    make_corpus(
        tmp_path / "el", CorpusSpec(splits=(("test", 2),), seed=0, num_speakers=1), lang="el"
    )
    text = read_table(tmp_path / "el" / "test" / "text")
    assert all(
        "\u0370" <= c <= "\u03ff" or "\u1f00" <= c <= "\u1fff" or c == " "
        for t in text.values()
        for c in t
    )
    for path in read_table(tmp_path / "el" / "test" / "wav.scp").values():
        rate, samples = read_wav(path)
        assert rate == 16000 and len(samples) > 0.5 * rate


def test_espeak_failure_names_the_utterance(tmp_path, monkeypatch):
    monkeypatch.setitem(speech.ESPEAK_VOICES, "en", "xx-no-such-voice")
    with pytest.raises(InputError) as error:
        make_corpus(tmp_path / "bad", CorpusSpec(splits=(("train", 2),), seed=0, num_speakers=1))
    first_utt = plan_corpus(CorpusSpec(splits=(("train", 2),), seed=0, num_speakers=1))["train"][
        0
    ].utt_id
    assert f"key '{first_utt}'" in str(error.value) and "espeak-ng" in str(error.value)
    assert (
        not (tmp_path / "bad" / ".complete").exists() and not (tmp_path / "bad" / "train").exists()
    )


def test_resampling_keeps_a_tone_and_its_duration():
    t = np.arange(22050) / 22050
    tone = (10000 * np.sin(2 * np.pi * 440 * t)).astype(np.int16)
    out = speech.resample_to(tone, 22050)
    assert len(out) == 16000
    spectrum = np.abs(np.fft.rfft(out.astype(float)))
    assert abs(np.argmax(spectrum) - 440) <= 1  # 1 Hz bins over one second
    assert 0.95 < np.abs(out[1000:-1000]).max() / 10000 < 1.05


def test_parse_wav_refuses_garbage():
    with pytest.raises(ValueError, match="not a WAV"):
        speech.parse_wav(b"hello world, not audio")


def measured_snr_db(clean: np.ndarray, noisy: np.ndarray) -> float:
    signal, noise = clean.astype(float), noisy.astype(float) - clean.astype(float)
    return 10 * np.log10(np.mean(signal**2) / np.mean(noise**2))


def test_add_noise_reaches_the_requested_snr_and_is_seeded():
    t = np.arange(16000) / 16000
    tone = (8000 * np.sin(2 * np.pi * 300 * t)).astype(np.int16)
    for snr in (-5.0, 0.0, 10.0, 20.0):
        assert abs(measured_snr_db(tone, speech.add_noise(tone, snr, seed=3)) - snr) < 0.1
    assert np.array_equal(speech.add_noise(tone, 5.0, seed=3), speech.add_noise(tone, 5.0, seed=3))
    assert not np.array_equal(speech.add_noise(tone, 5.0, seed=3), speech.add_noise(tone, 5.0, 4))
    loud = speech.add_noise(np.full(100, 30000, dtype=np.int16), -20.0, seed=0)
    assert loud.dtype == np.int16 and loud.max() == 32767 and loud.min() == -32768  # clipped


def test_noisy_corpus_is_the_clean_one_plus_noise_at_the_drawn_snr(corpus, tmp_path):
    noisy = tmp_path / "noisy"
    snr_db = (0.0, 10.0)
    modalities = [
        TextModality(langs=("en",)),
        SpeechModality(lang="en", wav_dir=noisy / "wav", nj=2, snr_db=snr_db),
    ]
    generate_corpus(noisy, SPEC, modalities)
    assert "snr_db" in modalities[1].signature()
    assert "snr_db" not in SpeechModality(lang="en", wav_dir=tmp_path / "w").signature()
    drawn = []
    for utt in plan_corpus(SPEC)["train"]:
        want = speech.utterance_snr(utt, snr_db)
        assert snr_db[0] <= want <= snr_db[1]
        _, clean = read_wav(corpus / "wav" / "train" / f"{utt.utt_id}.wav")
        _, heard = read_wav(noisy / "wav" / "train" / f"{utt.utt_id}.wav")
        assert len(heard) == len(clean)
        assert abs(measured_snr_db(clean, heard) - want) < 0.2, utt.utt_id
        drawn.append(want)
    assert max(drawn) - min(drawn) > 2  # drawn per utterance, not one level for all
    for split in ("train", "dev", "test"):  # the words and who says them do not change
        for name in ("text", "utt2spk", "utt2num"):
            assert (noisy / split / name).read_bytes() == (corpus / split / name).read_bytes()


def test_snr_range_is_checked(tmp_path):
    from espnet_ext.data.numbers.__main__ import main
    from espnet_ext.errors import ConfigError

    with pytest.raises(ConfigError, match="snr_db"):
        SpeechModality(lang="en", wav_dir=tmp_path, snr_db=(10.0, 0.0))
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path / "c"), "--snr_db", "10:0"])
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path / "c"), "--snr_db", "loud"])
    assert not (tmp_path / "c").exists()
