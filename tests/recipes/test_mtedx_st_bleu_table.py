"""egs/mtedx/st1/local/bleu_table.py: AVG-A / AVG-T / AVG-Z of BLEU per direction in Table 4's layout."""

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "egs" / "mtedx" / "st1" / "local" / "bleu_table.py"
spec = importlib.util.spec_from_file_location("bleu_table", SCRIPT)
bleu_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bleu_table)

TRAINED, ZERO_SHOT = ["es-en", "fr-en", "pt-en"], ["it-en"]


def test_averages_over_all_trained_and_zero_shot_directions():
    bleu = {"es-en": 20.0, "fr-en": 10.0, "pt-en": 15.0, "it-en": 5.0}
    got = bleu_table.averages(bleu, TRAINED, ZERO_SHOT)
    assert got == {"AVG-A": 12.5, "AVG-T": 15.0, "AVG-Z": 5.0}  # (20+10+15+5)/4, (20+10+15)/3
    # the paper's adapter row: no zero-shot direction scored -> AVG-A and AVG-Z are "-"
    no_zero = bleu_table.averages({**bleu, "it-en": None}, TRAINED, ZERO_SHOT)
    assert no_zero == {"AVG-A": None, "AVG-T": 15.0, "AVG-Z": None}


def write_score(exp, tag, direction, value):
    path = exp / f"st_{tag}" / "decode_x" / f"test_{direction}" / "score_bleu" / "result.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"bleu": value, "metric": "bleu"}))


def test_results_md_in_table_4_layout(tmp_path):
    for direction, value in {"es-en": 20.0, "fr-en": 10.0, "pt-en": 15.0, "it-en": 5.0}.items():
        write_score(tmp_path, "shared", direction, value)
    for direction, value in {"es-en": 21.0, "fr-en": 11.0, "pt-en": 17.0}.items():
        write_score(tmp_path, "adapter", direction, value)
    out = tmp_path / "RESULTS.md"
    code = bleu_table.main([
        "--exp_dir", str(tmp_path), "--decode", "decode_x", "--out", str(out),
        "--train_directions", " ".join(TRAINED), "--zero_shot_directions", "it-en",
        "--model", "S2T Transformer=shared", "--model", "Adapter=adapter",
    ])  # fmt: skip
    assert code == 0
    text = out.read_text()
    assert "| Model | AVG-A | AVG-T | AVG-Z |" in text
    assert "| S2T Transformer | 12.5 | 15.0 | 5.0 |" in text
    assert "| Adapter | - | 16.3 | - |" in text  # (21+11+17)/3 = 16.33
    assert "| Adapter | 21.0 | 11.0 | 17.0 | - |" in text  # per direction, it-en not decoded


def test_bad_model_option_is_refused(tmp_path, capsys):
    args = ["--decode", "d", "--out", str(tmp_path / "R.md"), "--train_directions", "es-en",
            "--zero_shot_directions", "it-en", "--model", "no-tag"]  # fmt: skip
    assert bleu_table.main(args) == 1
    assert "--model 'no-tag' is not <row label>=<st_tag>" in capsys.readouterr().err
    assert not (tmp_path / "R.md").exists()


@pytest.mark.parametrize("bad", ["{", "[1, 2]"])
def test_unreadable_result_names_the_file(tmp_path, capsys, bad):
    write_score(tmp_path, "shared", "es-en", 1.0)
    (tmp_path / "st_shared/decode_x/test_es-en/score_bleu/result.json").write_text(bad)
    args = ["--exp_dir", str(tmp_path), "--decode", "decode_x", "--out", str(tmp_path / "R.md"),
            "--train_directions", "es-en", "--zero_shot_directions", "", "--model", "A=shared"]  # fmt: skip
    assert bleu_table.main(args) == 1
    assert "result.json" in capsys.readouterr().err
