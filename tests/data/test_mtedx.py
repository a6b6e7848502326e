"""mTEDx reader on a fixture in the release layout (tests/fixtures/mtedx): ids, tags, segments, bad input."""

import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile

from espnet_ext.data import mtedx
from espnet_ext.data.datadir import read_kaldi_map
from espnet_ext.errors import InputError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mtedx"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    mtedx.prepare(FIXTURE, ["es", "fr"], mtedx.SPLITS, out)
    return out


@pytest.fixture
def release(tmp_path):
    for pair in ("es-es", "fr-fr"):
        shutil.copytree(FIXTURE / pair, tmp_path / pair)
    return tmp_path


def test_multilingual_and_per_language_dirs(prepared):
    names = ["test", "test_es", "test_fr", "train", "valid"]
    assert sorted(p.name for p in prepared.iterdir()) == names
    tables = ["lang", "segments", "spk2utt", "text", "utt2spk", "wav.scp"]
    assert sorted(p.name for p in (prepared / "train").iterdir()) == tables
    lang = read_kaldi_map(prepared / "train" / "lang")
    text = read_kaldi_map(prepared / "train" / "text")
    # ids: language, talk, start and end in ms; C order (the release lists talk yj7... first)
    assert list(text) == [
        "es_0u7tTptBo9I_00000300_00001340",
        "es_yj7-Zq2Lr0k_00000300_00001570",
        "es_yj7-Zq2Lr0k_00001970_00003520",
        "fr_Ww2Tq5kE8-Y_00000300_00001310",
        "fr_Ww2Tq5kE8-Y_00001710_00002750",
    ]
    assert text["es_yj7-Zq2Lr0k_00000300_00001570"] == "Muchas gracias."
    assert text["es_0u7tTptBo9I_00000300_00001340"] == "Buenos días."
    assert {u: lang[u] for u in text} == {u: u[:2] for u in text}
    assert read_kaldi_map(prepared / "test_fr" / "lang") == {
        u: "fr" for u in read_kaldi_map(prepared / "test_fr" / "text")
    }
    assert set(read_kaldi_map(prepared / "test_es" / "text")) | set(
        read_kaldi_map(prepared / "test_fr" / "text")
    ) == set(read_kaldi_map(prepared / "test" / "text"))


def test_segments_point_into_the_talk_flac(prepared):
    wav = read_kaldi_map(prepared / "train" / "wav.scp")
    assert wav["es_yj7-Zq2Lr0k"].endswith("es-es/data/train/wav/yj7-Zq2Lr0k.flac")
    segments = read_kaldi_map(prepared / "train" / "segments")
    talk, start, end = segments["es_yj7-Zq2Lr0k_00001970_00003520"].split()
    assert (talk, start, end) == ("es_yj7-Zq2Lr0k", "1.970000", "3.520000")
    assert float(end) <= soundfile.info(wav[talk]).duration
    assert (
        read_kaldi_map(prepared / "train" / "utt2spk")["es_yj7-Zq2Lr0k_00001970_00003520"] == talk
    )


def test_missing_release_names_where_to_get_it(tmp_path):
    with pytest.raises(
        InputError,
        match=r"no mTEDx it-it release.*mtedx_it-it.tgz from https://www.openslr.org/100/",
    ):
        mtedx.prepare(tmp_path, ["it"], ["train"], tmp_path / "out")
    with pytest.raises(InputError, match="among mTEDx's ar de el es fr it pt ru"):
        mtedx.prepare(tmp_path, ["en"], ["train"], tmp_path / "out")


def test_bad_release_files_are_refused_with_file_and_line(release, tmp_path):
    txt = release / "fr-fr" / "data" / "valid" / "txt"
    (txt / "valid.fr").write_text("Bonsoir.\nen trop\n")
    with pytest.raises(InputError, match=r"valid.fr:2: .*line-aligned"):
        mtedx.prepare(release, ["es", "fr"], ["train", "valid"], tmp_path / "out")
    assert not (tmp_path / "out" / "train").exists()  # nothing written before all is read
    (txt / "valid.fr").write_text("Bonsoir.\n")
    (txt / "valid.yaml").write_text(
        "- {duration: 9.5, offset: 0.30, speaker_id: a9Fh3Jk_2Lm, wav: a9Fh3Jk_2Lm.wav}\n"
    )
    with pytest.raises(InputError, match=r"valid.yaml:1: segment ends at 9.8.*a9Fh3Jk_2Lm.flac"):
        mtedx.prepare(release, ["fr"], ["valid"], tmp_path / "out")
    (release / "fr-fr" / "data" / "valid" / "wav" / "a9Fh3Jk_2Lm.flac").unlink()
    with pytest.raises(
        InputError, match=r"valid.yaml:1: talk recording .*a9Fh3Jk_2Lm.flac does not"
    ):
        mtedx.prepare(release, ["fr"], ["valid"], tmp_path / "out")
    shutil.rmtree(release / "es-es" / "data" / "test")
    with pytest.raises(InputError, match="split 'test' is missing"):
        mtedx.prepare(release, ["es"], ["test"], tmp_path / "out")


def test_flac_name_of_the_yaml_wav_field():
    assert mtedx.flac_of("0u7tTptBo9I.wav") == "0u7tTptBo9I.flac"
    assert mtedx.flac_of("0u7tTptBo9I") == "0u7tTptBo9I.flac"
    assert mtedx.flac_of("a.b-c") == "a.b-c.flac"  # a talk id with a dot is no suffix


# ST directions: es-en has training data, it-en is zero-shot (valid and test only, as in the release)


@pytest.fixture(scope="module")
def prepared_st(tmp_path_factory):
    out = tmp_path_factory.mktemp("st")
    mtedx.prepare_st(FIXTURE, ["es-en"], ["es-en", "it-en"], out)
    return out


def test_st_dirs_train_from_trained_directions_test_from_all(prepared_st):
    names = ["test", "test_es-en", "test_it-en", "train", "valid"]
    assert sorted(p.name for p in prepared_st.iterdir()) == names
    train = read_kaldi_map(prepared_st / "train" / "text.tgt")
    assert train == {
        "es-en_yj7-Zq2Lr0k_00000300_00001570": "Thank you very much.",
        "es-en_yj7-Zq2Lr0k_00001970_00003520": "It is an honour to be here.",
    }
    assert read_kaldi_map(prepared_st / "train" / "text.src") == {
        "es-en_yj7-Zq2Lr0k_00000300_00001570": "Muchas gracias.",
        "es-en_yj7-Zq2Lr0k_00001970_00003520": "Es un honor estar aquí.",
    }
    assert set(read_kaldi_map(prepared_st / "valid" / "direction").values()) == {"es-en"}
    test = prepared_st / "test"
    assert read_kaldi_map(test / "direction") == {
        "es-en_Lp3Rx9-aV2s_00000300_00001360": "es-en",
        "es-en_Lp3Rx9-aV2s_00001760_00002590": "es-en",
        "it-en_Zx1Cv3Bn5Mm_00000300_00001520": "it-en",
        "it-en_Zx1Cv3Bn5Mm_00001920_00002570": "it-en",
    }
    zero_shot = prepared_st / "test_it-en"
    assert read_kaldi_map(zero_shot / "text.tgt") == {
        "it-en_Zx1Cv3Bn5Mm_00000300_00001520": "Thanks a lot.",
        "it-en_Zx1Cv3Bn5Mm_00001920_00002570": "Bye.",
    }
    assert set(read_kaldi_map(zero_shot / "src_lang").values()) == {"it"}
    assert set(read_kaldi_map(zero_shot / "tgt_lang").values()) == {"en"}
    wav = read_kaldi_map(zero_shot / "wav.scp")
    assert wav["it-en_Zx1Cv3Bn5Mm"].endswith("it-en/data/test/wav/Zx1Cv3Bn5Mm.flac")


def test_st_bad_directions_and_missing_train_split(tmp_path):
    with pytest.raises(InputError, match="'en-es' is not an mTEDx ST direction"):
        mtedx.prepare_st(FIXTURE, ["en-es"], ["es-en"], tmp_path / "out")
    with pytest.raises(InputError, match="'es' is not an mTEDx ST direction"):
        mtedx.prepare_st(FIXTURE, ["es-en"], ["es"], tmp_path / "out")
    # a zero-shot direction has no training data: asking to train on it names the missing split
    with pytest.raises(InputError, match=r"split 'train' is missing"):
        mtedx.prepare_st(FIXTURE, ["it-en"], ["it-en"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_st_translation_lines_must_align(tmp_path):
    shutil.copytree(FIXTURE / "es-en", tmp_path / "es-en")
    (tmp_path / "es-en" / "data" / "test" / "txt" / "test.en").write_text("Hello everyone.\n")
    with pytest.raises(InputError, match=r"test.yaml:2: test.en has 1 lines"):
        mtedx.prepare_st(tmp_path, ["es-en"], ["es-en"], tmp_path / "out", ["test"])


def test_paper_directions_ten_trained_three_zero_shot():
    assert len(mtedx.TRAIN_DIRECTIONS) == 10 and len(mtedx.ZERO_SHOT_DIRECTIONS) == 3
    assert not set(mtedx.TRAIN_DIRECTIONS) & set(mtedx.ZERO_SHOT_DIRECTIONS)
    targets = {d.split("-")[1] for d in mtedx.TRAIN_DIRECTIONS + mtedx.ZERO_SHOT_DIRECTIONS}
    assert targets == set(mtedx.TARGET_LANGUAGES)


def test_talk_at_another_rate_is_resampled_not_refused(release, tmp_path):
    """A 48 kHz talk (mTEDx's flac are not 16 kHz) is read through the resampling pipe of wav.scp; the
    feature stage's strict 16 kHz check then holds; a 16 kHz talk keeps its plain path."""
    from scipy.signal import resample_poly

    from espnet_ext.features.fbank import load_recording

    flac = release / "es-es/data/train/wav/yj7-Zq2Lr0k.flac"
    audio, rate = soundfile.read(flac, dtype="float32")
    assert rate == 16000
    soundfile.write(flac, resample_poly(audio, 3, 1).astype("float32"), 48000, format="FLAC")
    mtedx.prepare(release, ["es"], ["train"], tmp_path / "out")
    wav_scp = tmp_path / "out" / "train" / "wav.scp"
    scp = read_kaldi_map(wav_scp)
    assert scp["es_yj7-Zq2Lr0k"] == f"python -m espnet_ext.data.compressed_audio {flac} |"
    assert scp["es_0u7tTptBo9I"].endswith("es-es/data/train/wav/0u7tTptBo9I.flac")
    line = list(scp).index("es_yj7-Zq2Lr0k") + 1
    resampled = load_recording(scp["es_yj7-Zq2Lr0k"], 16000, wav_scp, line, "es_yj7-Zq2Lr0k")
    assert abs(len(resampled) - len(audio)) <= 16
    n = min(len(audio), len(resampled))
    assert np.corrcoef(audio[:n], resampled[:n])[0, 1] > 0.95
