"""egs/iwslt14/mt1 end to end on a tiny mini corpus: every stage, joint vocabulary, LM fusion, λ grid, reruns."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from recipe_fixture import make_recipe_copy, read_table, run

TINY_MT = """\
model: cutoff
model_conf: {token_cutoff_rate: 0.05, num_augmented: 1, consistency_weight: 5.0, lsm_weight: 0.1}
frontend: embed
frontend_conf: {embed_dim: 32}
encoder: transformer
encoder_conf: {output_size: 32, attention_heads: 2, linear_units: 64, num_blocks: 1, input_layer: null,
               use_flash_attn: false}
decoder: transformer
decoder_conf: {attention_heads: 2, linear_units: 64, num_blocks: 1, use_flash_attn: false}
optim: adam
optim_conf: {lr: 0.005}
batch_type: folded
batch_size: 16
max_epoch: 4
best_model_criterion: [[valid, acc, max]]
keep_nbest_models: 2
num_workers: 0
use_tensorboard: false
use_matplotlib: false
num_att_plot: 0
"""
TINY_LM = """\
lm: transformer_tied
lm_conf: {pos_enc: sinusoidal, embed_unit: 16, att_unit: 16, head: 2, unit: 32, layer: 1}
optim: adam
batch_type: folded
batch_size: 16
max_epoch: 1
best_model_criterion: [[valid, loss, min]]
num_workers: 0
use_tensorboard: false
use_matplotlib: false
"""
TINY_DECODE = "beam_size: 2\nctc_weight: 0.0\nlm_weight: 0.1\nmaxlenratio: 3.0\n"

TINY_ARGS = [
    "--mt_config",
    "conf/tiny_mt.yaml",
    "--lm_config",
    "conf/tiny_lm.yaml",
    "--inference_config",
    "conf/tiny_decode.yaml",
    "--src_nbpe",
    "40",
    "--tgt_nbpe",
    "40",
    "--nj",
    "1",
    "--inference_nj",
    "1",
    "--train_num_threads",
    "1",
    "--local_data_opts",
    "--mini_splits train=150,valid=10,test=12 --mini_lm_sentences 200 --mini_lm_wide_sentences 50",
]


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    recipe = make_recipe_copy("iwslt14", "mt1", tmp_path_factory.mktemp("recipe"))
    (recipe / "conf" / "tiny_mt.yaml").write_text(TINY_MT)
    (recipe / "conf" / "tiny_lm.yaml").write_text(TINY_LM)
    (recipe / "conf" / "tiny_decode.yaml").write_text(TINY_DECODE)
    return recipe


@pytest.fixture(scope="module")
def finished(recipe):
    out = run(recipe, TINY_ARGS)
    assert out.returncode == 0, out.stderr[-4000:]
    return recipe, out


def test_data_dirs_follow_the_mt_convention(finished):
    recipe, _ = finished
    for split, n in (("train", 150), ("valid", 10), ("test", 12)):
        de = read_table(recipe / "data" / split / "text.de")
        en = read_table(recipe / "data" / split / "text.en")
        assert len(de) == n and list(de) == list(en)
        assert (
            read_table(recipe / "data" / split / "text") == en
        )  # ESPnet's "text" is the target side
        # The German source as German writes numbers, one compound ("dreihundertzwölf"; local/data.sh),
        # the English target several words
        assert all(len(v.split()) == 1 for v in de.values())
        assert max(len(v.split()) for v in en.values()) > 3
    removed = recipe / "dump" / "raw" / "train_filtered" / "removed.txt"
    assert (
        removed.exists() and removed.read_text() == ""
    )  # nothing too long in the mini corpus, and said so


def test_all_stages_decode_score_and_tabulate(finished):
    recipe, out = finished
    exp = recipe / "exp" / "mt_tiny_mt"
    assert (exp / "valid.acc.ave.pth").exists()
    config = (exp / "config.yaml").read_text()
    assert "model: cutoff" in config and "src_token_list" in config
    for split, n in (("valid", 10), ("test", 12)):
        ref_ids = list(read_table(recipe / "data" / split / "text.en"))
        lines = (exp / "decode_tiny_decode" / split / "text").read_text().splitlines()
        assert [line.split(" ", 1)[0] for line in lines] == ref_ids
        result = json.loads(
            (exp / "decode_tiny_decode" / split / "score_bleu" / "result.json").read_text()
        )
        assert result["num_utts"] == n
        assert result["signature"].startswith(
            "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:"
        )
        assert (
            "signature: nrefs:1|"
            in (exp / "decode_tiny_decode" / split / "score_bleu" / "result.txt").read_text()
        )
    assert re.search(r"test: BLEU = [0-9.]+ .* signature: nrefs:1", out.stderr)
    results = (recipe / "exp" / "RESULTS.md").read_text()
    row = re.search(
        r"\| mt_tiny_mt / decode_tiny_decode \| ([0-9.]+) \| ([0-9.]+) \|", results
    )  # valid, test
    assert row, results
    test = json.loads(
        (exp / "decode_tiny_decode" / "test" / "score_bleu" / "result.json").read_text()
    )
    assert float(row.group(2)) == pytest.approx(test["bleu"], abs=0.01)
    assert "Exact match [%]" in results and "torch" in results


def test_rerun_skips_finished_stages(finished):
    recipe, _ = finished
    out = run(recipe, TINY_ARGS)
    assert out.returncode == 0, out.stderr[-3000:]
    for n in (1, 2, 3, 7, 8, 9, 10):
        assert re.search(rf"Stage {n}: .*: already done", out.stderr), (n, out.stderr[-3000:])


def test_held_out_ending_is_absent_from_mt_training_only(finished):
    recipe, _ = finished
    # Utterance ids end with the number: spk03-0467.
    train = read_table(recipe / "data" / "train" / "text.en")
    assert not any(k.endswith("7") for k in train)
    # Nor "seven hundred", "seven thousand": the word itself is held out.
    assert not any("seven" in v.split() for v in train.values())
    extended = read_table(recipe / "data" / "lm_extended" / "text")
    assert any(k.endswith("7") for k in extended)
    assert any("seven" in v.split() for v in extended.values())
    held_out = {
        v
        for split in ("valid", "test")
        for v in read_table(recipe / "data" / split / "text.en").values()
    }
    assert not held_out & set(extended.values())


def test_extended_lm_and_lm_weight_grid(finished):
    recipe, _ = finished
    out = run(
        recipe,
        TINY_ARGS
        + ["--stage", "4", "--use_lm", "true", "--lm_text", "extended", "--lm_weights", "0 0.3"],
    )
    assert out.returncode == 0, out.stderr[-4000:]
    lm_exp = recipe / "exp" / "lm_extended"
    assert (lm_exp / "valid.loss.ave.pth").exists() and "lm: transformer_tied" in (
        lm_exp / "config.yaml"
    ).read_text()
    lm_text = (
        (recipe / "exp" / "lm_stats_extended_bpe_unigram40_en" / "text" / "train.txt")
        .read_text()
        .splitlines()
    )
    extended = (recipe / "data" / "lm_extended" / "text").read_text().splitlines()
    assert len(lm_text) == 150 + len(extended)  # MT training targets + the extended text
    assert re.search(r"perplexity [0-9.]+", out.stderr)
    exp = recipe / "exp" / "mt_tiny_mt"
    bleu = {
        w: json.loads(
            (
                exp / f"decode_lm_extended_lmw{w}" / "valid" / "score_bleu" / "result.json"
            ).read_text()
        )["bleu"]
        for w in ("0", "0.3")
    }
    best = "0" if bleu["0"] >= bleu["0.3"] else "0.3"
    assert f"LM weight {best} gives the best valid BLEU" in out.stderr
    tuned = exp / f"decode_lm_extended_tuned_lmw{best}"
    assert (tuned / "test" / "score_bleu" / "result.json").exists()
    assert not any((exp / f"decode_lm_extended_lmw{w}" / "test").exists() for w in ("0", "0.3"))
    log = (tuned / "test" / "logdir" / "mt_inference.1.log").read_text().splitlines()[0]
    assert f"--lm_weight {best}" in log and "--lm_file" in log
    results = (recipe / "exp" / "RESULTS.md").read_text()
    assert re.search(
        rf"\| mt_tiny_mt / decode_lm_extended_tuned_lmw{best} \| - \| [0-9.]+ \|", results
    ), results
    for w in ("0", "0.3"):
        assert re.search(
            rf"\| mt_tiny_mt / decode_lm_extended_lmw{w} \| [0-9.]+ \| - \|", results
        ), results
    assert f"best {best}, used for test" in results
    # A rerun of the grid decodes nothing again.
    again = run(
        recipe, TINY_ARGS + ["--use_lm", "true", "--lm_text", "extended", "--lm_weights", "0 0.3"]
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert (
        "Stage 9: decoding\n" not in again.stderr
        and "Stage 9: decoding: already done" in again.stderr
    )


def test_joint_vocabulary_is_one_sentencepiece_model_for_both_sides(finished):
    recipe, _ = finished
    out = run(
        recipe,
        TINY_ARGS
        + ["--stage", "3", "--stop_stage", "7", "--token_joint", "true", "--tgt_nbpe", "60"],
    )
    assert out.returncode == 0, out.stderr[-4000:]
    token_dir = recipe / "data" / "token_list" / "bpe_unigram60_deen"
    tokens = (token_dir / "tokens.txt").read_text().splitlines()
    assert tokens[0] == "<blank>" and tokens[-1] == "<sos/eos>"
    pieces = {token.lstrip("▁") for token in tokens}
    assert {
        "tausend",
        "hundert",
        "hundred",
        "nine",
    } <= pieces  # German and English pieces in one model ("sieben", "seven": held out of training)
    stats = recipe / "exp" / "mt_stats_bpe_unigram60_deen_bpe_unigram60_deen" / "train"
    for name in ("src_text_shape.bpe", "text_shape.bpe"):
        assert all(
            line.endswith(f",{len(tokens)}") for line in (stats / name).read_text().splitlines()
        )


def test_ids_that_differ_between_source_and_target_fail_stage_one(finished):
    recipe, _ = finished
    mini = recipe / "data" / "mini" / "valid" / "text.en"
    good = mini.read_text(encoding="utf-8")
    lines = good.splitlines(keepends=True)
    try:
        key, text = lines[3].split(" ", 1)
        lines[3] = f"{key}x {text}"  # still sorted, but no longer the id of the German side
        mini.write_text("".join(lines), encoding="utf-8")
        # the corpus changed under a finished stage 1: its marker removed, as its log line says to redo it
        (recipe / "data" / ".markers" / "train" / ".stages" / "stage1.done").unlink()
        out = run(recipe, TINY_ARGS + ["--stop_stage", "1", "--dumpdir", "dump_badids"])
        assert out.returncode != 0
        log = (recipe / "data" / "log" / "validate_valid.log").read_text()
        assert f"data/valid/text:4: key '{key}x': id is not in text.de" in log, log
        assert "validate_valid.log" in out.stderr
        assert not (recipe / "data" / ".markers" / "train" / ".stages" / "stage1.done").exists()
    finally:
        mini.write_text(good, encoding="utf-8")


def test_training_refuses_to_resume_a_checkpoint_of_other_options(finished):
    recipe, _ = finished
    exp = recipe / "exp" / "mt_tiny_mt"
    before = (exp / "checkpoint.pth").stat().st_mtime
    out = run(
        recipe, TINY_ARGS + ["--stage", "8", "--stop_stage", "8", "--mt_args", "--max_epoch 5"]
    )
    assert out.returncode != 0
    assert "checkpoint.pth was written with other options, config or data" in out.stderr
    assert (exp / "checkpoint.pth").stat().st_mtime == before
    # With its own options the training is resumed: already at max_epoch, it ends at once.
    out = run(recipe, TINY_ARGS + ["--stage", "8", "--stop_stage", "8"])
    assert out.returncode == 0, out.stderr[-3000:]
    assert (exp / ".stages" / "stage8.done").exists() and not (exp / "5epoch.pth").exists()


def test_real_release_layout_through_stages_one_to_three(tmp_path):
    """IWSLT14 set in db.sh: the release reader, fairseq's split, lowercasing, the extended LM text, a joint model."""
    recipe = make_recipe_copy("iwslt14", "mt1", tmp_path)
    lm_text = tmp_path / "mustc.en"
    lm_text.write_text("Thank you for being here.\n\nAnd   THIS is new.\n", encoding="utf-8")
    release = Path(__file__).resolve().parents[1] / "fixtures" / "iwslt14"
    out = run(
        recipe,
        ["--stop_stage", "3", "--src_bpe_opts", "--hard_vocab_limit false", "--tgt_nbpe", "80"],
        env={"IWSLT14": str(release), "IWSLT14_LM": str(lm_text)},
    )
    assert out.returncode == 0, out.stderr[-4000:]
    # The real setup's --max_length_ratio 1.5: "vielen dank, chris." (3 words) vs "thank you so much, chris." (5).
    assert "train: filter: kept 43 of 46 utterances (removed 3: 3 length ratio;" in out.stderr
    removed = read_table(recipe / "dump" / "raw" / "train_filtered" / "removed.txt")
    assert removed["train-000003"] == "length_ratio=5/3>max_length_ratio=1.5"
    valid = read_table(recipe / "data" / "valid" / "text.en")
    assert valid == {"train-000023": "it was dinnertime,", "train-000046": "then i write a column."}
    assert len(read_table(recipe / "data" / "test" / "text.de")) == 13
    # The test sentence is not in the extended LM text; the rest is lowercased and normalised.
    assert read_table(recipe / "data" / "lm_extended" / "text") == {
        "ext-000000003": "and this is new."
    }
    assert (recipe / "data" / "token_list" / "bpe_unigram80_deen" / "bpe.model").exists()


def test_noisy_source_test_domain_data(tmp_path):
    # local/data.sh alone: valid/test from the repeated-tens domain, uniform training targets with nothing
    # held out, the extended LM on the domain's English, and noisy German in every split.
    recipe = make_recipe_copy("iwslt14", "mt1", tmp_path)
    out = subprocess.run(
        ["local/data.sh", "--mini_splits", "train=60,valid=6,test=6", "--mini_heldout_digit", "none",
         "--mini_heldout_word", "none", "--mini_test_domain", "repeated_tens", "--mini_source_noise", "0.3"],
        cwd=recipe, env={**os.environ, "IWSLT14": ""}, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]

    def numbers(split):
        return [int(line.split()[0].rsplit("-", 1)[1])
                for line in (recipe / "data" / split / "text").read_text().splitlines()]  # fmt: skip

    def in_domain(n):
        return n >= 100 and (n // 10) % 10 == (n // 100) % 10

    assert all(in_domain(n) for n in numbers("valid") + numbers("test"))
    assert not all(in_domain(n) for n in numbers("train")) and any(
        n % 10 == 7 for n in numbers("train")
    )
    extended = (recipe / "data" / "lm_extended" / "text").read_text().splitlines()
    assert len(extended) > 9000 and all(
        in_domain(int(line.split()[0].rsplit("-", 1)[1])) for line in extended
    )
    german = (recipe / "data" / "train" / "text.de").read_text().splitlines()
    clean = (recipe / "data" / "mini" / "train" / "text.de").read_text().splitlines()
    assert [line.split()[0] for line in german] == [line.split()[0] for line in clean]
    assert sum(a != b for a, b in zip(german, clean)) > len(clean) / 2  # most sentences carry noise
