"""RESULTS.md tables: layout, missing cells, formats, environment block, spec files and command line."""

import json
import os
import platform
import subprocess
import sys

import pytest
import torch

from espnet_ext.errors import ConfigError, InputError
from espnet_ext.results import (
    Cell,
    Table,
    environment,
    load_spec,
    render_results,
    render_table,
    visible_gpus,
    write_results,
)


@pytest.fixture
def results(tmp_path):
    """Two finished decodes (one with nested counts) and one not run yet."""
    for name, wer in (("base_test", 12.3456), ("relaxed_test", 9.8765)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "result.json").write_text(
            json.dumps({"wer": wer, "words": {"errors": int(wer * 10)}})
        )
    return tmp_path


def table(results):
    return Table(
        title="Table 2: WER [%]",
        row_header="Model",
        rows=["Transformer", "+ relaxed"],
        columns=["paper", "test", "errors", "dev"],
        cells=[
            Cell("Transformer", "paper", value=12.4),
            Cell(
                "Transformer",
                "test",
                path=str(results / "base_test" / "result.json"),
                key="wer",
                format=".1f",
            ),
            Cell(
                "+ relaxed", "test", path=str(results / "relaxed_test" / "result.json"), key="wer"
            ),
            Cell(
                "+ relaxed",
                "errors",
                path=str(results / "relaxed_test" / "result.json"),
                key="words.errors",
            ),
            Cell(
                "+ relaxed", "dev", path=str(results / "relaxed_dev" / "result.json"), key="wer"
            ),  # not run yet
        ],
    )


def test_table_layout(results):
    assert render_table(table(results)).splitlines() == [
        "| Model | paper | test | errors | dev |",
        "|:--|--:|--:|--:|--:|",
        "| Transformer | 12.40 | 12.3 | - | - |",
        "| + relaxed | - | 9.88 | 98 | - |",
    ]


def test_bad_cells(results):
    bad_key = table(results)
    bad_key.cells[1].key = "wre"
    with pytest.raises(InputError, match=r"base_test/result.json: key 'wre': no such key"):
        render_table(bad_key)
    outside = table(results)
    outside.cells.append(Cell("Conformer", "test", value=1.0))
    with pytest.raises(
        ConfigError, match=r"cell \('Conformer', 'test'\) is not in its rows/columns"
    ):
        render_table(outside)
    twice = table(results)
    twice.cells.append(Cell("Transformer", "paper", value=1.0))
    with pytest.raises(ConfigError, match="given twice"):
        render_table(twice)


def test_environment_block():
    env = environment()
    assert env["python"] == platform.python_version()
    assert env["torch"] == torch.__version__
    assert env["espnet"] == "202511"
    assert env["gpu"] == (
        "none"
        if not torch.cuda.is_available()
        else ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    )
    assert len(env["git commit"].split()[0]) == 40 or env["git commit"].startswith("none")
    assert str(os.cpu_count()) in env["cpu"]


def test_document_and_atomic_write(tmp_path, results):
    out = tmp_path / "RESULTS.md"
    write_results(
        out, "librispeech asr1", [table(results)], "./run.sh --stage 1", notes="Mini corpus."
    )
    text = out.read_text()
    assert text.startswith(
        "# librispeech asr1\n\nMini corpus.\n\n## Table 2: WER [%]\n\n| Model | paper |"
    )
    assert (
        "## Environment\n\n- date: " in text and f"- python: {platform.python_version()}\n" in text
    )
    assert text.endswith("## Command\n\n```sh\n./run.sh --stage 1\n```\n")
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["RESULTS.md"]
    # A failure while rendering leaves the previous document untouched.
    broken = table(results)
    broken.cells[1].key = "nope"
    with pytest.raises(InputError):
        write_results(out, "librispeech asr1", [broken], "./run.sh")
    assert out.read_text() == text


def test_render_is_deterministic_given_environment(results):
    env = {"date": "today"}
    first = render_results("t", [table(results)], "cmd", env=env)
    assert first == render_results("t", [table(results)], "cmd", env=env)
    assert "- date: today\n" in first


SPEC = """\
title: mustc st1
tables:
  - title: "Table 1: BLEU"
    rows: [baseline, 3]
    columns: [en-de]
    cells:
      - {{row: baseline, column: en-de, path: {path}, key: wer, format: .2f}}
      - {{row: 3, column: en-de, value: n/a}}
"""


def test_yaml_and_json_specs(tmp_path, results):
    yaml_spec = tmp_path / "spec.yaml"
    yaml_spec.write_text(SPEC.format(path=results / "base_test" / "result.json"))
    title, tables, notes = load_spec(yaml_spec)
    assert title == "mustc st1" and tables[0].rows == ["baseline", "3"]
    json_spec = tmp_path / "spec.json"
    json_spec.write_text(
        json.dumps(
            {
                "title": title,
                "tables": [
                    {
                        "title": t.title,
                        "rows": t.rows,
                        "columns": t.columns,
                        "cells": [
                            {k: v for k, v in vars(c).items() if v is not None} for c in t.cells
                        ],
                    }
                    for t in tables
                ],
            }
        )
    )
    assert render_table(load_spec(json_spec)[1][0]) == render_table(tables[0])
    assert "| 3 | n/a |" in render_table(tables[0]) and "| baseline | 12.35 |" in render_table(
        tables[0]
    )

    (tmp_path / "bad.yaml").write_text("title: x\ntables:\n  - {title: t, rows: [a]}\n")
    with pytest.raises(
        InputError, match=r"bad.yaml: table 1: expected title, rows, columns and cells"
    ):
        load_spec(tmp_path / "bad.yaml")


def test_command_line(tmp_path, results):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(path="base_test/result.json"))  # relative to the working directory
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "espnet_ext.results",
            "--spec",
            str(spec),
            "--out",
            "RESULTS.md",
            "--command",
            "./run.sh --stage 13",
        ],
        cwd=results,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    assert run.returncode == 0, run.stderr
    text = (results / "RESULTS.md").read_text()
    assert "| baseline | 12.35 |" in text and "./run.sh --stage 13" in text
    run = subprocess.run(
        [sys.executable, "-m", "espnet_ext.results", "--spec", str(tmp_path / "absent.yaml")],
        cwd=results,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    assert run.returncode == 1 and "absent.yaml: cannot read the results spec" in run.stderr


def test_scan_tables_finds_every_scored_decoding(tmp_path):
    import json

    from espnet_ext.results import main

    for model, decode, test, wer in [
        ("asr_a", "decode_x", "test", 12.5),
        ("asr_b", "decode_x_lm", "test", 3.25),
    ]:
        d = tmp_path / "exp" / model / decode / test / "score_wer"
        d.mkdir(parents=True)
        (d / "result.json").write_text(json.dumps({"wer": wer, "cer": wer / 2}))
    out = tmp_path / "RESULTS.md"
    main(
        [
            "--scan",
            "asr",
            "--exp_dir",
            str(tmp_path / "exp"),
            "--test_sets",
            "test other",
            "--out",
            str(out),
            "--title",
            "Mini",
            "--notes",
            "wall time 9 min",
            "--command",
            "./run.sh",
        ]
    )
    text = out.read_text()
    assert "# Mini" in text and "wall time 9 min" in text
    assert "| asr_a / decode_x | 12.50 | - |" in text
    assert "| asr_b / decode_x_lm | 3.25 | - |" in text
    assert "| asr_b / decode_x_lm | 1.62 | - |" in text  # CER table (3.25 / 2 rounded half-even)


SMI_ROWS = """0, GPU-1a2b3c4d-0000-0000-0000-000000000000, NVIDIA H100 80GB HBM3
1, GPU-9f8e7d6c-0000-0000-0000-000000000000, NVIDIA A100-SXM4-40GB
"""


@pytest.mark.parametrize(
    "visible, names",
    [
        (None, ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"]),
        ("1", ["NVIDIA A100-SXM4-40GB"]),
        ("1,0", ["NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"]),
        ("GPU-9f8e", ["NVIDIA A100-SXM4-40GB"]),
        ("", []),
        ("0,7,1", ["NVIDIA H100 80GB HBM3"]),  # CUDA stops at the first device it cannot find
    ],
)
def test_gpus_are_those_cuda_visible_devices_lets_the_process_use(visible, names):
    assert visible_gpus(SMI_ROWS, visible) == names


def test_environment_names_the_gpus_nvidia_smi_lists(tmp_path, monkeypatch):
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncat <<'EOF'\n{SMI_ROWS}EOF\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert environment()["gpu"] == "NVIDIA H100 80GB HBM3"
