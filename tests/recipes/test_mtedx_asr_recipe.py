"""egs/mtedx/asr1 end to end on a tiny multilingual mini corpus: tags through every stage, WER per language;
the release reader on the fixture."""

import json
import re
from pathlib import Path

import pytest
import torch
from recipe_fixture import make_recipe_copy, read_table, run

from espnet_ext.analysis.head_sharing import analyse

# on one worker with the other modules of its session fixture (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("mtedx_asr_finished")

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mtedx"


@pytest.fixture(scope="module")
def finished(mtedx_asr_finished):
    return mtedx_asr_finished


def test_unequal_languages_with_tags_and_ids(finished):
    lang = read_table(finished / "data" / "train" / "lang")
    assert sorted(lang.values()) == ["es"] * 30 + ["it"] * 10
    ids = read_table(finished / "dump" / "fbank" / "train_filtered" / "task_id")
    assert {u: {"es": "0", "it": "1"}[lang[u]] for u in ids} == ids  # filtered alike, in tag order
    assert set(read_table(finished / "data" / "test_it" / "lang").values()) == {"it"}


def test_training_selected_heads_for_each_language(finished):
    exp = finished / "exp" / "asr_tiny_asr"
    state = torch.load(exp / "valid.acc.ave.pth", map_location="cpu")
    logits = [v for k, v in state.items() if k.endswith("selection_logits")]
    assert len(logits) == 2 and all(v.shape == (2, 4) for v in logits)
    assert all(v[task].abs().sum() > 0 for v in logits for task in (0, 1))  # φ moved for both tasks


def test_head_sharing_analysis_of_the_trained_model(finished, tmp_path):
    exp = finished / "exp" / "asr_tiny_asr"
    sides = analyse(exp / "valid.acc.ave.pth", exp / "config.yaml", tmp_path)
    for sel in sides:  # one layer per side, H = 2 heads per language, 2 languages
        assert sel.sharing().diagonal().tolist() == [2, 2]
        assert sel.load().sum() == 2 * 2
    assert (tmp_path / "sharing_encoder.md").read_text().splitlines()[0] == "| task | es | it |"


def test_wer_per_language_from_decoding_with_tags(finished):
    exp = finished / "exp" / "asr_tiny_asr" / "decode_tiny_decode"
    results = (finished / "exp" / "RESULTS.md").read_text()
    for lang in ("es", "it"):
        refs = read_table(finished / "data" / f"test_{lang}" / "text")
        hyp_ids = [
            line.split(" ")[0] for line in (exp / f"test_{lang}" / "text").read_text().splitlines()
        ]
        assert sorted(hyp_ids) == sorted(refs) and len(refs) == 4
        score = json.loads((exp / f"test_{lang}" / "score_wer" / "result.json").read_text())
        assert re.search(rf"test_{lang}", results) and score["wer"] >= 0


def test_real_release_through_stage_two_on_the_fixture(tmp_path):
    recipe = make_recipe_copy("mtedx", "asr1", tmp_path)
    args = ["--stop_stage", "2", "--nj", "1", "--test_sets", "test_es test_fr"]
    out = run(recipe, args + ["--local_data_opts", "--langs es,fr"], env={"MTEDX": str(FIXTURE)})
    assert out.returncode == 0, out.stderr[-4000:]
    assert read_table(recipe / "data" / "test_fr" / "lang") == {
        "fr_Rt6Yu8Io0Pq_00000300_00001560": "fr"
    }
    frames = read_table(recipe / "dump" / "fbank" / "train" / "utt2num_frames")
    assert list(frames) == list(read_table(recipe / "data" / "train" / "segments"))
    assert (
        read_table(recipe / "dump" / "fbank" / "train" / "task_id")[
            "fr_Ww2Tq5kE8-Y_00000300_00001310"
        ]
        == "1"
    )
