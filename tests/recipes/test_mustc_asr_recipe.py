"""egs/mustc/asr1 end to end on tiny mini-corpus talks: segments through every stage; the release on the fixture.

The end-to-end run is the session's (tests/recipes/conftest.py), which the ST recipe's tests start from.
"""

import json
import re
from pathlib import Path

import pytest
from recipe_fixture import make_recipe_copy, read_table, run

# on one worker with the other modules of its session fixture (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("mustc_asr_finished")

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mustc"


@pytest.fixture
def finished(mustc_asr_finished):
    """The session's tiny MuST-C ASR run (conftest.py), shared with the ST recipe's tests."""
    return mustc_asr_finished


def test_mini_talks_are_prepared_by_the_release_reader(finished):
    recipe, _ = finished
    assert (
        recipe / "data" / "mini_release" / "en-de" / "data" / "train" / "txt" / "train.yaml"
    ).is_file()
    train = recipe / "data" / "train"
    segments = read_table(train / "segments")
    assert len(segments) == 40 and read_table(train / "text") == read_table(train / "text.en")
    talks = read_table(train / "wav.scp")
    assert {value.split()[0] for value in segments.values()} == set(talks)
    assert all(key.startswith("ted_") and len(talks) < len(segments) for key in talks)
    assert len(read_table(recipe / "data" / "tst_COMMON" / "text.de")) == 6


def test_features_per_segment_and_all_stages_to_wer(finished):
    recipe, _ = finished
    feats = read_table(recipe / "dump" / "fbank" / "tst_COMMON" / "feats.scp")
    assert list(feats) == list(read_table(recipe / "data" / "tst_COMMON" / "segments"))
    assert (recipe / "dump" / "fbank" / "tst_COMMON" / "feats_dim").read_text().strip() == "80"
    exp = recipe / "exp" / "asr_tiny_asr"
    decode = exp / "decode_tiny_decode" / "tst_COMMON"
    assert len((decode / "text").read_text().splitlines()) == 6
    score = json.loads((decode / "score_wer" / "result.json").read_text())
    results = (recipe / "exp" / "RESULTS.md").read_text()
    row = re.search(r"\| asr_tiny_asr / decode_tiny_decode \| ([0-9.]+) \|", results)
    assert row and float(row.group(1)) == pytest.approx(score["wer"], abs=0.01)


def test_real_release_through_stage_two_on_the_fixture(tmp_path):
    """MUSTC set: the release reader (via its tarball check) and fbank features of every segment."""
    recipe = make_recipe_copy("mustc", "asr1", tmp_path)
    out = run(recipe, ["--stop_stage", "2", "--nj", "1"], env={"MUSTC": str(FIXTURE)})
    assert out.returncode == 0, out.stderr[-4000:]
    assert read_table(recipe / "data" / "tst_HE" / "text.de") == {
        "ted_01102_00000300_00001100": "Danke."
    }
    frames = read_table(recipe / "dump" / "fbank" / "train" / "utt2num_frames")
    assert list(frames) == list(read_table(recipe / "data" / "train" / "segments"))


def test_missing_release_stops_stage_one_with_the_licence_explanation(tmp_path):
    recipe = make_recipe_copy("mustc", "asr1", tmp_path / "r")
    (tmp_path / "empty").mkdir()
    out = run(recipe, ["--stop_stage", "1"], env={"MUSTC": str(tmp_path / "empty")})
    assert out.returncode != 0
    log = (recipe / "data" / "log" / "data_prep.log").read_text()
    assert "MUSTC_v1.0_en-de.tar.gz" in log and "https://ict.fbk.eu/must-c/" in log
