"""egs/wmt/mt1 end to end on tiny mini corpora: the multilingual mode (shared and head-selection models,
task ids from the data, BLEU per language) and the LegoNN compose scenario (Ro-En encoder + De-En decoder
from the module inventory, decoded with no training, then fine-tuned from the composed weights)."""

import json
from pathlib import Path

import pytest
import torch
import yaml
from recipe_fixture import make_recipe_copy, run
from wmt_fixture import COMMON, LEGO_ARGS, tiny_wmt_recipe

M2O_ARGS = [
    "--mode", "multilingual_m2o", "--tgt_nbpe", "60", "--test_sets", "m2o_test_de m2o_test_kk",
    "--local_data_opts",
    "--task multilingual_m2o --mini_train_sizes de=60,kk=15 --mini_valid_size 4 --mini_test_size 4",
]  # fmt: skip


def read_table(path):
    return dict(line.split(" ", 1) for line in path.read_text(encoding="utf-8").splitlines())


@pytest.fixture(scope="module")
def multilingual(tmp_path_factory):
    recipe = tiny_wmt_recipe(tmp_path_factory.mktemp("wmt"))
    for config in ("shared", "group"):
        out = run(
            recipe, [*M2O_ARGS, *COMMON, "--mt_config", f"conf/tiny_{config}.yaml"], {"WMT": ""}
        )
        assert out.returncode == 0, out.stderr[-4000:]
    return recipe


@pytest.fixture(scope="module")
def composed(wmt_lego_deen):
    recipe = wmt_lego_deen
    for mode in ("lego_roen", "lego_compose"):  # lego_deen: the session's run
        out = run(recipe, ["--mode", mode, *LEGO_ARGS], {"WMT": ""})
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


def test_compose_uses_the_roen_encoder_and_deen_decoder_weights(composed):
    exp = composed / "exp"
    roen = torch.load(exp / "lego_roen/mt_tiny_lego/valid.acc.ave.pth", map_location="cpu")
    deen = torch.load(exp / "lego_deen/mt_tiny_lego/valid.acc.ave.pth", map_location="cpu")
    model = torch.load(exp / "lego_compose/mt_composed_tiny_lego/model.pth", map_location="cpu")
    assert set(model) == set(roen)
    for key, value in model.items():
        source = roen if key.startswith(("encoder.", "frontend.")) else deen
        assert torch.equal(value, source[key]), key
    decoder = torch.load(exp / "lego_deen/mt_tiny_lego/modules/decoder.pt", weights_only=False)
    tokens = (composed / "data/token_list/lego_mini/tokens.txt").read_text().split()
    assert decoder["input_vocab"] == tokens and decoder["kind"] == "decoder"


def test_composed_model_decoded_before_and_after_fine_tuning(composed):
    exp = composed / "exp" / "lego_compose"
    refs = read_table(composed / "data" / "roen_test_wmttest" / "text.en")
    for tag in ("composed_tiny_lego", "composed_tiny_lego_finetuned"):
        decoded = exp / f"mt_{tag}" / "decode_decode_mt_mini" / "roen_test_wmttest"
        assert sorted(read_table(decoded / "text")) == sorted(refs) and len(refs) == 6
        assert json.loads((decoded / "score_bleu" / "result.json").read_text())["bleu"] >= 0
    tuned = exp / "mt_composed_tiny_lego_finetuned"
    config = yaml.safe_load((tuned / "config.yaml").read_text())
    assert config["init_param"] == [
        str(exp.relative_to(composed) / "mt_composed_tiny_lego/model.pth")
    ]
    assert (
        config["max_epoch"] == 3 and config["optim_conf"]["lr"] == 0.0002
    )  # finetune_lego_mini.yaml
    before = torch.load(exp / "mt_composed_tiny_lego/model.pth", map_location="cpu")
    after = torch.load(tuned / "valid.acc.ave.pth", map_location="cpu")
    assert any(not torch.equal(before[k], after[k]) for k in before)


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
        [*args, "--local_data_opts", "--task multilingual_m2o --langs de"],
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
