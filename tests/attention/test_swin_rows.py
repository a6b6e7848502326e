"""Table 4's Swin rows (relaxed-attention paper §4.4) in espnet_ext.attention.variants, where the ASR/MT
variants live: the model_conf overrides and experiment tag of each row, as egs/cifar100/cls1 trains them."""

import pytest

from espnet_ext.attention.variants import SWIN_ROWS, main, resolve_swin_row
from espnet_ext.errors import ConfigError


@pytest.mark.parametrize(
    "row, values, tag, overrides",
    [
        ("baseline", {}, "baseline", []),
        ("no_stochastic_depth", {}, "no_stochastic_depth", ["drop_path_rate=0.0"]),
        ("drloc", {"drloc_weight": "0.3"}, "drloc", ["drloc_weight=0.3"]),
        ("smooth_focus", {}, "smooth_focus", ["smooth_focus=true"]),
        ("relaxed", {}, "relaxed_g0.1", ["gamma=0.1"]),  # the paper's tuned γ
        ("relaxed_no_stochastic_depth", {"gamma": "0.2"}, "relaxed_no_stochastic_depth_g0.2",
         ["gamma=0.2", "drop_path_rate=0.0"]),
        ("relaxed_drloc", {}, "relaxed_drloc_g0.1", ["gamma=0.1", "drloc_weight=0.5"]),
        ("fuzzy", {"fuzzy_std": "0.05"}, "fuzzy_g0.1_s0.05", ["gamma=0.1", "fuzzy_std=0.05"]),
    ],
)  # fmt: skip
def test_every_row_its_overrides_and_tag(row, values, tag, overrides):
    variant = resolve_swin_row(row, **values)
    assert variant.tag == tag
    assert variant.options == [w for o in overrides for w in ("--model_conf", o)]


def test_the_table_has_the_papers_eight_rows():
    assert len(SWIN_ROWS) == 8 and "fuzzy" in SWIN_ROWS and "baseline" in SWIN_ROWS


@pytest.mark.parametrize(
    "row, values, message",
    [
        ("relaxed_cross", {}, "unknown Table 4 row 'relaxed_cross'"),
        ("relaxed", {"gamma": "1.5"}, "must lie in [0, 1]"),
        ("fuzzy", {"fuzzy_std": "wide"}, "--fuzzy_std must be a number >= 0, got 'wide'"),
        ("relaxed", {"beta": "1"}, "takes no beta"),
    ],
)
def test_bad_rows_and_values_are_refused(row, values, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        resolve_swin_row(row, **values)


def test_command_line_prints_tag_and_options(tmp_path, capsys):
    config = tmp_path / "train_swin.yaml"
    config.write_text("model: swin\n")
    main(["--config", str(config), "--task", "cls", "--variant", "fuzzy", "--gamma", "0.10"])
    assert capsys.readouterr().out == (
        "fuzzy_g0.10_s0.03\n--model_conf gamma=0.10 --model_conf fuzzy_std=0.03\n"
    )  # the values as typed: the tag names what the user asked for
