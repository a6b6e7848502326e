"""A sweep decoding tuned per run (``decodes: {name: {tune: ...}}``, the relaxed-attention paper's λ "optimized
for each approach" on dev): one decoding per grid value, and per run the value best on the tuning set."""

import pytest
import yaml

from espnet_ext.analysis.sweep import load_sweep, select_tuned, tuned_notes
from espnet_ext.analysis.tables import paper_table
from espnet_ext.errors import InputError
from espnet_ext.results import render_table

SPEC = {
    "name": "probe",
    "command": "./run.sh",
    "tag_option": "--asr_tag",
    "train_stages": [9, 9],
    "decode_stages": [10, 11],
    "runs": {"baseline": "", "relaxed": "--attention_variant relaxed_cross"},
    "decodes": {
        "no_lm": "",
        "lm": {
            "options": "--use_lm true",
            "tune": {
                "option": '--inference_args "--lm_weight {value}"',
                "values": [0.05, 0.1, 0.2],
                "tune_set": "dev",
                "tag": "{decode}_lmw{value}",
            },
        },
        "lm_matched": {
            "options": "--use_lm true --matched_inference true",
            "runs": ["relaxed"],
            "tune": {
                "option": '--inference_args "--lm_weight {value}"',
                "values": [0.1, 0.2],
                "tune_set": "dev",
            },  # fmt: skip
        },
    },
    "result": "exp/{tag}/{decode}/{set}/result.json",
    "metric": {"key": "wer", "sets": ["dev", "test"], "higher_is_better": False},
    "analyses": [
        {
            "kind": "paper_table",
            "title": "T",
            "groups": {"with LM": "lm"},
            "rows": [
                {"label": "B", "run": "baseline"},
                {"label": "R", "run": "relaxed"},
                {"label": "R matched", "run": "relaxed", "suffix": "_matched"},
            ],
        },
    ],  # fmt: skip
}


def load(tmp_path, spec=SPEC):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return load_sweep(path)


def test_grid_decodings_are_run_with_each_value(tmp_path):
    sweep = load(tmp_path)
    names = [d.name for d in sweep.decodes]
    assert names == ["no_lm", "lm_lmw0.05", "lm_lmw0.1", "lm_lmw0.2", "lm_matched_0.1",
                     "lm_matched_0.2"]  # fmt: skip
    (line,) = [x for x in sweep.invocations("relaxed") if "lm_lmw0.05" in x]
    at = line.index("--inference_args")
    assert line[at - 2 : at + 2] == ["--use_lm", "true", "--inference_args", "--lm_weight 0.05"]
    assert len(sweep.invocations("baseline")) == 1 + 1 + 3  # training, no_lm, the lm grid


def test_each_run_takes_its_best_value_on_dev_for_every_set(tmp_path):
    sweep = load(tmp_path)
    values = {
        "baseline": {"no_lm": {"dev": 30, "test": 31},
                     "lm_lmw0.05": {"dev": 29, "test": 28}, "lm_lmw0.1": {"dev": 27, "test": 29},
                     "lm_lmw0.2": {"dev": 28, "test": 25}},
        "relaxed": {"no_lm": {"dev": 30, "test": 31},
                    "lm_lmw0.05": {"dev": 26, "test": 27}, "lm_lmw0.1": {"dev": 26, "test": 24},
                    "lm_lmw0.2": {"dev": 27, "test": 23},
                    "lm_matched_0.1": {"dev": 25, "test": 26},
                    "lm_matched_0.2": {"dev": None, "test": 22}},
    }  # fmt: skip
    chosen = select_tuned(sweep, values)
    # by dev, never by test; a tie goes to the first value listed; a missing dev result leaves it open
    assert chosen == {"baseline": {"lm": "0.1"}, "relaxed": {"lm": "0.05"}}
    assert values["baseline"]["lm"] == {"dev": 27, "test": 29}
    assert values["relaxed"]["lm"] == {"dev": 26, "test": 27}
    assert values["relaxed"]["lm_matched"] == {"dev": None, "test": None}
    text = render_table(paper_table(sweep.analyses[0], values, sweep.sets, ".2f"))
    assert "| B | 27.00 | 29.00 |" in text and "| R | 26.00 | 27.00 |" in text
    notes = tuned_notes(sweep, chosen)
    assert (
        "`lm`: tuned per run on dev among {0.05, 0.1, 0.2}; chosen: baseline 0.1, relaxed 0.05."
        in notes
    )
    assert "`lm_matched`: tuned per run on dev among {0.1, 0.2}; chosen: none yet." in notes


def test_bad_tune_names_the_key(tmp_path):
    spec = yaml.safe_load(yaml.safe_dump(SPEC))
    spec["decodes"]["lm"]["tune"]["tune_set"] = "valid"
    with pytest.raises(InputError, match=r"decodes\.lm\.tune.*not one of the metric's sets"):
        load(tmp_path, spec)
    del spec["decodes"]["lm"]["tune"]["values"]
    with pytest.raises(InputError, match="needs option"):
        load(tmp_path, spec)
