"""egs/wmt/mt1/local/table1.py: Table 1's AVG-A / High / Low from per-language BLEU, worked out by hand."""

import importlib.util
import json
from pathlib import Path

import pytest

from espnet_ext.errors import InputError

SCRIPT = Path(__file__).resolve().parents[2] / "egs" / "wmt" / "mt1" / "local" / "table1.py"
spec = importlib.util.spec_from_file_location("wmt_table1", SCRIPT)
table1 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(table1)


def write_scores(root: Path, exp: str, direction: str, scores: dict) -> Path:
    """result.json files as the BLEU scorer writes them; chrF is BLEU + 50 here."""
    for lang, bleu in scores.items():
        result = root / f"multilingual_{direction}" / exp / "dec" / f"{direction}_test_{lang}"
        result = result / "score_bleu" / "result.json"
        result.parent.mkdir(parents=True)
        if bleu is not None:
            result.write_text(json.dumps({"bleu": bleu, "chrf": bleu + 50}))
    return root


def test_averages_over_all_high_and_low_languages(tmp_path):
    write_scores(
        tmp_path, "mt_group_o2m_mini", "o2m", {"de": 30.0, "fr": 20.0, "kk": 10.0, "ro": 5.0}
    )
    write_scores(tmp_path, "mt_group_m2o_mini", "m2o", {"de": 40.0, "kk": 20.0})
    text = table1.table(tmp_path, [("Group strategy", "group")], "dec", {"de", "fr"})
    # O2M: (30+20+10+5)/4 = 16.25, high (30+20)/2 = 25, low (10+5)/2 = 7.5; M2O: 30, 40, 20
    assert text.splitlines()[2] == "| Group strategy | 16.2 | 25.0 | 7.5 | 30.0 | 40.0 | 20.0 |"


def test_untrained_direction_is_a_dash_and_a_missing_score_an_error(tmp_path):
    write_scores(tmp_path, "mt_shared_m2o", "m2o", {"de": 10.0})
    assert table1.table(tmp_path, [("T", "shared")], "dec", {"de"}).splitlines()[2] == (
        "| T | — | — | — | 10.0 | 10.0 | nan |"
    )
    write_scores(tmp_path, "mt_subset_m2o", "m2o", {"de": 10.0, "kk": None})
    with pytest.raises(InputError, match=r"m2o_test_kk/score_bleu/result.json: no BLEU"):
        table1.table(tmp_path, [("S", "subset")], "dec", {"de"})


def test_chrf_instead_of_bleu(tmp_path, capsys):
    write_scores(tmp_path, "mt_shared_o2m_mini", "o2m", {"de": 0.0, "fr": 20.0, "kk": 10.0})
    text = table1.table(tmp_path, [("T", "shared")], "dec", {"de", "fr"}, metric="chrf")
    # chrF: de 50, fr 70, kk 60 -> AVG-A 60, High 60, Low 60
    assert text.splitlines()[2] == "| T | 60.0 | 60.0 | 60.0 | — | — | — |"
    table1.main(["--exp", str(tmp_path), "--decode", "dec", "--high", "de fr", "--row", "T", "shared",
                 "--metric", "chrf"])  # fmt: skip
    assert capsys.readouterr().out == text
    old = tmp_path / "multilingual_o2m/mt_shared_o2m_mini/dec/o2m_test_de/score_bleu/result.json"
    old.write_text(json.dumps({"bleu": 1.0}))  # scored before chrF was written
    with pytest.raises(InputError, match=r"o2m_test_de/score_bleu/result.json.*chrf"):
        table1.table(tmp_path, [("T", "shared")], "dec", {"de"}, metric="chrf")
