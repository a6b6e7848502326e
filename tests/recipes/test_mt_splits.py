"""mt.sh --num_splits_mt (ESPnet's option) on the mini WMT corpus' multilingual mode: every training table (source,
target, the --task_ids table) and shape file in N parts, trained with ESPnet's multiple iterator and decoded; by
default the whole tables, and the training's fingerprint of before."""

import subprocess
from pathlib import Path

import pytest
from recipe_fixture import echo_recipe, echoed_args, read_table, run
from wmt_fixture import COMMON, tiny_wmt_recipe

ROOT = Path(__file__).resolve().parents[2]

ARGS = [
    "--mode", "multilingual_m2o", "--tgt_nbpe", "60", "--test_sets", "m2o_test_de m2o_test_kk",
    "--mt_config", "conf/tiny_shared.yaml", *COMMON, "--local_data_opts",
    "--task multilingual_m2o --mini_train_sizes de=40,kk=10 --mini_valid_size 4 --mini_test_size 4",
]  # fmt: skip
ENV = {"WMT": ""}
# the split name of each training table (mt.sh: the model input's name, a shape file's own) and the table
TABLES = {
    "src_text": "dump/multilingual_m2o/raw/m2o_train_filtered/text.mul",
    "text": "dump/multilingual_m2o/raw/m2o_train_filtered/text.en",
    "task_id": "dump/multilingual_m2o/raw/m2o_train_filtered/task_id",
    "src_text_shape.bpe": "train/src_text_shape.bpe",
    "text_shape.bpe": "train/text_shape.bpe",
}


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    """The tiny WMT recipe with a model trained on 2 parts end to end (exp/multilingual_m2o/mt_split2)."""
    recipe = tiny_wmt_recipe(tmp_path_factory.mktemp("mt_splits"))
    out = run(recipe, [*ARGS, "--num_splits_mt", "2", "--mt_tag", "split2"], ENV)
    assert out.returncode == 0, out.stderr[-4000:]
    return recipe


def test_every_training_table_is_split_alike_and_trained_on_by_parts(recipe):
    exp = recipe / "exp" / "multilingual_m2o" / "mt_split2"
    (stats,) = (recipe / "exp" / "multilingual_m2o").glob("mt_stats_*")
    for name, table in TABLES.items():
        whole = read_table((recipe if table.startswith("dump") else stats) / table)
        parts = [read_table(exp / "splits2" / name / f"split.{i}") for i in (0, 1)]
        assert all(parts) and not parts[0].keys() & parts[1].keys(), name
        assert {**parts[0], **parts[1]} == whole, name  # a partition of the table
        if name == "src_text":
            keys = [p.keys() for p in parts]
        assert [p.keys() for p in parts] == keys, name  # part i of each table: the same pairs
    config = (exp / "config.yaml").read_text()
    assert "multiple_iterator: true" in config
    assert all(f"splits2/{name}" in config for name in TABLES)
    log = (exp / "train.log").read_text()
    assert "Building 0th iter-factory" in log and "Building 1th iter-factory" in log
    for lang in ("de", "kk"):
        refs = read_table(recipe / "data" / f"m2o_test_{lang}" / "text.en")
        decoded = read_table(exp / "decode_decode_mt_mini" / f"m2o_test_{lang}" / "text")
        assert sorted(decoded) == sorted(refs)


def test_default_trains_on_the_whole_tables_and_another_split_count_is_another_training(recipe):
    args = [*ARGS, "--mt_tag", "whole", "--stage", "8", "--stop_stage", "8"]
    out = run(recipe, args, ENV)
    assert out.returncode == 0, out.stderr[-4000:]
    exp = recipe / "exp" / "multilingual_m2o" / "mt_whole"
    config = (exp / "config.yaml").read_text()
    assert "multiple_iterator: false" in config and "m2o_train_filtered/task_id" in config
    assert not list(exp.glob("splits*"))
    # --num_splits_mt 1 is the default: the same training; another N is another one, not continued here
    out = run(recipe, [*args, "--num_splits_mt", "1"], ENV)
    assert "Stage 8: MT training: already done" in out.stderr
    out = run(recipe, [*args, "--num_splits_mt", "2"], ENV)
    assert out.returncode != 0 and "written with other options" in out.stderr


def test_a_split_count_that_is_no_positive_integer_is_refused(recipe):
    out = run(recipe, [*ARGS, "--num_splits_mt", "two"], ENV)
    assert out.returncode != 0
    assert "--num_splits_mt must be a positive integer, not 'two'" in out.stderr


# utils/pipeline.sh's split_training_data LOG SPLITS N FILE NAME... as a pipeline calls it in a training stage
SPLIT = f"""set -euo pipefail
. "{ROOT}/tools/activate.sh"
train_cmd="{ROOT}/utils/run.py" stage_fingerprint=fp1
. "{ROOT}/utils/pipeline.sh"
split_training_data log/split.log splits 2 "$@"
"""


def split(tmp_path, *args):
    return subprocess.run(
        ["bash", "-c", SPLIT, "split", *args], cwd=tmp_path, capture_output=True, text=True
    )


def test_shared_split_sorts_each_table_alike_and_refuses_other_ids(tmp_path):
    (tmp_path / "a").write_text("u1 x\nu2 y\nu3 z\n")
    (tmp_path / "b").write_text(
        "u3 3\nu1 1\nu2 2\n"
    )  # in another order, as a stats job writes them
    out = split(tmp_path, "a", "text", "b", "shape")
    assert out.returncode == 0, out.stderr + (tmp_path / "log" / "split.log").read_text()
    parts = {
        n: [(tmp_path / "splits" / n / f"split.{i}").read_text() for i in (0, 1)]
        for n in ("text", "shape")
    }
    assert parts == {"text": ["u1 x\nu3 z\n", "u2 y\n"], "shape": ["u1 1\nu3 3\n", "u2 2\n"]}
    assert sorted(p.name for p in (tmp_path / "splits").iterdir()) == [".done", "shape", "text"]
    # the same fingerprint: made once (a training stage rerun reuses them)
    (tmp_path / "a").write_text("u1 x\n")
    assert split(tmp_path, "a", "text", "b", "shape").returncode == 0
    assert (tmp_path / "splits" / "text" / "split.0").read_text() == "u1 x\nu3 z\n"
    (tmp_path / "splits" / ".done").unlink()
    (tmp_path / "a").write_text("u1 x\nu2 y\nu4 z\n")
    assert split(tmp_path, "a", "text", "b", "shape").returncode != 0
    assert "Not sorted or not having same keys" in (tmp_path / "log" / "split.log").read_text()


@pytest.mark.parametrize("mode", ["multilingual_m2o", "multilingual_o2m", "lego_deen"])
def test_run_sh_splits_the_real_multilingual_trainings_only(tmp_path, mode):
    recipe = echo_recipe("wmt", "mt1", "mt.sh", tmp_path)
    real = echoed_args(recipe, ["--mode", mode], env={"WMT": str(tmp_path / "wmt")})
    mini = echoed_args(recipe, ["--mode", mode], env={"WMT": ""})
    assert real.get("--num_splits_mt") == ("10" if mode.startswith("multilingual") else None)
    assert "--num_splits_mt" not in mini  # ESPnet refuses fewer lines than parts
