"""egs/librispeech/asr1 end to end on a tiny mini corpus: every stage, LM fusion, reruns, resume, bad input."""

import os
import re
import subprocess

import pytest
from recipe_fixture import TINY_ARGS, make_recipe_copy, run, run_until

# on one worker with the other modules of its session fixture (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("librispeech_finished")


@pytest.fixture
def finished(librispeech_finished):
    """The session's tiny run of all stages (conftest.py), which the Slurm tests branch from too."""
    return librispeech_finished


def test_all_stages_run_and_write_results(finished):
    recipe, out = finished
    assert (
        recipe / "data" / ".markers" / "train" / ".stages" / "stage1.done"
    ).exists()  # beside data/
    for n in (2, 3):
        assert (recipe / "dump" / ".stages" / f"stage{n}.done").exists()
    exp = recipe / "exp" / "asr_tiny_asr"
    assert (exp / "valid.acc.ave.pth").exists()
    assert (exp / "config.yaml").exists()
    hyp = (exp / "decode_tiny_decode" / "test" / "text").read_text().splitlines()
    assert len(hyp) == 6
    results = (recipe / "exp" / "RESULTS.md").read_text()
    row = re.search(
        r"\| asr_tiny_asr / decode_tiny_decode \| [0-9.]+ \| ([0-9.]+) \|", results
    )  # dev, test
    assert row, results
    import json

    score = json.loads(
        (exp / "decode_tiny_decode" / "test" / "score_wer" / "result.json").read_text()
    )
    assert float(row.group(1)) == pytest.approx(score["wer"], abs=0.01)
    assert "Wall time" in results and "torch" in results
    # ark/scp features written by kaldiio, 80-dim.
    assert (recipe / "dump" / "fbank" / "train" / "feats_dim").read_text().strip() == "80"


def test_rerun_skips_finished_stages(finished):
    recipe, _ = finished
    out = run(recipe, TINY_ARGS + ["--stop_stage", "11"])
    assert out.returncode == 0, out.stderr[-3000:]
    for n in (1, 2, 3, 4, 8, 9, 10, 11):
        assert re.search(rf"Stage {n}: .*: already done", out.stderr), (n, out.stderr[-3000:])


def test_lm_fusion_stages_add_a_decoding(finished):
    recipe, _ = finished
    # The LM is trained here; decoding test alone shows the fusion (dev is the plain run's).
    out = run(recipe, TINY_ARGS + ["--stage", "5", "--use_lm", "true", "--test_sets", "test"])
    assert out.returncode == 0, out.stderr[-4000:]
    # run.sh's default LM: transcripts + the extended LM text, named by the token list it is trained on
    (lm_exp,) = (recipe / "exp").glob("lm_extended_train_*")  # <train set>_<token list>
    assert (lm_exp / "valid.loss.ave.pth").exists()
    assert re.search(r"perplexity [0-9.]+", out.stderr)
    lm_text = (
        (recipe / "exp" / f"lm_stats_{lm_exp.name[3:]}" / "text" / "train.txt")
        .read_text()
        .splitlines()
    )
    assert (
        40 + 250 < len(lm_text) <= 40 + 300
    )  # transcripts + the extended text minus dev/test sentences
    test_sentences = {
        line.split(" ", 1)[1]
        for line in (recipe / "data" / "test" / "text").read_text().splitlines()
    }
    extended = (recipe / "data" / "lm_extended" / "text").read_text().splitlines()
    assert extended and not test_sentences & {line.split(" ", 1)[1] for line in extended}
    results = (recipe / "exp" / "RESULTS.md").read_text()
    assert "asr_tiny_asr / decode_tiny_decode_lm_extended" in results
    assert (
        "asr_tiny_asr / decode_tiny_decode |" in results
    )  # the earlier decoding stays in the table


def test_relaxed_variant_with_matched_inference(finished):
    recipe, _ = finished
    args = [
        "--attention_variant",
        "relaxed_cross",
        "--matched_inference",
        "true",
        "--stage",
        "9",
        "--stop_stage",
        "11",
        "--asr_args",
        "--max_epoch 1",  # the variant's plumbing is tested, not its accuracy: one epoch is enough
        "--test_sets",
        "test",
    ]
    out = run(recipe, TINY_ARGS + args)
    assert out.returncode == 0, out.stderr[-4000:]
    exp = recipe / "exp" / "asr_tiny_asr_relaxed_cross_g0.25"
    config = (exp / "config.yaml").read_text()
    assert "relaxed_transformer" in config and "gamma: 0.25" in config
    decode_log = (
        exp / "decode_tiny_decode_matched" / "test" / "logdir" / "asr_inference.1.log"
    ).read_text()
    assert "--matched_inference true" in decode_log.splitlines()[0]
    assert (exp / "decode_tiny_decode_matched" / "test" / "score_wer" / "result.json").exists()


def test_held_out_pattern_is_absent_from_training_only(finished):
    recipe, _ = finished
    # Utterance ids end with the number: spk03-0467.
    train = (recipe / "data" / "train" / "text").read_text().splitlines()
    assert train and not any(line.split()[0].endswith("7") for line in train)
    extended = (recipe / "data" / "lm_extended" / "text").read_text().splitlines()
    assert any(line.split()[0].endswith("7") for line in extended)


def test_interrupted_training_resumes_from_checkpoint(finished):
    recipe, _ = finished
    args = TINY_ARGS + [
        "--stage",
        "9",
        "--stop_stage",
        "9",
        "--asr_tag",
        "resume",
        "--asr_args",
        "--max_epoch 3",
    ]
    exp = recipe / "exp" / "asr_resume"
    run_until(recipe, args, exp / "1epoch.pth")
    assert not (exp / ".stages" / "stage9.done").exists()
    out = run(recipe, args)
    assert out.returncode == 0, out.stderr[-3000:]
    log = (exp / "train.log").read_text()
    assert "The training was resumed using" in log
    assert "1/3epoch started" not in log.split("The training was resumed using")[-1]
    assert (exp / "3epoch.pth").exists() and (exp / ".stages" / "stage9.done").exists()
    # Other options under the same tag: the checkpoint is not continued (nor touched).
    before = (exp / "checkpoint.pth").stat().st_mtime
    out = run(
        recipe,
        TINY_ARGS
        + [
            "--stage",
            "9",
            "--stop_stage",
            "9",
            "--asr_tag",
            "resume",
            "--asr_args",
            "--max_epoch 4",
        ],
    )
    assert out.returncode != 0
    assert "checkpoint.pth was written with other options, config or data" in out.stderr
    assert (exp / "checkpoint.pth").stat().st_mtime == before and not (exp / "4epoch.pth").exists()


def test_corpus_dir_that_is_not_librispeech_fails_stage_one(finished, tmp_path):
    # Same dump dir as the finished mini run: pointing db.sh at another corpus must redo stage 1, not skip it.
    recipe, _ = finished
    (tmp_path / "somewhere").mkdir()
    out = run(
        recipe, ["--stop_stage", "1"] + TINY_ARGS, env={"LIBRISPEECH": str(tmp_path / "somewhere")}
    )
    assert out.returncode != 0
    assert "Stage 1: data preparation: already done" not in out.stderr
    assert "data/log/data_prep.log" in out.stderr
    log = (recipe / "data" / "log" / "data_prep.log").read_text()
    assert "LibriSpeech" in log and str(tmp_path / "somewhere") in log
    # the real mode's stage 1 (train_clean_100) left no marker of being done
    assert not (
        recipe / "data" / ".markers" / "train_clean_100" / ".stages" / "stage1.done"
    ).exists()


def test_bad_transcript_fails_validation_naming_file_and_line(finished):
    recipe, _ = finished
    mini_text = recipe / "data" / "mini" / "dev" / "text"
    good = mini_text.read_bytes()
    lines = good.splitlines(keepends=True)
    try:
        # Line 3 becomes Latin-1 bytes: not UTF-8.
        mini_text.write_bytes(
            b"".join(lines[:2] + [lines[2].split(b" ")[0] + b" f\xfcnf\n"] + lines[3:])
        )
        # the corpus changed under a finished stage 1: its marker removed, as its log line says to redo it
        (recipe / "data" / ".markers" / "train" / ".stages" / "stage1.done").unlink()
        out = run(recipe, TINY_ARGS + ["--stop_stage", "1", "--dumpdir", "dump_badtext"])
        assert out.returncode != 0
        # The mini data prep reads data/dev/text itself (the LM text leaves its sentences out), so the error
        # comes from there, before the data-dir validation would report it; either names file and line.
        log = (recipe / "data" / "log" / "data_prep.log").read_text()
        assert "data/dev/text:3" in log and "UTF-8" in log
        assert "data_prep.log" in out.stderr
        # stage 1's marker lives beside data/, which every --dumpdir shares: the failed preparation
        # removed the finished run's marker too
        assert not (recipe / "data" / ".markers" / "train" / ".stages" / "stage1.done").exists()
    finally:
        mini_text.write_bytes(good)
    # so the finished run's next invocation prepares data/ again instead of trusting what the failed one
    # left there
    out = run(recipe, TINY_ARGS + ["--stop_stage", "1"])
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Stage 1: data preparation: already done" not in out.stderr
    assert (recipe / "data" / ".markers" / "train" / ".stages" / "stage1.done").exists()


def test_test_domain_puts_its_pattern_in_dev_test_and_the_extended_lm_only(tmp_path):
    # local/data.sh alone (no training): --mini_test_domain repeated_tens draws dev/test from the repeated-tens domain
    # (tens digit = hundreds digit), trains on the uniform range, and gives the extended LM that domain's text.
    recipe = make_recipe_copy("librispeech", "asr1", tmp_path)
    out = subprocess.run(
        ["local/data.sh", "--mini_splits", "train=40,dev=6,test=6", "--mini_heldout_digit", "none",
         "--mini_test_domain", "repeated_tens"],  # fmt: skip
        cwd=recipe, env={**os.environ, "LIBRISPEECH": ""}, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]

    def numbers(path):
        return [int(line.split()[1]) for line in (recipe / path).read_text().splitlines()]

    def in_domain(n):
        return n >= 100 and (n // 10) % 10 == (n // 100) % 10

    assert all(in_domain(n) for n in numbers("data/dev/utt2num") + numbers("data/test/utt2num"))
    train = numbers("data/train/utt2num")
    assert sum(in_domain(n) for n in train) < len(train) / 2 and any(n % 10 == 7 for n in train)
    assert not (recipe / "data" / "test_end7").exists()  # no ending held out
    extended = (recipe / "data" / "lm_extended" / "text").read_text().splitlines()
    lm_numbers = [int(line.split()[0].rsplit("-", 1)[1]) for line in extended]
    assert len(extended) > 9000 and all(in_domain(n) for n in lm_numbers)
    heard = {line.split(maxsplit=1)[1] for name in ("dev", "test")
             for line in (recipe / "data" / name / "text").read_text().splitlines()}  # fmt: skip
    assert not heard & {line.split(maxsplit=1)[1] for line in extended}
