"""Each ablation spec's table rows run what the paper's table defines (A.5 Table 7, A.6 Table 8).

Table 7 (MT): baseline and relaxed self-attention *with matched inference*, no LM, 5 seeds.
Table 8: ASR column relaxed cross attention with LM; MT column relaxed self-attention with matched
inference, no LM; "with" rows attention dropout on, "without" rows explicitly off (the full configs have it).
"""

import re
import shlex
from pathlib import Path

import pytest

from espnet_ext.analysis.sweep import load_sweep

EGS = Path(__file__).resolve().parents[2] / "egs"


def row_commands(sweep, analysis_index=0):
    """label -> list of decoding command lines (one per run of the row) that fill the row's cells."""
    table = sweep.analyses[analysis_index]
    (decode,) = table["groups"].values()
    commands = {}
    for row in table["rows"]:
        decode_name = decode + row.get("suffix", "")
        runs = row["runs"] if "runs" in row else [row["run"]]
        lines = []
        for run in runs:
            matching = [
                line
                for line in sweep.invocations(run)
                if "--inference_tag" in line
                and line[line.index("--inference_tag") + 1] == decode_name
            ]
            assert len(matching) == 1, f"{row['label']}: run {run} never decoded as {decode_name}"
            lines.append(shlex.join(matching[0]))
        commands[row["label"]] = lines
    return commands


def attention_dropout(line):
    rates = re.findall(r"attention_dropout_rate=([0-9.]+)", line)
    assert len(rates) == 3, f"attention dropout not set explicitly at all three sites: {line}"
    assert len(set(rates)) == 1
    return float(rates[0])


def test_iwslt14_dropout_is_table8_mt_column():
    sweep = load_sweep(EGS / "iwslt14/mt1/conf/sweeps/dropout.yaml")
    commands = row_commands(sweep)
    assert len(commands) == 4
    # Table 8's row order: baseline with / without attention dropout, relaxed with / without.
    for index, (line,) in enumerate(commands.values()):
        assert "--use_lm true" not in line  # Table 8, MT: no LM
        relaxed = index >= 2
        assert ("--attention_variant relaxed_self" in line) == relaxed
        assert "relaxed_cross" not in line
        assert ("--matched_inference true" in line) == relaxed
        assert attention_dropout(line) == (0.1 if index % 2 == 0 else 0.0)


def test_librispeech_dropout_is_table8_asr_column():
    sweep = load_sweep(EGS / "librispeech/asr1/conf/sweeps/dropout.yaml")
    for index, (line,) in enumerate(row_commands(sweep).values()):
        assert "--use_lm true" in line
        assert ("--attention_variant relaxed_cross" in line) == (index >= 2)
        # A.3.1: every LibriSpeech dropout layer, attention dropout included, uses p = 0.2.
        assert attention_dropout(line) == (0.2 if index % 2 == 0 else 0.0)


def test_iwslt14_seeds_is_table7_with_matched_inference():
    sweep = load_sweep(EGS / "iwslt14/mt1/conf/sweeps/seeds.yaml")
    commands = row_commands(sweep)
    assert len(commands) == 2
    for label, lines in commands.items():
        assert len(lines) == 5
        assert sorted(re.search(r"--seed (\d)", x).group(1) for x in lines) == list("12345")
        relaxed = "elaxed" in label
        for line in lines:
            assert "--use_lm true" not in line
            assert ("--attention_variant relaxed_self" in line) == relaxed
            assert ("--matched_inference true" in line) == relaxed


@pytest.mark.parametrize("recipe", ["iwslt14/mt1", "librispeech/asr1"])
def test_seeds_rows_are_distinct_seeds_of_one_variant(recipe):
    sweep = load_sweep(EGS / recipe / "conf/sweeps/seeds.yaml")
    for lines in row_commands(sweep).values():
        variants = {re.search(r"--attention_variant (\w+)", x).group(1) for x in lines}
        assert len(variants) == 1


def test_iwslt14_lm_weight_grid_decodes_each_column_at_its_lambda_with_paper_models():
    grid = load_sweep(EGS / "iwslt14/mt1/conf/sweeps/lm_weight_grid.yaml")
    paper = load_sweep(EGS / "iwslt14/mt1/conf/sweeps/paper.yaml")
    for table, lm_text in zip(grid.analyses, ("transcripts", "extended")):
        for header, decode in table["groups"].items():
            for row in table["rows"]:
                (line,) = [
                    shlex.join(cmd)
                    for cmd in grid.invocations(row["run"])
                    if "--inference_tag" in cmd and cmd[cmd.index("--inference_tag") + 1] == decode
                ]
                if header == "no LM":
                    assert "--use_lm" not in line and "lm_weight" not in line
                else:
                    weight = header.removeprefix("λ ")
                    assert f"--lm_text {lm_text}" in line and f"--lm_weight {weight}'" in line
    # the models are paper.yaml's: same tags and training invocations, so trained once for both specs
    for run in grid.runs:
        train = [cmd for cmd in grid.invocations(run) if "--inference_tag" not in cmd]
        assert train[0][train[0].index("--mt_tag") + 1] == run
        assert shlex.join(train[0]).replace(" --test_sets test", "") == shlex.join(
            [cmd for cmd in paper.invocations(run) if "--inference_tag" not in cmd][0]
        )


@pytest.mark.parametrize("spec", ["table1_legonn_ende.yaml", "table1_legonn_ende_mini.yaml"])
def test_legonn_table1_rows_are_three_seeds_of_one_config_and_every_run_is_used(spec):
    sweep = load_sweep(EGS / "wmt/mt1/conf/sweeps" / spec)
    used = set()
    for table in sweep.analyses:
        for row in table["rows"]:
            options = [sweep.runs[run] for run in row["runs"]]
            (config,) = {re.search(r"--mt_config (\S+)", o).group(1) for o in options}
            assert config.endswith("_mini.yaml") == spec.endswith("_mini.yaml"), row["label"]
            seeds = {
                m.group(1) if (m := re.search(r"--seed (\d+)", o)) else "config" for o in options
            }
            assert len(seeds) == 3, row["label"]
            used.update(row["runs"])
    assert used == set(sweep.runs)  # no training the table does not show


@pytest.mark.parametrize(
    "recipe,variant,options,extra_sets",
    [
        ("librispeech/asr1", "noisy", ["--mini_snr_db"], ["test_end7"]),
        (
            "librispeech/asr1",
            "domain",
            ["--mini_snr_db", "--mini_test_domain repeated_tens", "--mini_heldout_digit none"],
            [],
        ),
        (
            "iwslt14/mt1",
            "domain",
            ["--mini_test_domain repeated_tens", "--mini_source_noise", "--mini_heldout_word none"],
            [],
        ),
    ],
)
def test_paper_yaml_variants_run_its_tables_on_other_data(recipe, variant, options, extra_sets):
    paper = load_sweep(EGS / recipe / "conf/sweeps/paper.yaml")
    other = load_sweep(EGS / recipe / f"conf/sweeps/paper_{variant}.yaml")
    assert (other.runs, other.decodes, other.analyses) == (
        paper.runs,
        paper.decodes,
        paper.analyses,
    )
    for option in [*options, f"--expdir exp_{variant}"]:
        assert option in other.common
    assert other.result == paper.result.replace("exp/", f"exp_{variant}/", 1)
    assert other.metric["sets"] == paper.metric["sets"] + extra_sets


@pytest.mark.parametrize(
    "setup,gammas",
    [
        ("30h", {"relaxed_self": "0.001", "relaxed_cross": "0.25"}),
        ("433h", {"relaxed_self": "0.005", "relaxed_cross": "0.25"}),
        ("433h_self", {"relaxed_self": "0.005", "relaxed_cross": "0.2"}),
    ],
)
def test_lrs3_table2_tunes_the_lm_weight_per_approach_on_dev(setup, gammas):
    """A.3.2: γ per fine-tuning setup; λ "optimized for each approach" on dev among {0.05, 0.1, 0.15, 0.2},
    for every LM decoding (with and without matched inference, both LMs of Table 6)."""
    sweep = load_sweep(EGS / f"lrs3/vsr1/conf/sweeps/paper_{setup}.yaml")
    for run, gamma in gammas.items():
        assert f"--attention_variant {run} --relax_gamma {gamma}" in sweep.runs[run]
    lm_decodes = {"lm", "lm_matched"} | ({"lm_transcripts"} if setup == "433h_self" else set())
    assert set(sweep.tuned) == lm_decodes
    for name, tuned in sweep.tuned.items():
        assert tuned.on == "dev"
        assert [value for value, _ in tuned.choices] == ["0.05", "0.1", "0.15", "0.2"]
        for value, grid_name in tuned.choices:
            (decode,) = [d for d in sweep.decodes if d.name == grid_name]
            assert "--use_lm true" in decode.options
            assert f'--inference_args "--lm_weight {value}"' in decode.options
            assert ("--matched_inference true" in decode.options) == name.endswith("_matched")
    # Every analysis reads the tuned decodings, never one grid point.
    for analysis in sweep.analyses:
        named = set((analysis.get("groups") or {}).values()) | set(
            (analysis.get("lms") or {}).values()
        )
        assert named <= {"no_lm"} | lm_decodes
    # Self-training trains every variant with AV-HuBERT's self-training schedule; the pseudo-labelling
    # baseline is paper_433h's model (train_vsr_large.yaml, shared through its tag).
    self_config = "--asr_config conf/train_vsr_large_self.yaml"
    assert all(
        (self_config in options) == (setup == "433h_self") for options in sweep.runs.values()
    )
    assert not any(self_config in step for step in sweep.prepare)
