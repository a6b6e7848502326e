"""egs/wmt/mt1 end to end on a tiny mini corpus in the multilingual mode (shared and head-selection
models, task ids from the data, BLEU per language), and the real release layout through filtering. The
LegoNN modes: test_wmt_lego_recipe.py."""

import json
from pathlib import Path

import pytest
import torch
from recipe_fixture import make_recipe_copy, read_table, run
from wmt_fixture import COMMON, tiny_wmt_recipe

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
M2O_ARGS = [
    "--mode", "multilingual_m2o", "--tgt_nbpe", "60", "--test_sets", "m2o_test_de m2o_test_kk",
    "--local_data_opts",
    "--task multilingual_m2o --mini_train_sizes de=60,kk=15 --mini_valid_size 4 --mini_test_size 4",
]  # fmt: skip


@pytest.fixture(scope="module")
def multilingual(tmp_path_factory):
    recipe = tiny_wmt_recipe(tmp_path_factory.mktemp("wmt"))
    for config in ("shared", "group"):
        out = run(
            recipe, [*M2O_ARGS, *COMMON, "--mt_config", f"conf/tiny_{config}.yaml"], {"WMT": ""}
        )
        assert out.returncode == 0, out.stderr[-4000:]
    return recipe


def test_multilingual_data_unequal_languages_tagged_from_the_releases(multilingual):
    data = multilingual / "data"
    lang = read_table(data / "m2o_train" / "lang")
    assert sorted(lang.values()) == ["de"] * 60 + ["kk"] * 15
    ids = read_table(multilingual / "dump/multilingual_m2o/raw/m2o_train_filtered/task_id")
    assert {u: {"de": "0", "kk": "1"}[lang[u]] for u in ids} == ids
    source = read_table(data / "m2o_test_kk" / "text.mul")
    assert len(source) == 4 and all(u.startswith("kk-wmttest-kk") for u in source)
    assert all(any("\u0400" <= ch <= "\u04ff" for ch in text) for text in source.values())  # Kazakh


def test_head_selection_trained_per_language_and_shared_model_has_none(multilingual):
    exp = multilingual / "exp" / "multilingual_m2o"
    group = torch.load(exp / "mt_tiny_group" / "valid.acc.ave.pth", map_location="cpu")
    logits = [v for k, v in group.items() if k.endswith("selection_logits")]
    assert len(logits) == 1 and logits[0].shape == (2, 4)  # encoder only (M2O: by source language)
    assert all(logits[0][task].abs().sum() > 0 for task in (0, 1))
    shared = torch.load(exp / "mt_tiny_shared" / "valid.acc.ave.pth", map_location="cpu")
    assert not [k for k in shared if "selection" in k]


def test_bleu_per_language_for_both_models(multilingual):
    exp = multilingual / "exp" / "multilingual_m2o"
    results = (exp / "RESULTS.md").read_text()
    for config in ("tiny_shared", "tiny_group"):
        for lang in ("de", "kk"):
            decoded = exp / f"mt_{config}" / "decode_decode_mt_mini" / f"m2o_test_{lang}"
            refs = read_table(multilingual / "data" / f"m2o_test_{lang}" / "text.en")
            assert sorted(read_table(decoded / "text")) == sorted(refs)
            assert json.loads((decoded / "score_bleu" / "result.json").read_text())["bleu"] >= 0
        assert f"mt_{config}" in results


def test_real_release_layout_through_filtering_on_the_fixtures(tmp_path):
    """WMT set: ${WMT}/multilingual/de-en/{train,dev,test} with the fixture files (plain, tsv, sgm, xml)."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "wmt"
    release = tmp_path / "wmt" / "multilingual" / "de-en"
    for part, pattern in (("train", "[en][ue][rw]*[!m]"), ("dev", "*.sgm"), ("test", "*.xml")):
        (release / part).mkdir(parents=True)
        for path in fixture.glob(pattern):
            (release / part / path.name).write_bytes(path.read_bytes())
    assert len(list((release / "train").iterdir())) == 3  # europarl de + en, news-commentary tsv
    recipe = make_recipe_copy("wmt", "mt1", tmp_path / "recipe")
    args = ["--mode", "multilingual_m2o", "--stop_stage", "2", "--test_sets", "m2o_test_de"]
    out = run(
        recipe,
        # the fixture's dev and test sets are WMT14's newstest2013 and WMT22's wmttest2022, not the
        # defaults of WMT19 (newstest2018, newstest2019)
        [
            *args,
            "--local_data_opts",
            "--task multilingual_m2o --langs de --multilingual_dev de=newstest2013"
            " --multilingual_test de=wmttest2022",
        ],
        {"WMT": str(tmp_path / "wmt")},
    )
    assert out.returncode == 0, out.stderr[-4000:]
    train = read_table(recipe / "dump/multilingual_m2o/raw/m2o_train_filtered/text.mul")
    assert read_table(recipe / "data/m2o_train/text.mul")["de-europarl-v7-000000004"] == (
        "Bitte erheben Sie sich."
    )
    # the real setup's length-ratio filter (1.5) drops it: 4 German words, 2 English
    assert len(train) == 4 and "de-europarl-v7-000000004" not in train
    assert read_table(recipe / "data/m2o_valid/task_id")["de-newstest2013-1012-bbc-0002"] == "0"
    test = read_table(recipe / "data/m2o_test_de/text.en")
    assert test["de-wmttest2022-ecommerce_12-0001"] == "Free shipping"


def test_lego_stage_1_on_the_release_file_names(tmp_path):
    """egs/wmt/mt1 --mode lego_ende, stage 1 (data.sh --task lego, then every set run.sh names checked) on
    WMT's file names: the test sets run.sh asks for exist for all three pairs, valid is the paper's dev set."""
    recipe = make_recipe_copy("wmt", "mt1", tmp_path)
    opts = "--task lego --ende_nbpe 30 --deroen_nbpe 30 --bpe_opts --hard_vocab_limit=false"
    out = run(
        recipe,
        ["--mode", "lego_ende", "--stop_stage", "1", "--local_data_opts", opts],
        {"WMT": str(FIXTURES / "wmt" / "lego")},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    data = recipe / "data"
    assert sorted(p.name for p in data.glob("*_test_*")) == [
        "deen_test_newstest2019",
        *(f"ende_test_newstest{year}" for year in (2011, 2012, 2014, 2015, 2016)),
        "roen_test_newstest2016",
    ]
    # the De-En newstest2015 files are the same set in the other direction: the En-De ones were read
    assert read_table(data / "ende_test_newstest2015" / "text.en")["newstest2015-1-news-0001"] == (
        "newstest2015 ende sentence 1"
    )
    for pair, dev in (("ende", "newstest2013"), ("deen", "newstest2018"), ("roen", "newsdev2016")):
        ids = read_table(data / f"{pair}_valid" / "text")
        assert {i.rsplit("-", 3)[0] for i in ids} == {dev}, pair
    log = (data / "log" / "data_prep.log").read_text()
    assert "newstest2012 (newstest2012-src.en.sgm + newstest2012-ref.de.sgm) not read" in log
