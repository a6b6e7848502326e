"""TED-LIUM 3 reader on a fixture in the release layout (tests/fixtures/tedlium): Kaldi's text preparation
(ignored segments listed, <unk>, apostrophe suffixes), SPHERE read directly, bad input."""

import shutil
from pathlib import Path

import numpy as np
import pytest

from espnet_ext.data import tedlium
from espnet_ext.data.datadir import read_kaldi_map, validate_data_dir
from espnet_ext.errors import InputError
from espnet_ext.features.fbank import load_recording

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tedlium" / "TEDLIUM_release-3"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    out = tmp_path_factory.mktemp("ted")
    tedlium.prepare(FIXTURE, tedlium.SPLITS, out)
    return out


@pytest.fixture
def release(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "ted")
    return tmp_path / "ted"


@pytest.mark.parametrize(
    "words, expected",
    [
        ("i 'd like to share a <unk> story", "i'd like to share a story"),
        ("it 's what we 're doing", "it's what we're doing"),
        ("<unk>", ""),
        (
            "rock 'n' roll",
            "rock'n roll",
        ),  # join_suffix joins, the normaliser drops the edge apostrophe
    ],
)
def test_transcript_preparation(words, expected):
    assert tedlium.prepare_transcript(words.split()) == expected


def test_data_dirs_and_skipped_segments_listed(prepared):
    train = prepared / "train"
    assert validate_data_dir(train, check_audio=True) == [
        "AimeeMullins_2009P-0000030-0000205",
        "BillGates_2010-0000030-0000159",
    ]
    assert read_kaldi_map(train / "text") == {
        "AimeeMullins_2009P-0000030-0000205": "i'd like to share a story",
        "BillGates_2010-0000030-0000159": "it's what we're doing",
    }
    assert (
        read_kaldi_map(train / "segments")["BillGates_2010-0000030-0000159"]
        == "BillGates_2010 0.30 1.59"
    )
    removed = (train / "removed.txt").read_text().splitlines()
    assert len(removed) == 1 and removed[0].startswith("AimeeMullins_2009P-0000245-0000345 ")
    assert (
        "ignore_time_segment_in_scoring" in removed[0] and "AimeeMullins_2009P.stm:2" in removed[0]
    )
    dev_removed = (prepared / "dev" / "removed.txt").read_text()
    assert "no word once <unk> is dropped" in dev_removed and "DanBarber_2010.stm:2" in dev_removed
    assert (prepared / "test" / "removed.txt").read_text() == ""


def test_sph_is_read_directly_and_segments_hold_the_speech(prepared):
    wav_scp = prepared / "train" / "wav.scp"
    sph = read_kaldi_map(wav_scp)["BillGates_2010"]
    assert sph.endswith("legacy/train/sph/BillGates_2010.sph")
    samples = load_recording(sph, 16000, wav_scp, 2, "BillGates_2010")
    rms = lambda a, b: float(np.sqrt(np.mean(samples[int(a * 16000) : int(b * 16000)] ** 2)))  # noqa: E731
    assert rms(0.4, 1.5) > 20 * rms(0.0, 0.25) and rms(0.0, 0.25) == 0.0


def test_train_from_release_3_data_dir(tmp_path):
    tedlium.prepare(FIXTURE, ["train"], tmp_path, train_from="data")
    assert list(read_kaldi_map(tmp_path / "train" / "text")) == [
        "AimeeMullins_2009P-0000030-0000205"
    ]


@pytest.mark.parametrize(
    "line, message",
    [
        (
            "BillGates_2010 1 BillGates_2010 0.3",
            r"BillGates_2010.stm:1: expected '<file> <channel>",
        ),
        (
            "BillGates_2010 1 BillGates_2010 0.3 x <o> hi",
            r"BillGates_2010.stm:1: start '0.3' and end 'x' must be seconds",
        ),
        (
            "Nobody_2011 1 Nobody_2011 0.3 1.0 <o> hi",
            r"BillGates_2010.stm:1: audio file .*Nobody_2011.sph is missing",
        ),
    ],
)
def test_malformed_stm_lines_name_file_and_line(release, tmp_path, line, message):
    (release / "legacy" / "train" / "stm" / "BillGates_2010.stm").write_text(
        line + "\n", encoding="utf-8"
    )
    with pytest.raises(InputError, match=message):
        tedlium.prepare(release, ["dev", "train"], tmp_path / "out")
    assert not (tmp_path / "out").exists()  # dev read fine, nothing written


def test_missing_split_dirs(tmp_path):
    with pytest.raises(InputError, match=r"no sph/ and stm/ for split dev"):
        tedlium.prepare(tmp_path, ["dev"], tmp_path / "out")
