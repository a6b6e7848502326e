"""WER/CER scoring: hand-computed counts, equality with jiwer, id checks, report and command line."""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import jiwer
import pytest

from espnet_ext.errors import InputError
from espnet_ext.scoring.ref_hyp import read_ref_hyp
from espnet_ext.scoring.wer import evaluation_tokenize, score_files

SCRIPT = Path(__file__).resolve().parents[2] / "utils" / "score_wer.py"


def write(path, lines):
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def hand_case(tmp_path):
    ref = write(tmp_path / "ref", ["u1 a b c d", "u2 hello world", "u3 yes", "u4 no way"])
    # Different order, irregular spacing, and an empty hypothesis (u4: every word deleted).
    hyp = write(tmp_path / "hyp", ["u3 yes", "u2 hello  big world", "u4", "u1 a x c"])
    return ref, hyp


def test_hand_computed_counts(tmp_path, hand_case):
    result = score_files(*hand_case, tmp_path / "out")
    # u1: b->x (S), d deleted (D); u2: "big" inserted (I); u3 correct; u4: two deletions.
    assert result["words"] == {"ref": 9, "hits": 5, "sub": 1, "del": 3, "ins": 1, "errors": 5}
    assert result["wer"] == pytest.approx(100 * 5 / 9)
    assert result["sentence_errors"] == 3 and result["ser"] == pytest.approx(75.0)
    # Characters, spaces included: u1 7 chars, 1 sub + 2 del (" d"); u2 4 ins ("big "); u4 6 del.
    assert result["chars"]["ref"] == 27 and result["chars"]["errors"] == 13
    assert result["cer"] == pytest.approx(100 * 13 / 27)
    assert json.loads((tmp_path / "out" / "result.json").read_text()) == result


def test_report_shows_alignments_of_errors_only(tmp_path, hand_case):
    score_files(*hand_case, tmp_path / "out")
    report = (tmp_path / "out" / "result.txt").read_text()
    assert "%WER 55.56 [ 5 / 9, 1 ins, 3 del, 1 sub ]" in report
    assert "%SER 75.00 [ 3 / 4 ]" in report
    blocks = report.split("\n\n")
    u1 = next(b for b in blocks if b.startswith("u1 "))
    assert u1.splitlines() == [
        "u1 (S=1 D=1 I=0)",
        "REF: a b c d",
        "HYP: a x c ***",
        "OP:    S   D",
    ]
    u2 = next(b for b in blocks if b.startswith("u2 "))
    assert u2.splitlines()[1:] == ["REF: hello *** world", "HYP: hello big world", "OP:        I"]
    assert not any(b.startswith("u3 ") for b in blocks)


def test_equals_jiwer_on_larger_corpus(tmp_path):
    rng = random.Random(0)
    vocab = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "hundred",
        "thousand",
        "and",
    ]
    refs, hyps = [], []
    for _ in range(200):
        ref = [rng.choice(vocab) for _ in range(rng.randint(1, 12))]
        hyp = [w if rng.random() > 0.2 else rng.choice(vocab) for w in ref if rng.random() > 0.1]
        if rng.random() < 0.2:
            hyp.insert(rng.randint(0, len(hyp)), rng.choice(vocab))
        refs.append(" ".join(ref))
        hyps.append(" ".join(hyp))
    ids = [f"utt{i:03d}" for i in range(len(refs))]
    ref = write(tmp_path / "ref", [f"{u} {t}" for u, t in zip(ids, refs)])
    hyp = write(tmp_path / "hyp", [f"{u} {t}".rstrip() for u, t in zip(ids, hyps)])
    result = score_files(ref, hyp, tmp_path / "out")
    assert result["wer"] == pytest.approx(100 * jiwer.wer(refs, hyps))
    assert result["cer"] == pytest.approx(100 * jiwer.cer(refs, hyps))
    assert result["ser"] == pytest.approx(100 * sum(r != h for r, h in zip(refs, hyps)) / len(refs))
    assert 0 < result["wer"] < 100


def test_id_mismatch_names_first_missing_id(tmp_path):
    ref = write(tmp_path / "ref", ["u1 a", "u2 b", "u3 c", "u4 d"])
    hyp = write(tmp_path / "hyp", ["u1 a", "u4 d", "u9 z"])
    with pytest.raises(InputError) as info:
        read_ref_hyp(ref, hyp)
    message = str(info.value)
    assert message.startswith(f"{ref}:2: key 'u2': id not in {hyp}")
    assert f"2 of 4 ids of {ref} are not in {hyp}, 1 of 3 ids of {hyp} are not in {ref}" in message
    # Only extra hypotheses: the hypothesis line is named.
    hyp = write(tmp_path / "hyp", ["u1 a", "u2 b", "u3 c", "u4 d", "u5 e"])
    with pytest.raises(InputError, match=r"hyp:5: key 'u5': id not in .*0 of 4 ids"):
        read_ref_hyp(ref, hyp)


@pytest.mark.parametrize(
    "ref_lines, hyp_lines, match",
    [
        (["u1 a", "u2"], ["u1 a", "u2 b"], r"ref:2: key 'u2': empty reference"),
        (["u1 a", "u1 b"], ["u1 a"], r"ref:2: key 'u1': duplicate id \(first at line 1\)"),
        (["u1 a", "", "u2 b"], ["u1 a", "u2 b"], r"ref:2: blank line"),
        (["u1 a"], ["u1 a", "u1 b"], r"hyp:2: key 'u1': duplicate id"),
        (["u1 a", "u2 \u3000"], ["u1 a", "u2 b"], r"ref:2: key 'u2': empty reference"),
        ([], [], r"ref: no utterances to score"),
    ],
)
def test_bad_files(tmp_path, ref_lines, hyp_lines, match):
    ref, hyp = write(tmp_path / "ref", ref_lines), write(tmp_path / "hyp", hyp_lines)
    with pytest.raises(InputError, match=match):
        score_files(ref, hyp, tmp_path / "out")
    assert not (tmp_path / "out" / "result.json").exists()


def test_command_line(tmp_path, hand_case):
    run = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--ref",
            str(hand_case[0]),
            "--hyp",
            str(hand_case[1]),
            "--out_dir",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(
        "%WER 55.56 [ 5 / 9, 1 ins, 3 del, 1 sub ] %CER 48.15 %SER 75.00 (4 utts)"
    )
    assert json.loads((tmp_path / "out" / "result.json").read_text())["words"]["errors"] == 5

    write(hand_case[1], ["u1 a"])
    run = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--ref",
            str(hand_case[0]),
            "--hyp",
            str(hand_case[1]),
            "--out_dir",
            str(tmp_path / "bad"),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1
    assert f"error: {hand_case[0]}:2: key 'u2': id not in" in run.stderr
    assert not (tmp_path / "bad").exists()


def test_fairseq_evaluation_tokenizer_by_hand():
    """fairseq's EvaluationTokenizer (13a, punctuation removal, lowercase): worked by hand."""
    # 13a splits "," "!" "%" and a final "." off words, keeps "5.5" (digits around) and "It's";
    # then tokens of punctuation only (Unicode P*: , ! % .) go; then lowercase.
    text = "Hello, World! It's 5.5%."
    assert evaluation_tokenize(text, "13a") == "Hello , World ! It's 5.5 % ."
    assert evaluation_tokenize(text, "13a", remove_punct=True) == "Hello World It's 5.5"
    assert evaluation_tokenize(text, "13a", True, True) == "hello world it's 5.5"
    # 13a splits "?" but not "«": a word keeps a guillemet glued to it, as in fairseq
    assert evaluation_tokenize("«Ça va?» -- oui", "13a", True, True) == "«ça va oui"
    assert evaluation_tokenize(text) == text  # no option: the text as given


def test_authors_wer_with_the_raw_wer_beside_it(tmp_path):
    ref = write(tmp_path / "ref", ["u1 Hello, World! It's 5.5%.", "u2 Yes, indeed."])
    hyp = write(tmp_path / "hyp", ["u1 hello world it's 5.5", "u2 yes in deed"])
    result = score_files(ref, hyp, tmp_path / "out", "13a", True, True)
    # u1 equal after normalisation; u2: indeed -> in (S), deed inserted (I): 2 errors in 6 words
    assert result["words"] == {"ref": 6, "hits": 5, "sub": 1, "del": 0, "ins": 1, "errors": 2}
    assert result["wer"] == pytest.approx(100 * 2 / 6)
    # as given: u1 4 ref words, 4 subs + 1 ins (Hello, World! 5.5%. vs hello world 5.5 -> 3 S; It's ok)
    raw = jiwer.process_words(["Hello, World! It's 5.5%.", "Yes, indeed."],
                              ["hello world it's 5.5", "yes in deed"])  # fmt: skip
    assert result["raw"]["wer"] == pytest.approx(100 * raw.wer)
    assert result["scoring"] == {"tokenizer": "13a", "lowercase": True, "remove_punct": True}
    report = (tmp_path / "out" / "result.txt").read_text().splitlines()
    assert report[2].startswith("%WER 33.33") and report[5].startswith("%RAW ")
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--ref", str(ref), "--hyp", str(hyp), "--out_dir",
         str(tmp_path / "cli"), "--tokenizer", "13a", "--lowercase", "--remove_punct"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "%WER 33.33" in out.stdout and "raw WER" in out.stdout
