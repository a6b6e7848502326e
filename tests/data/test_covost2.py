"""CoVoST 2 reader on a fixture (tests/fixtures/covost2): Common Voice clips + the CoVoST table, as
distributed (joined with validated.tsv) and as get_covost_splits.py leaves it; MP3 decoding; bad input."""

import shutil
from pathlib import Path

import pytest

from espnet_ext.data import covost2
from espnet_ext.data.datadir import read_kaldi_map, validate_data_dir
from espnet_ext.errors import InputError
from espnet_ext.features.fbank import load_recording

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "covost2"
CV = FIXTURE / "cv" / "fr"
TRAIN = {
    "7be0c45d19aa-common_voice_fr_17299400": ("Merci beaucoup.", "Thank you very much."),
    "a3f9c1e0d2b4-common_voice_fr_17299399": ("Bonjour à tous.", "Hello everyone."),
}


@pytest.fixture
def copy(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "covost2")
    return tmp_path / "covost2"


@pytest.mark.parametrize("table", ["covost_v2.fr_en.tsv", "covost_v2.fr_en.joined.tsv"])
def test_st_dirs_from_either_table(tmp_path, table):
    covost2.prepare(CV, FIXTURE / table, "fr", "en", covost2.SPLITS, "st", tmp_path)
    train = tmp_path / "train"
    assert validate_data_dir(train) == sorted(TRAIN)
    assert read_kaldi_map(train / "text.fr") == {u: s for u, (s, _) in TRAIN.items()}
    assert read_kaldi_map(train / "text") == {u: t for u, (_, t) in TRAIN.items()}
    assert read_kaldi_map(train / "utt2spk") == {u: u.split("-")[0] for u in TRAIN}
    assert set(read_kaldi_map(train / "lang").values()) == {"fr"}
    assert list(read_kaldi_map(tmp_path / "dev" / "text")) == [
        "a3f9c1e0d2b4-common_voice_fr_17299401"
    ]
    assert list(read_kaldi_map(tmp_path / "test" / "text")) == [
        "7be0c45d19aa-common_voice_fr_17299402"
    ]


def test_asr_text_is_the_transcript_and_the_mp3_decodes_to_16k(tmp_path):
    covost2.prepare(CV, FIXTURE / "covost_v2.fr_en.tsv", "fr", "en", ["dev"], "asr", tmp_path)
    assert read_kaldi_map(tmp_path / "dev" / "text") == {
        "a3f9c1e0d2b4-common_voice_fr_17299401": "Il fait beau."
    }
    wav_scp = tmp_path / "dev" / "wav.scp"
    ((utt, command),) = read_kaldi_map(wav_scp).items()
    samples = load_recording(command, 16000, wav_scp, 1, utt)  # the clip is 48 kHz
    assert 0.5 * 16000 < len(samples) < 3 * 16000 and float(abs(samples).max()) > 0.05


def test_train_covost_rows_belong_to_the_v2_training_split(copy, tmp_path):
    """get_covost_splits.py --version 2: train = {train, train_covost}; dev_covost is not dev."""
    cv = copy / "cv" / "fr"
    for n, split in ((17299403, "train_covost"), (17299404, "dev_covost")):
        shutil.copy(
            cv / "clips/common_voice_fr_17299400.mp3", cv / f"clips/common_voice_fr_{n}.mp3"
        )
        with open(cv / "validated.tsv", "a", encoding="utf-8") as f:
            f.write(f"7be0c45d19aa\tcommon_voice_fr_{n}.mp3\tEncore.\t2\t0\t\t\t\tfr\t\n")
        with open(copy / "covost_v2.fr_en.tsv", "a", encoding="utf-8") as f:
            f.write(f"common_voice_fr_{n}.mp3\tAgain.\t{split}\n")
    covost2.prepare(cv, copy / "covost_v2.fr_en.tsv", "fr", "en", covost2.SPLITS, "st", tmp_path)
    assert read_kaldi_map(tmp_path / "train" / "text") == {
        **{u: t for u, (_, t) in TRAIN.items()},
        "7be0c45d19aa-common_voice_fr_17299403": "Again.",
    }
    assert len(read_kaldi_map(tmp_path / "dev" / "text")) == 1


def test_other_split_values_are_counted_not_read(copy, tmp_path, caplog):
    table = copy / "covost_v2.fr_en.tsv"
    table.write_text(
        table.read_text() + "common_voice_fr_1.mp3\tx\ttrain_extra\n", encoding="utf-8"
    )
    covost2.prepare(copy / "cv" / "fr", table, "fr", "en", ["train"], "st", tmp_path / "out")
    assert "1 rows of split 'train_extra' not read" in caplog.text


@pytest.mark.parametrize(
    "row, message",
    [
        (
            "common_voice_fr_17299399.mp3\tHello",
            r"covost_v2.fr_en.tsv:6: has 2 tab-separated fields, the header 3",
        ),
        (
            "common_voice_fr_9.mp3\tHi\ttrain",
            r"covost_v2.fr_en.tsv:6: clip common_voice_fr_9.mp3 is not in .*validated.tsv",
        ),
        ("common_voice_fr_17299399.mp3\t\ttrain", r"covost_v2.fr_en.tsv:6: empty translation"),
        (
            "common_voice_fr_17299399.mp3\tHi\ttrain",
            r"covost_v2.fr_en.tsv:6: clip common_voice_fr_17299399.mp3 is listed twice",
        ),
    ],
)
def test_bad_rows_name_file_and_line(copy, tmp_path, row, message):
    table = copy / "covost_v2.fr_en.tsv"
    table.write_text(table.read_text() + row + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=message):
        covost2.prepare(copy / "cv" / "fr", table, "fr", "en", ["train"], "st", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_missing_clip_and_column_and_root(copy, tmp_path):
    (copy / "cv" / "fr" / "clips" / "common_voice_fr_17299400.mp3").unlink()
    with pytest.raises(
        InputError, match=r"covost_v2.fr_en.tsv:3: clip .*common_voice_fr_17299400.mp3 is missing"
    ):
        covost2.prepare(
            copy / "cv" / "fr", copy / "covost_v2.fr_en.tsv", "fr", "en", ["train"], "st", tmp_path
        )
    (copy / "bad.tsv").write_text("path\tsplit\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.tsv:1: header lacks column\(s\) translation"):
        covost2.prepare(copy / "cv" / "fr", copy / "bad.tsv", "fr", "en", ["train"], "st", tmp_path)
    with pytest.raises(InputError, match="not a Common Voice language dir"):
        covost2.prepare(copy, copy / "covost_v2.fr_en.tsv", "fr", "en", ["train"], "st", tmp_path)
