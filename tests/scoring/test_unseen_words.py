"""BLEU and recall on the sentences with words the training targets lack: hand-counted cases, sacrebleu."""

import json
import subprocess
import sys

import pytest
import sacrebleu

from espnet_ext.errors import InputError
from espnet_ext.scoring.ref_hyp import Pair
from espnet_ext.scoring.unseen_words import score_unseen, unseen_word_recall


def write(path, lines):
    path.write_text("".join(f"{k} {v}\n" for k, v in lines), encoding="utf-8")
    return path


@pytest.fixture
def files(tmp_path):
    train = write(
        tmp_path / "train", [("t1", "one hundred and seventy one"), ("t2", "two thousand")]
    )
    ref = write(
        tmp_path / "ref",
        [
            ("u1", "seven thousand and two"),  # "seven": unseen
            ("u2", "one hundred and two"),  # all seen: not scored
            ("u3", "seven hundred and seventy seven"),  # "seven" twice
            ("u4", "seventeen"),
        ],
    )
    hyp = write(
        tmp_path / "hyp",
        [
            ("u1", "seven thousand and two"),
            ("u2", "one hundred and nine"),
            ("u3", "seven seven seven hundred and seventy"),  # 3 written, 2 counted
            ("u4", "seventy"),
        ],
    )
    return train, ref, hyp


def test_recall_clips_counts_per_sentence():
    vocabulary = {"and", "two", "seventy"}
    pairs = [
        Pair("a", "seven and seven", "seven seven seven"),  # 2 of 2 (the third is not counted)
        Pair("b", "seven two nine", "two nine"),  # 1 of 2 ("nine" is unseen too)
        Pair("c", "two and seventy", "two"),  # nothing unseen
    ]
    assert unseen_word_recall(pairs, vocabulary) == (3, 4)


def test_scores_only_sentences_with_unseen_words(files, tmp_path):
    train, ref, hyp = files
    result = score_unseen(train, ref, hyp, tmp_path / "out")
    assert result["num_utts"] == 3
    assert result["unseen_words"] == ["seven", "seventeen"]
    # u1: 1 of 1, u3: 2 of 2 (the third "seven" is extra), u4: 0 of 1.
    assert (result["unseen_words_matched"], result["unseen_words_total"]) == (3, 4)
    assert result["unseen_word_recall"] == pytest.approx(75.0)
    expected = sacrebleu.corpus_bleu(
        ["seven thousand and two", "seven seven seven hundred and seventy", "seventy"],
        [["seven thousand and two", "seven hundred and seventy seven", "seventeen"]],
    )
    assert result["bleu"] == pytest.approx(expected.score)
    assert result["exact_matches"] == 1
    assert json.loads((tmp_path / "out" / "result.json").read_text())["bleu"] == result["bleu"]
    assert "unseen-word recall: 75.00 % [ 3 / 4 ]" in (tmp_path / "out" / "result.txt").read_text()


def test_no_unseen_word_is_an_error_and_writes_nothing(files, tmp_path):
    train, _, _ = files
    ref = write(tmp_path / "ref2", [("u1", "two thousand")])
    hyp = write(tmp_path / "hyp2", [("u1", "two")])
    with pytest.raises(InputError, match="no reference holds a word"):
        score_unseen(train, ref, hyp, tmp_path / "out2")
    assert not (tmp_path / "out2").exists()


def test_command_line(files, tmp_path):
    train, ref, hyp = files
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "espnet_ext.scoring.unseen_words",
            "--train_text",
            str(train),
            "--ref",
            str(ref),
            "--hyp",
            str(hyp),
            "--out_dir",
            str(tmp_path / "cli"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "on 3 sentences with unseen words, unseen-word recall 75.00%" in out.stdout
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "espnet_ext.scoring.unseen_words",
            "--train_text",
            str(train),
            "--ref",
            str(ref),
            "--hyp",
            str(train),
            "--out_dir",
            str(tmp_path / "bad"),
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1 and bad.stderr.startswith("error: ")
