"""Europarl-ST reader on a fixture in the v1.1 release layout (tests/fixtures/europarl_st): ASR/ST data dirs,
the English normaliser, AAC decoding through the wav.scp pipe, bad input."""

import shutil
from pathlib import Path

import numpy as np
import pytest

from espnet_ext.data import europarl_st
from espnet_ext.data.datadir import read_kaldi_map, validate_data_dir
from espnet_ext.errors import InputError
from espnet_ext.features.fbank import load_recording

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "europarl_st" / "v1.1"
SPEECH = "en.20081117.22.3-100"


@pytest.fixture(scope="module")
def asr(tmp_path_factory):
    out = tmp_path_factory.mktemp("asr")
    europarl_st.prepare(FIXTURE, "en", "de", ["train", "dev", "test"], "asr", out)
    return out


@pytest.fixture
def release(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "v1.1")
    return tmp_path / "v1.1"


@pytest.mark.parametrize(
    "raw, expected",
    [
        (
            "Mr President, I would like to thank the rapporteur.",
            "mr president i would like to thank the rapporteur",
        ),
        ("It's a matter of co-operation!", "it's a matter of co operation"),
        ("Mr Barroso\u2019s 'co-operation' - 2,5%!", "mr barroso's co operation 2 5"),
        ("\u00abLa Comisi\u00f3n\u00bb (COM(2008) 0815)", "la comisi\u00f3n com 2008 0815"),
        ("'Quoted' words' end", "quoted words end"),
    ],
)
def test_normalise_english_lowercases_and_strips_punctuation(raw, expected):
    assert europarl_st.normalise_english(raw) == expected


def test_asr_data_dirs(asr):
    assert sorted(p.name for p in asr.iterdir()) == ["dev", "test", "train"]
    train = asr / "train"
    assert sorted(p.name for p in train.iterdir()) == [
        "lang",
        "segments",
        "spk2utt",
        "text",
        "utt2spk",
        "wav.scp",
    ]
    text = read_kaldi_map(train / "text")
    # <speech-id>_<start ms>_<end ms>, from segments.lst "en.20081117.22.3-100 0.30 3.59"
    assert text == {
        f"{SPEECH}_00000300_00003590": "mr president i would like to thank the rapporteur",
        f"{SPEECH}_00003990_00005960": "it's a matter of co operation",
        "en.20090115.5.3-021_00000300_00001750": "we voted in favour",
    }
    assert (
        read_kaldi_map(train / "segments")[f"{SPEECH}_00003990_00005960"] == f"{SPEECH} 3.990 5.960"
    )
    assert set(read_kaldi_map(train / "utt2spk").values()) == {SPEECH, "en.20090115.5.3-021"}
    assert validate_data_dir(train, check_audio=True) == sorted(text)


def test_st_data_dirs_keep_both_texts_as_released(tmp_path):
    europarl_st.prepare(FIXTURE, "en", "de", ["train"], "st", tmp_path)
    utt = f"{SPEECH}_00000300_00003590"
    assert (
        read_kaldi_map(tmp_path / "train" / "text")[utt]
        == "Herr Präsident, ich danke dem Berichterstatter."
    )
    assert (
        read_kaldi_map(tmp_path / "train" / "text.de")[utt]
        == "Herr Präsident, ich danke dem Berichterstatter."
    )
    assert (
        read_kaldi_map(tmp_path / "train" / "text.en")[utt]
        == "Mr President, I would like to thank the rapporteur."
    )


def test_wav_scp_pipe_decodes_the_m4a_to_16k_speech_where_the_segments_are(asr):
    wav_scp = asr / "train" / "wav.scp"
    command = read_kaldi_map(wav_scp)[SPEECH]
    assert command.startswith("python -m espnet_ext.data.compressed_audio ") and command.endswith(
        " |"
    )
    samples = load_recording(command, 16000, wav_scp, 1, SPEECH)
    # two sentences at 0.30-3.59 and 3.99-5.96 s with silence around (+ AAC's 1024 priming samples)
    assert 5.96 * 16000 < len(samples) < 6.5 * 16000
    rms = lambda a, b: float(np.sqrt(np.mean(samples[int(a * 16000) : int(b * 16000)] ** 2)))  # noqa: E731
    assert rms(0.5, 3.4) > 20 * rms(0.0, 0.2)
    assert rms(4.1, 5.8) > 20 * rms(3.65, 3.9)


def test_missing_audio_is_named_with_the_speech_list_line(release, tmp_path):
    (release / "en" / "audios" / "en.20090115.5.3-021.m4a").unlink()
    with pytest.raises(
        InputError, match=r"train/speeches.lst:2: audio file .*en.20090115.5.3-021.m4a is missing"
    ):
        europarl_st.prepare(release, "en", "de", ["train"], "asr", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_mismatched_line_counts_are_refused(release, tmp_path):
    path = release / "en" / "de" / "train" / "segments.de"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:2]), encoding="utf-8")
    with pytest.raises(InputError, match=r"segments.de: has 2 lines but segments.lst has 3"):
        europarl_st.prepare(release, "en", "de", ["train", "dev"], "asr", tmp_path / "out")
    assert not (tmp_path / "out").exists()  # dev is fine but nothing is written


@pytest.mark.parametrize(
    "line, message",
    [
        (f"{SPEECH} 0.30", r"segments.lst:2: expected '<speech-id> <start> <end>', got 2 fields"),
        (f"{SPEECH} 0.3s 1.0", r"segments.lst:2: start '0.3s' and end '1.0' must be seconds"),
        (f"{SPEECH} 2.0 1.0", r"segments.lst:2: segment start 2.0 must be >= 0 and < end 1.0"),
        (
            "en.20120101.1.1-001 0.3 1.0",
            r"segments.lst:2: speech en.20120101.1.1-001 is not in speeches.lst",
        ),
        (f"{SPEECH} 0.30 3.59", r"segments.lst:2: segment .* is listed twice"),
    ],
)
def test_malformed_segment_lines_name_file_and_line(release, tmp_path, line, message):
    path = release / "en" / "de" / "train" / "segments.lst"
    lines = path.read_text().splitlines()
    lines[1] = line
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=message):
        europarl_st.prepare(release, "en", "de", ["train"], "asr", tmp_path / "out")


def test_text_left_empty_by_the_normaliser_is_refused(release, tmp_path):
    path = release / "en" / "de" / "test" / "segments.en"
    path.write_text("The debate is closed.\n...\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"segments.en: key '.*': transcript '...' is empty once"):
        europarl_st.prepare(release, "en", "de", ["test"], "asr", tmp_path / "out")


def test_not_a_release_and_missing_split(tmp_path):
    with pytest.raises(InputError, match="no Europarl-ST release here"):
        europarl_st.prepare(tmp_path, "en", "de", ["train"], "asr", tmp_path / "out")
    with pytest.raises(InputError, match="split train-noisy of en->de is missing"):
        europarl_st.prepare(FIXTURE, "en", "de", ["train-noisy"], "asr", tmp_path / "out")


def test_compressed_audio_cli_names_a_missing_or_undecodable_file(tmp_path, capsys):
    from espnet_ext.data import compressed_audio

    assert compressed_audio.main([str(tmp_path / "none.m4a")]) == 1
    (tmp_path / "bad.m4a").write_bytes(b"not audio")
    assert compressed_audio.main([str(tmp_path / "bad.m4a")]) == 1
    err = capsys.readouterr().err
    assert "none.m4a: audio file does not exist" in err and "bad.m4a: cannot decode" in err
