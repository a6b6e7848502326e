"""The cifar100/cls1 sweep specs run what Table 4 and Table 7 of the relaxed-attention paper define."""

from pathlib import Path

from espnet_ext.analysis.sweep import load_sweep
from espnet_ext.analysis.tables import paper_table

SWEEPS = Path(__file__).resolve().parents[2] / "egs" / "cifar100" / "cls1" / "conf" / "sweeps"
CHECKPOINT = "--imagenet_checkpoint downloads/swin_tiny_patch4_window7_224.pth"
# Table 4's Swin-T rows: (variant trained, decoded with matched inference)
TABLE4 = [
    ("baseline", False),
    ("no_stochastic_depth", False),
    ("drloc", False),
    ("smooth_focus", False),
    ("relaxed", False),
    ("relaxed", True),
    ("relaxed_no_stochastic_depth", True),
    ("relaxed_drloc", True),
    ("fuzzy", True),
]


def decode_line(sweep, run, decode):
    (line,) = [
        " ".join(line)
        for line in sweep.invocations(run)
        if "--inference_tag" in line and line[line.index("--inference_tag") + 1] == decode
    ]
    return line


def test_table4_rows_and_columns():
    sweep = load_sweep(SWEEPS / "table4.yaml")
    table = sweep.analyses[0]
    assert sweep.sets == ["pt_b1024", "pt_b128", "scratch_b1024", "scratch_b128"]
    assert len(table["rows"]) == len(TABLE4)
    for row, (variant, matched) in zip(table["rows"], TABLE4):
        decode = "decode" + row.get("suffix", "")
        for column in sweep.sets:
            line = decode_line(sweep, row["run"].format(set=column), decode)
            assert f"--variant {variant} " in line
            assert ("--matched_inference true" in line) == matched
            assert f"--batch {column.split('_b')[1]}" in line
            assert (CHECKPOINT in line) == column.startswith("pt")


def test_table4_renders_in_the_papers_layout():
    sweep = load_sweep(SWEEPS / "table4.yaml")
    values = {
        run: {d.name: dict.fromkeys(sweep.sets, 50.0) for d in sweep.decodes if d.applies_to(run)}
        for run in sweep.runs
    }
    table = paper_table(sweep.analyses[0], values, sweep.sets, ".2f")
    assert table.columns == sweep.sets and len(table.rows) == 9
    assert {c.value for c in table.cells} == {50.0}


def test_table7_seeds():
    sweep = load_sweep(SWEEPS / "seeds.yaml")
    baseline, fuzzy = sweep.analyses[0]["rows"]
    for row, variant, decode in (
        (baseline, "baseline", "decode"),
        (fuzzy, "fuzzy", "decode_matched"),
    ):
        assert decode == "decode" + row.get("suffix", "")
        seeds = set()
        for run in row["runs"]:
            line = decode_line(sweep, run, decode)
            assert f"--variant {variant} --batch 128 {CHECKPOINT}" in line
            seeds.add(line.split("--train_args ")[1].split(" --")[0])
        assert seeds == {f"--seed {n}" for n in range(1, 6)}


def test_mini_table_has_every_variant():
    sweep = load_sweep(SWEEPS / "table4_mini.yaml")
    for row, (variant, matched) in zip(sweep.analyses[0]["rows"], TABLE4):
        line = decode_line(sweep, row["run"], "decode" + row.get("suffix", ""))
        assert f"--variant {variant} " in line and ("--matched_inference true" in line) == matched
