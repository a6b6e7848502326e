"""BLEU scoring: equality with sacrebleu, a hand-computed case, exact match, signature, command line."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu

from espnet_ext.errors import ConfigError, InputError
from espnet_ext.scoring.bleu import compound_split, score_bleu, score_files, tokenized_bleu
from espnet_ext.scoring.ref_hyp import read_ref_hyp

SCRIPT = Path(__file__).resolve().parents[2] / "utils" / "score_bleu.py"

REFS = [
    "The cat sat on the mat.",
    "Three hundred and twelve, said she!",
    "dreihundertzwölf ist eine Zahl",
    "It's 5 o'clock (roughly).",
    "Hello world",
]
HYPS = [
    "the cat sat on a mat .",
    "Three hundred twelve, she said!",
    "dreihundertzwölf ist eine Zahl",
    "It is 5 o'clock (roughly).",
    "hello world",
]


def write_pair(tmp_path, refs=REFS, hyps=HYPS):
    ref, hyp = tmp_path / "ref", tmp_path / "hyp"
    ref.write_text("".join(f"s{i} {t}\n" for i, t in enumerate(refs)), encoding="utf-8")
    hyp.write_text(
        "".join(f"s{i} {t}\n" for i, t in reversed(list(enumerate(hyps)))), encoding="utf-8"
    )
    return ref, hyp


@pytest.mark.parametrize(
    "tokenize, lowercase", [("13a", False), ("13a", True), ("intl", False), ("none", False)]
)
def test_equals_sacrebleu(tmp_path, tokenize, lowercase):
    ref, hyp = write_pair(tmp_path)
    result = score_files(ref, hyp, tmp_path / "out", tokenize=tokenize, lowercase=lowercase)
    expected = sacrebleu.corpus_bleu(HYPS, [REFS], tokenize=tokenize, lowercase=lowercase)
    assert result["bleu"] == pytest.approx(expected.score)
    assert result["precisions"] == pytest.approx(expected.precisions)
    assert (result["sys_len"], result["ref_len"]) == (expected.sys_len, expected.ref_len)
    metric = sacrebleu.BLEU(tokenize=tokenize, lowercase=lowercase)
    metric.corpus_score(HYPS, [REFS])  # the signature needs the number of references
    assert result["signature"] == str(metric.get_signature())
    assert (
        f"tok:{tokenize}" in result["signature"] and ("case:lc" in result["signature"]) == lowercase
    )
    assert json.loads((tmp_path / "out" / "result.json").read_text()) == result
    assert result["signature"] in (tmp_path / "out" / "result.txt").read_text()


@pytest.mark.parametrize("lowercase", [False, True])
def test_chrf_beside_bleu(tmp_path, lowercase):
    ref, hyp = write_pair(tmp_path)
    result = score_files(ref, hyp, tmp_path / "out", lowercase=lowercase)
    expected = sacrebleu.CHRF(lowercase=lowercase).corpus_score(HYPS, [REFS])
    assert result["chrf"] == pytest.approx(expected.score) and 0 < result["chrf"] < 100
    assert "nc:6|nw:0" in result["chrf_signature"]  # chrF (characters only), not chrF++
    assert f"chrF2 = {result['chrf']:.2f}" in (tmp_path / "out" / "result.txt").read_text()
    # One-word targets (German numbers): BLEU has no 2-grams to count, chrF still tells near from far.
    refs, near, far = (
        ["achttausendzweihundertvierzehn"],
        ["achttausendzweihundertvierzig"],
        ["eins"],
    )
    scores = [
        score_files(*write_pair(tmp_path, refs, h), tmp_path / n)
        for n, h in (("n", near), ("f", far))
    ]
    assert [s["bleu"] for s in scores] == [0.0, 0.0]
    assert scores[0]["chrf"] > 70 > 10 > scores[1]["chrf"]


def test_hand_computed_bleu(tmp_path):
    ref, hyp = write_pair(tmp_path, ["the cat sat on the mat"], ["the cat sat on a mat"])
    result = score_files(ref, hyp, tmp_path / "out", tokenize="none")
    # n-gram precisions 5/6, 3/5, 2/4, 1/3 and equal lengths (brevity penalty 1).
    assert result["precisions"] == pytest.approx([500 / 6, 60.0, 50.0, 100 / 3])
    assert result["bp"] == 1.0
    assert result["bleu"] == pytest.approx(100 * (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25)
    # A shorter hypothesis is penalised by exp(1 - ref_len / hyp_len).
    ref, hyp = write_pair(tmp_path, ["a b c d e f"], ["a b c d"])
    result = score_files(ref, hyp, tmp_path / "out", tokenize="none")
    assert result["bp"] == pytest.approx(math.exp(1 - 6 / 4))
    assert result["bleu"] == pytest.approx(100 * math.exp(1 - 6 / 4))


def test_exact_match(tmp_path):
    ref, hyp = write_pair(tmp_path)
    assert score_files(ref, hyp, tmp_path / "a")["exact_matches"] == 1  # only the German sentence
    lower = score_files(ref, hyp, tmp_path / "b", lowercase=True)
    assert lower["exact_matches"] == 2 and lower["exact_match"] == pytest.approx(40.0)
    assert "exact match: 40.00 % [ 2 / 5 ]" in (tmp_path / "b" / "result.txt").read_text()


def test_perfect_and_errors(tmp_path):
    ref, hyp = write_pair(tmp_path, REFS, REFS)
    result = score_files(ref, hyp, tmp_path / "out")
    assert result["bleu"] == pytest.approx(100.0) and result["exact_match"] == 100.0
    with pytest.raises(ConfigError, match="--tokenize must be one of"):
        score_bleu(read_ref_hyp(ref, hyp), tokenize="moses")
    ref, hyp = write_pair(tmp_path, REFS, HYPS[:-1])
    with pytest.raises(InputError, match=r"ref:5: key 's4': id not in"):
        score_files(ref, hyp, tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def test_command_line(tmp_path):
    ref, hyp = write_pair(tmp_path)
    run = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--ref",
            str(ref),
            "--hyp",
            str(hyp),
            "--out_dir",
            str(tmp_path / "out"),
            "--tokenize",
            "intl",
            "--lowercase",
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    expected = sacrebleu.corpus_bleu(HYPS, [REFS], tokenize="intl", lowercase=True)
    assert run.stdout.startswith(
        f"BLEU {expected.score:.2f} nrefs:1|case:lc|eff:no|tok:intl|smooth:exp|version:"
    )
    assert "exact match 40.00%" in run.stdout


def test_compound_split_as_fairseqs_perl():
    # Expected strings are perl's output of fairseq's compound_split_bleu.sh substitution.
    assert compound_split("die Haus-Tür ist offen") == "die Haus ##AT##-##AT## Tür ist offen"
    assert compound_split("well-known-ish") == "well ##AT##-##AT## known ##AT##-##AT## ish"
    assert compound_split("a-b-c x - y") == "a ##AT##-##AT## b-c x - y"  # non-overlapping


def test_tokenized_compound_split_bleu_hand_worked(tmp_path):
    ref, hyp = write_pair(tmp_path, ["the Haus-Tür was open"], ["the Haus-Tür is open"])
    pairs = read_ref_hyp(ref, hyp)
    # split: "the Haus ##AT##-##AT## Tür is open" vs "... was open": 6 tokens each, precisions
    # 5/6, 3/5, 2/4, 1/3, brevity penalty 1.
    result = tokenized_bleu(pairs)
    assert result["tokenized_bleu"] == pytest.approx(100 * (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25)
    # Unsplit, "Haus-Tür" is one token: no matching trigram, and multi-bleu has no smoothing.
    unsplit = sacrebleu.corpus_bleu(
        ["the Haus-Tür is open"], [["the Haus-Tür was open"]], tokenize="none", smooth_method="none"
    )
    assert unsplit.counts[2] == 0 and unsplit.score == 0.0
    # sacreBLEU (13a) beside it is unchanged by the option.
    out = score_files(ref, hyp, tmp_path / "out", with_tokenized=True)
    assert out["bleu"] == score_bleu(pairs)["bleu"]
    assert "compound split" in (tmp_path / "out" / "result.txt").read_text()


def test_moses_tokenization_before_splitting(tmp_path):
    ref, hyp = write_pair(tmp_path, ["It's the Haus-Tür."], ["It's the Haus-Tür."])
    pairs = read_ref_hyp(ref, hyp)
    assert tokenized_bleu(pairs, moses_lang="en")["tokenized_bleu"] == pytest.approx(100.0)
    # Moses (escaping on): "It &apos;s the Haus ##AT##-##AT## Tür ." -- 7 tokens on both sides
    result = tokenized_bleu(
        read_ref_hyp(*write_pair(tmp_path, ["It's the Haus-Tür."], ["It's the Haus-Tor."])), "en"
    )
    # one token of seven differs (the sixth): 6/7, 4/6, 3/5, 2/4
    assert result["tokenized_bleu"] == pytest.approx(100 * (6 / 7 * 4 / 6 * 3 / 5 * 2 / 4) ** 0.25)
