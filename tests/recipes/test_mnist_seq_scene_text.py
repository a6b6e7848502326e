"""mnist_seq/ocr1 --scene_text true end to end on LMDBs in the deep-text-recognition-benchmark release layout."""

import json
import random
import re

import pytest
import yaml
from lmdb_fixtures import build_lmdb, word_image
from real_fixtures import SCENE_TEXT_TEST_SETS
from recipe_fixture import ONE_JOB, TINY_OCR, make_recipe_copy, run

TEST_SETS = SCENE_TEXT_TEST_SETS  # release LMDB name -> test set


def words(count, seed):
    rng = random.Random(seed)
    return [
        "".join(rng.choice("abcdefghij0123") for _ in range(rng.randint(2, 6)))
        for _ in range(count)
    ]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("scene_text")
    # Labels as the releases have them: mixed case and punctuation (normalised), one too long (skipped).
    build_lmdb(
        root / "training/MJ/MJ_train",
        [(word_image(w), w.upper() + "!") for w in words(24, 0)] + [(word_image("x"), "a" * 17)],
    )
    build_lmdb(root / "training/ST", [(word_image(w), w) for w in words(16, 1)])
    build_lmdb(root / "training/MJ/MJ_valid", [(word_image(w), w) for w in words(6, 2)])
    for n, name in enumerate(TEST_SETS):  # each with one over-long label: an error, not left out
        samples = [(word_image(w), w) for w in words(3, 10 + n)] + [(word_image("y"), "b" * 17)]
        build_lmdb(root / "evaluation" / name, samples)
    return root


def test_scene_text_setup_trains_two_stn_sharp_attention_and_scores_six_test_sets(
    release, tmp_path
):
    recipe = make_recipe_copy("mnist_seq", "ocr1", tmp_path)
    # The recipe's scene-text config at tiny size: λ_r and the region scale come from it.
    tiny = yaml.safe_load(TINY_OCR)
    paper = yaml.safe_load((recipe / "conf" / "train_ocr_scene_text.yaml").read_text())
    tiny["model_conf"].update(
        {k: paper["model_conf"][k] for k in ("lambda_r", "region_scale", "patch_size")}
    )
    (recipe / "conf" / "tiny.yaml").write_text(yaml.safe_dump(tiny))
    out = run(
        recipe,
        [
            "--scene_text",
            "true",
            "--attention",
            "pooling",
            "--ocr_config",
            "conf/tiny.yaml",
            "--local_data_opts",
            "--nj 2",  # MJ_train, ST and MJ_valid converted by two shard jobs each
            *ONE_JOB,
        ],
        env={"SCENE_TEXT": str(release)},
    )
    assert out.returncode == 0, out.stderr[-4000:]
    train_ids = (recipe / "data" / "train_st" / "text").read_text().splitlines()
    # MJ + ST, the over-long label left out; the shards' ids are the one-job conversion's
    assert [line.split()[0] for line in train_ids] == [f"mj-{n:02d}" for n in range(24)] + [
        f"st-{n:02d}" for n in range(16)
    ]
    assert all(re.fullmatch(r"\S+ [0-9a-z]+", line) for line in train_ids)
    dev_ids = (recipe / "data" / "dev_st" / "text").read_text().splitlines()
    assert [line.split()[0] for line in dev_ids] == [f"mjvalid-{n}" for n in range(6)]
    images = {
        dset: (recipe / "data" / dset / "image.scp").read_text() for dset in ("train_st", "dev_st")
    }
    for name, dset, usable in (
        ("mj", "train_st", 24),
        ("st", "train_st", 16),
        ("mjvalid", "dev_st", 6),
    ):
        for k in (1, 2):
            log = (recipe / "data" / "log" / f"scene_text_{name}.{k}.log").read_text()
            assert f"{usable // 2} images (shard {k}/2 of {usable})" in log, log
            assert f"/data/st_{name}/{k}/images/" in images[dset]
    config = (recipe / "exp" / "ocr_pooling_st" / "config.yaml").read_text()
    # the 40 training images in run.sh's 16 parts (--num_splits_ocr), trained on in turn
    splits = recipe / "exp" / "ocr_pooling_st" / "splits16"
    assert (splits / "image" / "num_splits").read_text() == "16"
    assert len((splits / "text" / "split.15").read_text().splitlines()) == 2
    assert "multiple_iterator: true" in config and "splits16/image" in config
    for setting in (
        "num_stn: 2",
        "region_scale: 2.0",
        "lambda_r: 0.1",
        "max_length: 16",
        "context: pooling",
    ):
        assert setting in config, setting
    results = (recipe / "exp" / "RESULTS.md").read_text()
    prep_log = (recipe / "data" / "log" / "data_prep.log").read_text()
    assert "data/test_svt: 4 images; 1 unusable kept as errors" in prep_log, prep_log
    for short in TEST_SETS.values():
        assert (
            recipe
            / "exp"
            / "ocr_pooling_st"
            / "decode"
            / f"test_{short}"
            / "score_acc"
            / "result.json"
        ).exists()
        result = recipe / "exp" / "ocr_pooling_st" / "decode" / f"test_{short}" / "score_acc"
        assert json.loads((result / "result.json").read_text())["num_images"] == 4
        assert f"test_{short}" in results


def test_reference_supervision_is_refused_for_scene_text(tmp_path):
    recipe = make_recipe_copy("mnist_seq", "ocr1", tmp_path)
    out = run(
        recipe,
        ["--scene_text", "true", "--attention", "reference"],
        env={"SCENE_TEXT": str(tmp_path)},
    )
    assert out.returncode != 0
    assert "reference" in out.stderr and "digit" in out.stderr
