"""egs/TEMPLATE/lm1/lm.sh on the LibriSpeech mini corpus' LM text: training by parts (--num_splits_lm, ESPnet's
multiple iterator), the whole text by default, and the text preparation refusing a repeated id."""

import subprocess

import pytest
from recipe_fixture import TINY_ARGS, read_table, run, tiny_librispeech_recipe

LM_ARGS = [
    "--nj", "1", "--train_num_threads", "1", "--lm_config", "conf/tiny_lm.yaml", "--token_type", "char",
    "--lm_train_text", "data/train/text data/lm_extended/text", "--lm_dev_text", "data/dev/text",
]  # fmt: skip


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    """The tiny librispeech recipe after its data preparation (stage 1: transcripts and the extended LM text)."""
    recipe = tiny_librispeech_recipe(tmp_path_factory.mktemp("lm"))
    out = run(recipe, TINY_ARGS + ["--stop_stage", "1"])
    assert out.returncode == 0, out.stderr[-3000:]
    return recipe


def lm_sh(recipe, *args):
    return subprocess.run(
        ["./lm.sh", *LM_ARGS, *args], cwd=recipe, capture_output=True, text=True, timeout=900
    )


def test_split_training_partitions_the_text_and_trains_on_every_part(recipe):
    out = lm_sh(recipe, "--num_splits_lm", "2", "--lm_exp", "exp/lm_split")
    assert out.returncode == 0, out.stderr[-4000:]
    exp = recipe / "exp" / "lm_split"
    assert (exp / "valid.loss.ave.pth").exists() and "perplexity" in out.stderr
    text = read_table(recipe / "exp" / "lm_stats_char" / "text" / "train.txt")
    parts = [read_table(exp / "splits2" / "lm_train.txt" / f"split.{i}") for i in (0, 1)]
    shapes = [read_table(exp / "splits2" / "text_shape" / f"split.{i}") for i in (0, 1)]
    assert all(parts) and not parts[0].keys() & parts[1].keys()
    assert {**parts[0], **parts[1]} == text  # a partition of the training text
    assert [s.keys() for s in shapes] == [p.keys() for p in parts]  # each part with its own lengths
    config = (exp / "config.yaml").read_text()
    assert "multiple_iterator: true" in config and "splits2/lm_train.txt" in config
    log = (exp / "train.log").read_text()
    assert "Building 0th iter-factory" in log and "Building 1th iter-factory" in log


def test_default_trains_on_the_whole_text_and_the_split_count_redoes_training(recipe):
    args = ["--lm_exp", "exp/lm_whole", "--stop_stage", "4"]
    out = lm_sh(recipe, *args)
    assert out.returncode == 0, out.stderr[-4000:]
    exp = recipe / "exp" / "lm_whole"
    config = (exp / "config.yaml").read_text()
    assert "multiple_iterator: false" in config and "lm_stats_char/text/train.txt" in config
    assert not list(exp.glob("splits*"))
    assert "Stage 4: LM training: already done" in lm_sh(recipe, *args, "--stage", "4").stderr
    # another split count is another training: this checkpoint is not continued under it
    out = lm_sh(recipe, *args, "--stage", "4", "--num_splits_lm", "2")
    assert out.returncode != 0 and "written with other options" in out.stderr


def test_the_steps_over_the_whole_text_are_jobs(recipe):
    """Standalone (no --token_list): counting, the token list, the ids and the shapes of the LM text (GBs of
    it) run as jobs of the backend, each logged beside its output, not in the pipeline's shell."""
    stats = recipe / "exp" / "lm_stats_jobs"
    out = lm_sh(recipe, "--nbpe", "7", "--lm_stats_dir", "exp/lm_stats_jobs", "--stop_stage", "3")
    assert out.returncode == 0, out.stderr[-4000:]
    text = read_table(stats / "text" / "train.txt")
    assert f"LM training text: {len(text)} lines" in out.stderr
    logs = [stats / "text/log/sort_text.log", recipe / "data/token_list/char7/log/token_list.log",
            stats / "text/log/keys.log", stats / "logdir/token_dim_text.log"]  # fmt: skip
    for log in logs:
        log_text = log.read_text()
        assert "# Started at " in log_text and "# Ended (code 0)" in log_text, log
    assert (stats / "text" / "train.keys").read_text().split() == list(text)
    vocab = len((recipe / "data/token_list/char7/tokens.txt").read_text().splitlines())
    shapes = (stats / "train" / "text_shape.char").read_text().splitlines()
    assert len(shapes) == len(text) and all(s.endswith(f",{vocab}") for s in shapes)


def test_a_repeated_id_fails_the_text_preparation_naming_it_and_its_lines(recipe):
    (recipe / "data" / "more").mkdir()
    extra = recipe / "data" / "more" / "text"
    second = (recipe / "data" / "train" / "text").read_text().splitlines()[1]
    extra.write_text(f"other-1 one two\n{second}\n")
    out = lm_sh(
        recipe,
        *[
            "--lm_train_text",
            "data/train/text data/more/text",
            "--lm_stats_dir",
            "exp/lm_stats_repeated",
        ],
        *["--stop_stage", "1"],
    )
    assert out.returncode != 0
    key = second.split()[0]
    assert f"id {key} is repeated, at data/train/text:2 data/more/text:2" in out.stderr
    assert not list((recipe / "exp" / "lm_stats_repeated" / "text").glob("train.txt*"))


def test_plain_text_files_get_ids_of_their_own(recipe):
    out = lm_sh(
        recipe,
        *["--lm_train_text", "data/dev/text data/dev/text", "--lm_text_has_ids", "false"],
        *["--lm_stats_dir", "exp/lm_stats_plain", "--stop_stage", "1"],
    )
    assert out.returncode == 0, out.stderr[-3000:]
    text = (recipe / "exp" / "lm_stats_plain" / "text" / "train.txt").read_text().splitlines()
    assert (
        len(text) == 12
        and text[0].startswith("lm0_000000001 ")
        and text[6].startswith("lm1_000000001 ")
    )


def test_a_split_count_that_is_no_positive_integer_is_refused(recipe):
    out = lm_sh(recipe, "--num_splits_lm", "0")
    assert (
        out.returncode != 0 and "--num_splits_lm must be a positive integer, not '0'" in out.stderr
    )
