"""The paper-layout tables: Table 1 layout, mean ± std over seeds, internal-LM reductions, γ curves,
metric-against-setting curves."""

import pytest

from espnet_ext.analysis.tables import (
    average_columns,
    curve,
    gamma_runs,
    internal_lm,
    lm_improvement,
    mean_std,
    paper_table,
)
from espnet_ext.errors import ConfigError
from espnet_ext.results import render_table

VALUES = {
    "baseline": {
        "no_lm": {"dev": 5.0, "test": 6.0},
        "lm_t": {"dev": 4.9, "test": 6.0},
        "lm_x": {"dev": 4.5, "test": 5.5},
    },
    "relaxed_cross": {
        "no_lm": {"dev": 5.2, "test": 6.1},
        "lm_t": {"dev": 5.0, "test": 6.0},
        "lm_x": {"dev": 3.2, "test": 4.1},
        "no_lm_matched": {"dev": 5.5, "test": None},
        "lm_x_matched": {"dev": 3.9, "test": 4.4},
    },
    "b_seed1": {"no_lm": {"dev": 1.0, "test": 2.0}},
    "b_seed2": {"no_lm": {"dev": 3.0, "test": 2.0}},
}


def test_table1_layout_with_matched_inference_suffix():
    spec = {
        "title": "Table 1",
        "groups": {"without LM": "no_lm", "with LM": "lm_x"},
        "rows": [
            {"label": "Baseline", "run": "baseline"},
            {"label": "+ matched inference", "run": "relaxed_cross", "suffix": "_matched"},
        ],
    }
    text = render_table(paper_table(spec, VALUES, ["dev", "test"], ".2f"))
    lines = text.splitlines()
    assert (
        lines[0] == "| Approach | without LM dev | without LM test | with LM dev | with LM test |"
    )
    assert lines[2] == "| Baseline | 5.00 | 6.00 | 4.50 | 5.50 |"
    assert lines[3] == "| + matched inference | 5.50 | - | 3.90 | 4.40 |"  # not decoded yet: "-"


def test_seed_rows_show_mean_and_sample_std():
    spec = {
        "title": "Table 7",
        "groups": {"": "no_lm"},
        "rows": [{"label": "Baseline", "runs": ["b_seed1", "b_seed2"]}],
    }
    text = render_table(paper_table(spec, VALUES, ["dev", "test"], ".2f"))
    assert "| Baseline | 2.00 ± 1.41 | 2.00 ± 0.00 |" in text
    assert mean_std([1.0, None]) is None


def test_average_columns_wait_for_every_member():
    bleu = {"es": 20.0, "fr": 10.0, "it": 15.0, "pt": None}
    averages = {"Trained": ["es", "fr"], "All": ["es", "fr", "it", "pt"], "None": []}
    # (20 + 10) / 2 = 15; pt not scored yet -> no average over all; an empty group shows nothing
    assert average_columns(bleu, averages) == {"Trained": 15.0, "All": None, "None": None}
    assert average_columns({**bleu, "pt": 5.0}, averages)["All"] == 12.5  # (20+10+15+5) / 4


def test_internal_lm_reductions(tmp_path):
    spec = {
        "title": "Table 5: internal LM",
        "models": {"Baseline": "baseline", "Relaxed": "relaxed_cross"},
        "no_lm": "no_lm",
        "lms": {"+ LM (transcripts)": "lm_t", "+ LM (extended)": "lm_x"},
    }
    table, figure = internal_lm(
        spec, VALUES, ["dev", "test"], ".2f", False, "WER", tmp_path, tmp_path
    )
    text = render_table(table)
    assert "| Relaxed + LM (extended) | 3.20 | 4.10 | 2.00 | 2.00 |" in text
    assert "| Baseline + LM (transcripts) | 4.90 | 6.00 | 0.10 | 0.00 |" in text
    assert figure.exists() and figure.stat().st_size > 1000
    assert lm_improvement(30.0, 31.5, higher_is_better=True) == 1.5  # BLEU: the gain


def test_gamma_runs_parse_the_grid_and_unknown_runs_are_refused():
    values = {
        "relaxed_self_g0.01": {},
        "relaxed_self_g0.001": {},
        "relaxed_self_g0.01_seed2": {},
        "baseline": {},
    }
    assert gamma_runs(values, "relaxed_self") == [
        (0.001, "relaxed_self_g0.001"),
        (0.01, "relaxed_self_g0.01"),
    ]
    spec = {"title": "T", "groups": {"": "no_lm"}, "rows": [{"label": "x", "run": "nope"}]}
    with pytest.raises(ConfigError, match="run 'nope'"):
        paper_table(spec, VALUES, ["dev"], ".2f")


def test_average_columns_mean_their_sets_per_run_and_wait_for_all():
    spec = {
        "title": "Table 2",
        "groups": {"": "no_lm"},
        "averages": {"AVG": ["dev", "test"]},
        "rows": [
            {"label": "Shared", "run": "baseline"},
            {"label": "Seeds", "runs": ["b_seed1", "b_seed2"]},  # per seed (1.5, 2.5): 2.00 ± 0.71
            {"label": "Matched", "run": "relaxed_cross", "suffix": "_matched"},
        ],
    }
    lines = render_table(paper_table(spec, VALUES, ["dev", "test"], ".2f")).splitlines()
    assert lines[0] == "| Approach | dev | test | AVG |"
    assert lines[2] == "| Shared | 5.00 | 6.00 | 5.50 |"
    assert lines[3] == "| Seeds | 2.00 ± 1.41 | 2.00 ± 0.00 | 2.00 ± 0.71 |"
    assert lines[4] == "| Matched | 5.50 | - | - |"  # a member not decoded yet: no average
    spec["averages"] = {"AVG": ["dev", "train"]}
    with pytest.raises(ConfigError, match="average 'AVG' needs sets of the metric"):
        paper_table(spec, VALUES, ["dev", "test"], ".2f")


def test_a_row_may_take_each_set_from_another_run():
    """The "separate" row of Tables 3 / 5: one model per domain, each giving its domain's sets."""
    spec = {
        "title": "Table 3",
        "groups": {"": "no_lm"},
        "averages": {"AVG": ["dev", "test"]},
        "rows": [{"label": "Separate", "run": {"baseline": ["dev"], "relaxed_cross": ["test"]}}],
    }
    lines = render_table(paper_table(spec, VALUES, ["dev", "test"], ".2f")).splitlines()
    assert lines[2] == "| Separate | 5.00 | 6.10 | 5.55 |"  # dev of baseline, test of relaxed_cross
    spec["rows"] = [{"label": "Separate", "run": {"baseline": ["dev"]}}]
    with pytest.raises(ConfigError, match="gives set 'test'"):
        paper_table(spec, VALUES, ["dev", "test"], ".2f")


def test_curve_puts_a_column_against_a_setting_per_series(tmp_path):
    values = {
        "s4": {"beam": {"es": 10.0, "fr": 20.0}},
        "s8": {"beam": {"es": 8.0, "fr": 16.0}},
        "g4": {"beam": {"es": 12.0, "fr": None}},  # fr not decoded yet
        "g8": {"beam": {"es": 9.0, "fr": 11.0}},
    }
    spec = {
        "title": "Fig. 2: WER against H'",
        "x_label": "H'",
        "decode": "beam",
        "column": "AVG",
        "averages": {"AVG": ["es", "fr"]},
        # settings in any order, as YAML numbers or strings
        "series": {"Subset": {8: "s8", 4: "s4"}, "Group": {"4": "g4", "8": "g8"}},
    }
    table, figure = curve(spec, values, ["es", "fr"], ".1f", "WER", tmp_path, tmp_path)
    lines = render_table(table).splitlines()
    assert lines[0] == "| Series | H' = 4 | H' = 8 |"
    assert lines[2:4] == ["| Subset | 15.0 | 12.0 |", "| Group | - | 10.0 |"]
    assert figure.exists() and figure.stat().st_size > 1000
    assert "fig_2.png" in table.notes
    with pytest.raises(ConfigError, match="column 'de'"):
        curve({**spec, "column": "de"}, values, ["es", "fr"], ".1f", "WER", tmp_path, tmp_path)
    with pytest.raises(ConfigError, match="settings must be numbers"):
        curve(
            {**spec, "series": {"S": {"four": "s4"}}},
            values,
            ["es", "fr"],
            ".1f",
            "WER",
            tmp_path,
            tmp_path,
        )


def test_long_figure_titles_are_wrapped_to_fit_the_figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from espnet_ext.analysis.tables import fitted_title

    title = "Fig. 2 (mini scale): average WER [%] against the number of head candidates H'"
    for width in (3.0, 4.5, 8.0):
        fig, ax = plt.subplots(figsize=(width, 3.2))
        ax.set_ylabel("WER [%] (AVG)", fontsize=8)
        text = fig.suptitle(fitted_title(title, width), fontsize=9)
        fig.tight_layout()
        fig.canvas.draw()
        box = text.get_window_extent()
        assert box.x0 >= 0 and box.x1 <= fig.bbox.x1, (width, text.get_text())
        assert text.get_text().replace("\n", " ") == title  # every word kept, in order
        plt.close(fig)
