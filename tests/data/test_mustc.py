"""MuST-C reader on a fixture in the release layout (tests/fixtures/mustc): segments, ids, texts, bad input."""

import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
import soundfile

from espnet_ext.data import mustc
from espnet_ext.data.datadir import read_kaldi_map
from espnet_ext.errors import InputError
from espnet_ext.features import fbank

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mustc"
RATE = 16000


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    mustc.prepare(FIXTURE, "de", mustc.SPLITS, out)
    return out


@pytest.fixture
def release(tmp_path):
    shutil.copytree(FIXTURE / "en-de", tmp_path / "en-de")
    return tmp_path


def test_data_dirs_per_split_with_tables_as_documented(prepared):
    assert sorted(p.name for p in prepared.iterdir()) == ["dev", "train", "tst_COMMON", "tst_HE"]
    train = prepared / "train"
    assert sorted(p.name for p in train.iterdir()) == [
        "segments",
        "spk2utt",
        "text",
        "text.de",
        "text.en",
        "utt2spk",
        "wav.scp",
    ]
    wav_scp = read_kaldi_map(train / "wav.scp")
    assert wav_scp == {
        "ted_00767": str(FIXTURE.absolute() / "en-de/data/train/wav/ted_767.wav"),
        "ted_01096": str(FIXTURE.absolute() / "en-de/data/train/wav/ted_1096.wav"),
    }
    # yaml line 2: offset 2.396375, duration 1.339438 -> end 3.735813
    segments = (train / "segments").read_text().splitlines()
    assert segments == [
        "ted_00767_00000300_00001996 ted_00767 0.300000 1.996375",
        "ted_00767_00002396_00003736 ted_00767 2.396375 3.735813",
        "ted_01096_00000300_00001509 ted_01096 0.300000 1.509125",
    ]
    text_en = read_kaldi_map(train / "text.en")
    assert text_en["ted_00767_00002396_00003736"] == "It's truly a great honor."
    assert read_kaldi_map(train / "text.de")["ted_01096_00000300_00001509"] == "Ich bin sprachlos."
    assert read_kaldi_map(train / "text") == text_en
    assert (train / "spk2utt").read_text().splitlines() == [
        "ted_00767 ted_00767_00000300_00001996 ted_00767_00002396_00003736",
        "ted_01096 ted_01096_00000300_00001509",
    ]


def test_segments_cut_the_sentences_out_of_the_talk(prepared):
    """The fixture's talks are silence + sentence + silence ...: a segment holds exactly one sentence."""
    for split in ("train", "tst_COMMON"):
        wavs = read_kaldi_map(prepared / split / "wav.scp")
        talks = {talk: soundfile.read(path, dtype="int16")[0] for talk, path in wavs.items()}
        covered = {talk: np.zeros(len(audio), bool) for talk, audio in talks.items()}
        for line in (prepared / split / "segments").read_text().splitlines():
            _, talk, start, end = line.split()
            first, last = round(float(start) * RATE), round(float(end) * RATE)
            cut = talks[talk][first:last]
            assert np.abs(cut).max() > 500, f"no speech in {line}"
            covered[talk][first:last] = True
        for talk, audio in talks.items():
            assert not np.any(audio[~covered[talk]]), f"speech outside the segments of {talk}"


def test_segment_samples_equal_a_fresh_synthesis_of_the_sentence(prepared):
    """The cut between start and end is, sample for sample, espeak-ng reading that line of train.en."""
    speech = pytest.importorskip("espnet_ext.data.numbers.speech")
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed")
    wav = soundfile.read(
        read_kaldi_map(prepared / "train" / "wav.scp")["ted_00767"], dtype="int16"
    )[0]
    _, _, start, end = (prepared / "train" / "segments").read_text().splitlines()[1].split()
    cut = wav[round(float(start) * RATE) : round(float(end) * RATE)]
    expected = speech.synthesize("It's truly a great honor.", "en-us+m3", rate=190, pitch=50)
    np.testing.assert_array_equal(cut, expected)


def test_fbank_stage_computes_one_feature_matrix_per_segment(prepared, tmp_path):
    data = prepared / "tst_COMMON"
    fbank.main(
        ["compute", "--data_dir", str(data), "--out_dir", str(tmp_path), "--nj", "1", "--job", "1"]
    )
    fbank.main(["merge", "--data_dir", str(data), "--out_dir", str(tmp_path), "--nj", "1"])
    frames = {k: int(v) for k, v in read_kaldi_map(tmp_path / "utt2num_frames").items()}
    assert list(frames) == list(read_kaldi_map(data / "segments"))
    for line in (data / "segments").read_text().splitlines():
        utt, _, start, end = line.split()
        samples = round(float(end) * RATE) - round(float(start) * RATE)
        assert frames[utt] == 1 + (samples - 400) // 160  # Kaldi's snip_edges framing


def test_other_target_language(release, tmp_path):
    pair = release / "en-es"
    (release / "en-de").rename(pair)
    for txt in pair.glob("data/*/txt/*.de"):
        txt.rename(txt.with_suffix(".es"))
    mustc.prepare(release, "es", ["dev"], tmp_path / "out")
    assert (tmp_path / "out/dev/text.es").read_text().splitlines()[0].endswith("Guten Morgen.")
    with pytest.raises(InputError, match="no MuST-C en-de release"):
        mustc.prepare(release, "de", ["dev"], tmp_path / "out2")


def edit_line(path: Path, number: int, replace) -> None:
    lines = path.read_text().splitlines()
    lines[number - 1] = replace(lines[number - 1])
    path.write_text("\n".join(lines) + "\n")


def test_segment_beyond_the_end_of_its_talk(release, tmp_path):
    yaml_path = release / "en-de/data/train/txt/train.yaml"
    edit_line(yaml_path, 2, lambda line: line.replace("offset: 2.396375", "offset: 12.396375"))
    with pytest.raises(InputError) as error:
        mustc.prepare(release, "de", ["train"], tmp_path / "out")
    assert (error.value.path, error.value.line) == (str(yaml_path), 2)
    assert "after the end of" in str(error.value) and "ted_767.wav" in str(error.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("short", ["train.de", "train.en"])
def test_line_count_mismatch(release, tmp_path, short):
    path = release / "en-de/data/train/txt" / short
    path.write_text("\n".join(path.read_text().splitlines()[:2]) + "\n")
    with pytest.raises(InputError) as error:
        mustc.prepare(release, "de", ["train"], tmp_path / "out")
    assert error.value.line == 3 and error.value.path.endswith("train.yaml")
    assert f"{short} has 2 lines but train.yaml has 3" in str(error.value)


def test_missing_talk_wav(release, tmp_path):
    (release / "en-de/data/train/wav/ted_1096.wav").unlink()
    with pytest.raises(InputError) as error:
        mustc.prepare(release, "de", ["train"], tmp_path / "out")
    assert error.value.path.endswith("train.yaml") and error.value.line == 3
    assert "ted_1096.wav does not exist" in str(error.value)


def test_bad_yaml_line(release, tmp_path):
    txt = release / "en-de/data/dev/txt"
    edit_line(txt / "dev.yaml", 1, lambda line: line.replace("offset: 0.300000, ", ""))
    with pytest.raises(InputError, match="segment without offset") as error:
        mustc.prepare(release, "de", ["dev"], tmp_path / "out")
    assert error.value.line == 1


def test_repeated_segment_and_blank_text_dropped_and_named(release, tmp_path, caplog):
    """ESPnet's MuST-C preparation drops every copy of a repeated segment id; a blank text line drops its
    segment; each is named (file:line) in a logged warning, the rest of the corpus is prepared."""
    txt = release / "en-de/data/train/txt"
    for name in ("train.yaml", "train.en", "train.de"):  # line 4 repeats line 1's segment
        lines = (txt / name).read_text().splitlines()
        (txt / name).write_text("\n".join([*lines, lines[0]]) + "\n")
    edit_line(txt / "train.de", 3, lambda line: "  ")
    mustc.prepare(release, "de", ["train"], tmp_path / "out")
    segments = (tmp_path / "out/train/segments").read_text().splitlines()
    assert [line.split()[0] for line in segments] == ["ted_00767_00002396_00003736"]
    err = caplog.text
    yaml_path = txt / "train.yaml"
    for number in (1, 4):
        assert (
            f"{yaml_path}:{number}: segment ted_00767_00000300_00001996 is repeated (lines 1, 4)"
            in err
        )
    assert (
        f"{txt / 'train.de'}:3: empty text for segment ted_01096_00000300_00001509; dropped" in err
    )
    assert f"{yaml_path}: 3 of 4 segments dropped" in err
    edit_line(txt / "train.en", 2, lambda line: "")  # nothing left: refused
    with pytest.raises(InputError, match="no segments left: all 4 dropped"):
        mustc.prepare(release, "de", ["train"], tmp_path / "out2")


def test_bad_split_writes_nothing_and_keeps_earlier_output(release, tmp_path):
    out = tmp_path / "out"
    mustc.prepare(release, "de", ["train", "tst-HE"], out)
    before = {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    (release / "en-de/data/tst-HE/txt/tst-HE.de").write_text("")
    with pytest.raises(InputError, match="tst-HE.de has 0 lines"):
        mustc.prepare(release, "de", ["train", "tst-HE"], out)
    assert {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()} == before


def test_check_release_extracts_the_tarball_or_explains_the_licence(tmp_path):
    with pytest.raises(InputError) as error:
        mustc.check_release(tmp_path, "de")
    assert mustc.LICENCE_URL in str(error.value) and "MUSTC_v1.0_en-de.tar.gz" in str(error.value)
    with tarfile.open(tmp_path / "MUSTC_v1.0_en-de.tar.gz", "w:gz") as tar:
        tar.add(FIXTURE / "en-de", arcname="en-de")
    assert mustc.check_release(tmp_path, "de") == tmp_path / "en-de"
    assert (tmp_path / "en-de/data/dev/wav/ted_535.wav").is_file()
    assert mustc.main(["check", "--root", str(tmp_path / "en-de"), "--tgt_lang", "de"]) == 0
