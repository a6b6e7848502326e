"""ocr.sh --num_splits_ocr (ESPnet's option, as mt.sh's --num_splits_mt) on the mnist_seq mini corpus: image.scp,
text and the shape file in N parts, trained with ESPnet's multiple iterator and decoded, with the same number of
updates as the whole tables (the scene-text config's 400,000 iterations); by default the whole tables, and the
training's fingerprint of before. Also utils/pipeline.sh's split_train_opts, which mt.sh and ocr.sh share, and
run.sh's split of the real scene-text training."""

import subprocess
from pathlib import Path

import pytest
import torch
from recipe_fixture import (
    ONE_JOB,
    TINY_OCR,
    echo_recipe,
    echoed_args,
    make_recipe_copy,
    read_table,
    run,
)

ROOT = Path(__file__).resolve().parents[2]

# 24 training strips in batches of 2: 12 batches, 4 a part of 3. 5 iterations an epoch do not divide by 3:
# ESPnet gives part i (5 + i) // 3 of them (1, 2, 2), so an epoch keeps its 5 updates.
CONFIG = TINY_OCR.replace("batch_size: 16", "batch_size: 2").replace("max_epoch: 1", "max_epoch: 2")
CONFIG += "num_iters_per_epoch: 5\n"
UPDATES = 2 * 5
ARGS = [
    *ONE_JOB, "--length", "3", "--ocr_config", "conf/tiny.yaml",
    "--local_data_opts", "--num_train 24 --num_dev 4 --num_test 4",
]  # fmt: skip
ENV = {"MNIST": ""}
TABLES = {  # the split name of each training table (ocr.sh: the model input's name, a shape file's own)
    "image": "data/train_l3/image.scp",
    "text": "data/train_l3/text",
    "image_shape": "exp/ocr_stats_train_l3/train/image_shape",
}


def updates(exp: Path) -> int:
    """The optimizer steps of the training in exp (its checkpoint's Adam state), i.e. its updates."""
    checkpoint = torch.load(exp / "checkpoint.pth", map_location="cpu", weights_only=False)
    (optimizer,) = checkpoint["optimizers"]
    return {int(state["step"]) for state in optimizer["state"].values()}.pop()


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    """The mini recipe with a model trained on 3 parts end to end (exp/ocr_split3)."""
    recipe = make_recipe_copy("mnist_seq", "ocr1", tmp_path_factory.mktemp("ocr_splits"))
    (recipe / "conf" / "tiny.yaml").write_text(CONFIG)
    out = run(recipe, [*ARGS, "--num_splits_ocr", "3", "--ocr_tag", "split3"], ENV)
    assert out.returncode == 0, out.stderr[-4000:]
    return recipe


def test_every_training_table_is_split_alike_and_trained_on_by_parts(recipe):
    exp = recipe / "exp" / "ocr_split3"
    for name, table in TABLES.items():
        whole = read_table(recipe / table)
        parts = [read_table(exp / "splits3" / name / f"split.{i}") for i in range(3)]
        assert all(parts), name
        assert (
            sum(map(len, parts)) == len(whole)
            and {k: v for p in parts for k, v in p.items()} == whole
        )
        if name == "image":
            keys = [p.keys() for p in parts]
        assert [p.keys() for p in parts] == keys, name  # part i of each table: the same images
    config = (exp / "config.yaml").read_text()
    assert "multiple_iterator: true" in config
    assert all(f"splits3/{name}" in config for name in TABLES)
    log = (exp / "train.log").read_text()
    assert log.count("Building 2th iter-factory") == 2  # every part, each epoch
    assert updates(exp) == UPDATES  # num_iters_per_epoch is the epoch's, not each part's
    refs = read_table(recipe / "data" / "test_l3" / "text")
    decoded = read_table(exp / "decode" / "test_l3" / "text")
    assert sorted(decoded) == sorted(refs)


def test_default_trains_on_the_whole_tables_as_many_updates_and_another_count_is_another(recipe):
    args = [*ARGS, "--ocr_tag", "whole", "--stage", "4", "--stop_stage", "4"]
    out = run(recipe, args, ENV)
    assert out.returncode == 0, out.stderr[-4000:]
    exp = recipe / "exp" / "ocr_whole"
    config = (exp / "config.yaml").read_text()
    assert "multiple_iterator: false" in config and "data/train_l3/image.scp" in config
    assert not list(exp.glob("splits*"))
    assert updates(exp) == UPDATES
    # --num_splits_ocr 1 is the default: the same training; another N is another one, not continued here
    out = run(recipe, [*args, "--num_splits_ocr", "1"], ENV)
    assert "Stage 4: training: already done" in out.stderr
    out = run(recipe, [*args, "--num_splits_ocr", "2"], ENV)
    assert out.returncode != 0 and "written with other options" in out.stderr


def test_a_split_count_that_is_no_positive_integer_is_refused(tmp_path):
    recipe = make_recipe_copy("mnist_seq", "ocr1", tmp_path)
    out = run(recipe, [*ARGS, "--num_splits_ocr", "0"], ENV)
    assert out.returncode != 0
    assert "--num_splits_ocr must be a positive integer, not '0'" in out.stderr


# utils/pipeline.sh's split_train_opts ARRAY EXP N as a training stage calls it
SPLIT_OPTS = f"""set -euo pipefail
. "{ROOT}/tools/activate.sh"
train_cmd="{ROOT}/utils/run.py" stage_fingerprint=fp1
. "{ROOT}/utils/pipeline.sh"
opts=("$@")
split_train_opts opts exp 2
printf '%s\\n' "${{opts[@]}}"
"""


def test_shared_split_train_opts_gives_the_training_its_tables_parts(tmp_path):
    (tmp_path / "image.scp").write_text("u1 a.png\nu2 b.png\n")
    (tmp_path / "text").write_text("u1 x\nu2 y\n")
    (tmp_path / "shape").mkdir()
    (tmp_path / "shape" / "image_shape").write_text("u2 32,20\nu1 32,10\n")
    opts = [
        "--train_data_path_and_name_and_type", "image.scp,image,image",
        "--train_data_path_and_name_and_type", "text,text,text",
        "--valid_data_path_and_name_and_type", "dev/text,text,text",
        "--train_shape_file", "shape/image_shape", "--valid_shape_file", "dev/image_shape",
        "--model_conf", "context=chain",
    ]  # fmt: skip
    out = subprocess.run(
        ["bash", "-c", SPLIT_OPTS, "split", *opts], cwd=tmp_path, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "--train_data_path_and_name_and_type", "exp/splits2/image,image,image",
        "--train_data_path_and_name_and_type", "exp/splits2/text,text,text",
        "--valid_data_path_and_name_and_type", "dev/text,text,text",
        "--train_shape_file", "exp/splits2/image_shape", "--valid_shape_file", "dev/image_shape",
        "--model_conf", "context=chain", "--multiple_iterator", "true",
    ]  # fmt: skip
    splits = tmp_path / "exp" / "splits2"
    assert (splits / "image" / "split.1").read_text() == "u2 b.png\n"
    assert (splits / "image_shape" / "split.1").read_text() == "u2 32,20\n"  # sorted alike
    assert (splits / "text" / "num_splits").read_text() == "2"
    assert (tmp_path / "exp" / "log" / "split_train.log").exists()


def test_run_sh_splits_the_real_scene_text_training_only(tmp_path):
    recipe = echo_recipe("mnist_seq", "ocr1", "ocr.sh", tmp_path)
    scene = echoed_args(recipe, ["--scene_text", "true"], env={"SCENE_TEXT": str(tmp_path)})
    # 16 parts of ~0.8M of the 12.7M images, which share each epoch's 10,000 iterations evenly
    assert scene.get("--num_splits_ocr") == "16"
    config = (recipe / "conf" / "train_ocr_scene_text.yaml").read_text()
    assert "num_iters_per_epoch: 10000" in config and 10000 % 16 == 0
    digits = echoed_args(recipe, [], env={"MNIST": ""})
    assert "--num_splits_ocr" not in digits
