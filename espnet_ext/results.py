"""RESULTS.md: the measured numbers laid out as a paper's tables, plus the environment and the command.

    python -m espnet_ext.results --spec conf/results.yaml --out RESULTS.md [--command "./run.sh --stage 1"]

The spec (YAML or JSON) names the tables; each cell reads one value from a scorer's ``result.json``::

    title: librispeech asr1                      # heading of the document
    notes: Trained on the mini corpus, 2 CPUs.   # optional, free markdown under the heading
    tables:
      - title: "Table 2: WER [%]"
        row_header: Model                        # optional heading of the label column
        rows: [Transformer, + relaxed attention]
        columns: [dev, test]
        notes: ...                               # optional, under the table
        cells:
          - {row: Transformer, column: test, path: exp/asr/decode_test/score_wer/result.json, key: wer,
             format: .1f}                        # format spec, default .2f for floats
          - {row: Transformer, column: dev, value: 5.3}   # a literal (e.g. the paper's number)

``key`` may be dotted (``words.errors``). Relative paths are relative to the current directory (the recipe
dir). A cell without a spec entry, or whose result.json does not exist yet, shows "-"; a result.json that
exists but lacks the key is an error (a typo must not look like a missing experiment).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from espnet_ext.errors import ConfigError, InputError, reports_input_errors
from espnet_ext.fileio import atomic_write

MISSING = "-"
PathLike = str | Path


@dataclass
class Cell:
    row: str
    column: str
    path: str | None = None
    key: str | None = None
    format: str | None = None
    value: Any = None  # a literal instead of path/key


@dataclass
class Table:
    title: str
    rows: list[str]
    columns: list[str]
    cells: list[Cell] = field(default_factory=list)
    row_header: str = ""
    notes: str = ""


def lookup(path: PathLike, key: str) -> Any:
    """The value at dotted ``key`` of a JSON file, or None when the file does not exist (not run yet)."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"not a JSON file: {e}", path=path) from e
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            raise InputError("no such key in this result file", path=path, key=key)
        value = value[part]
    return value


def format_value(value: Any, spec: str | None) -> str:
    if value is None:
        return MISSING
    if spec is not None:
        try:
            return format(value, spec)
        except (ValueError, TypeError) as e:
            raise ConfigError(f"cannot format {value!r} with {spec!r}: {e}") from e
    return format(value, ".2f") if isinstance(value, float) else str(value)


def render_table(table: Table) -> str:
    """A markdown table with rows and columns in the given order; cells nobody filled show "-"."""
    values: dict[tuple, str] = {}
    for cell in table.cells:
        if cell.row not in table.rows or cell.column not in table.columns:
            raise ConfigError(
                f"table '{table.title}': cell ({cell.row!r}, {cell.column!r}) is not in its rows/columns"
            )
        if (cell.row, cell.column) in values:
            raise ConfigError(
                f"table '{table.title}': cell ({cell.row!r}, {cell.column!r}) is given twice"
            )
        if cell.path is not None:
            if cell.key is None:
                raise ConfigError(
                    f"table '{table.title}': cell ({cell.row!r}, {cell.column!r}) has a path but no key"
                )
            value = lookup(cell.path, cell.key)
        else:
            value = cell.value
        values[cell.row, cell.column] = format_value(value, cell.format)

    def line(fields: Sequence[str]) -> str:
        return "| " + " | ".join(f.replace("|", "\\|") for f in fields) + " |"

    lines = [
        line([table.row_header, *table.columns]),
        "|:--" + "|--:" * len(table.columns) + "|",
        *(
            line([row, *(values.get((row, column), MISSING) for column in table.columns)])
            for row in table.rows
        ),
    ]
    return "\n".join(lines) + "\n"


def _git_commit(directory: Path) -> str:
    try:
        commit = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(directory), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "none (not a git checkout)"
    return commit + (" (with uncommitted changes)" if dirty else "")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _torch_version() -> str:
    """torch's ``__version__`` with its build tag ("2.12.1+cu130"), read from ``torch/version.py`` (the
    installed metadata drops the tag): importing torch would be most of the RESULTS.md stage's time."""
    spec = importlib.util.find_spec("torch")
    for directory in (spec.submodule_search_locations or []) if spec else []:
        try:
            text = (Path(directory) / "version.py").read_text(encoding="utf-8")
        except OSError:
            continue
        found = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
        if found:
            return found[1]
    return _version("torch")


def visible_gpus(smi_rows: str, visible: str | None) -> list[str]:
    """GPU names of ``nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader`` output that
    ``CUDA_VISIBLE_DEVICES`` (indices or UUIDs, in the order CUDA numbers them) lets this process use;
    all of them where it is unset."""
    rows = [[field.strip() for field in line.split(",", 2)] for line in smi_rows.splitlines()]
    rows = [row for row in rows if len(row) == 3]
    if visible is None:
        return [name for _, _, name in rows]
    names = []
    for wanted in filter(None, (v.strip() for v in visible.split(","))):
        match = [name for index, uuid, name in rows if wanted == index or uuid.startswith(wanted)]
        if not match:
            break  # CUDA stops at the first entry it cannot resolve
        names.append(match[0])
    return names


def _gpus() -> list[str]:
    try:
        rows = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,uuid,name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return visible_gpus(rows, os.environ.get("CUDA_VISIBLE_DEVICES"))


def environment() -> dict[str, str]:
    """What produced the numbers: date, software versions, hardware, code version."""
    gpus = _gpus()
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "python": platform.python_version(),
        "torch": _torch_version(),
        "espnet": _version("espnet"),
        "os": platform.platform(),
        "cpu": f"{_cpu_model()} ({os.cpu_count()} logical cores)",
        "gpu": ", ".join(gpus) if gpus else "none",
        "git commit": _git_commit(Path(__file__).resolve().parent),
    }


def render_results(
    title: str,
    tables: Sequence[Table],
    command: str,
    notes: str = "",
    env: dict[str, str] | None = None,
) -> str:
    parts = [f"# {title}\n"]
    if notes.strip():
        parts.append(notes.strip() + "\n")
    for table in tables:
        parts.append(f"## {table.title}\n")
        parts.append(render_table(table))
        if table.notes.strip():
            parts.append(table.notes.strip() + "\n")
    parts.append("## Environment\n")
    parts.append("".join(f"- {name}: {value}\n" for name, value in (env or environment()).items()))
    parts.append(f"## Command\n\n```sh\n{command}\n```\n")
    return "\n".join(parts)


def write_results(
    out: PathLike, title: str, tables: Sequence[Table], command: str, notes: str = ""
) -> Path:
    """Render and write ``out`` whole (a crash leaves the previous version)."""
    text = render_results(title, tables, command, notes)
    with atomic_write(out) as f:
        f.write(text)
    return Path(out)


def load_spec(path: PathLike) -> tuple:
    """(title, tables, notes) of a YAML or JSON spec file."""
    path = Path(path)
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))  # YAML is a superset of JSON
    except (OSError, yaml.YAMLError) as e:
        raise InputError(f"cannot read the results spec: {e}", path=path) from e
    if not isinstance(spec, dict) or not isinstance(spec.get("tables"), list):
        raise InputError("expected a mapping with 'title' and a list 'tables'", path=path)
    tables = []
    for number, entry in enumerate(spec["tables"], start=1):
        try:
            cells = [
                Cell(**{k: (str(v) if k in ("row", "column") else v) for k, v in cell.items()})
                for cell in entry.get("cells", [])
            ]
            tables.append(
                Table(
                    title=str(entry["title"]),
                    rows=[str(r) for r in entry["rows"]],
                    columns=[str(c) for c in entry["columns"]],
                    cells=cells,
                    row_header=str(entry.get("row_header", "")),
                    notes=str(entry.get("notes", "")),
                )
            )
        except (KeyError, TypeError, AttributeError) as e:
            raise InputError(
                f"table {number}: expected title, rows, columns and cells ({e})", path=path
            ) from e
    return str(spec.get("title", "RESULTS")), tables, str(spec.get("notes", ""))


def scan_tables(
    exp_dir: PathLike, test_sets: Sequence[str], scorer: str, metrics: Sequence[tuple]
) -> list[Table]:
    """Tables for every ``<exp_dir>/<model>/<decode>/<test_set>/<scorer>/result.json`` found.

    One table per (key, title) in ``metrics``; rows are "<model> / <decode>", columns the test sets.
    For pipelines whose experiments are not known in advance (the generic RESULTS.md of a recipe).
    """
    exp_dir = Path(exp_dir)
    found = sorted(
        {p.parents[2] for t in test_sets for p in exp_dir.glob(f"*/*/{t}/{scorer}/result.json")}
    )
    rows = [f"{d.parent.name} / {d.name}" for d in found]
    tables = []
    for key, title in metrics:
        cells = [
            Cell(row=row, column=t, path=str(d / t / scorer / "result.json"), key=key)
            for row, d in zip(rows, found)
            for t in test_sets
        ]
        tables.append(
            Table(
                title=title,
                rows=rows,
                columns=list(test_sets),
                cells=cells,
                row_header="model / decoding",
            )
        )
    return tables


SCANS = {
    "asr": ("score_wer", [("wer", "WER [%]"), ("cer", "CER [%]")]),
    "mt": ("score_bleu", [("bleu", "BLEU"), ("exact_match", "Exact match [%]")]),
    "st": ("score_bleu", [("bleu", "BLEU"), ("exact_match", "Exact match [%]")]),
    "cls": ("score_topk", [("top1", "Top-1 accuracy [%]"), ("topk", "Top-5 accuracy [%]")]),
    "ocr": (
        "score_acc",
        [("seq_acc", "Sequence accuracy [%]"), ("char_acc", "Character accuracy [%]")],
    ),
}


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m espnet_ext.results",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--spec", type=Path, help="YAML or JSON table layout")
    source.add_argument(
        "--scan", choices=sorted(SCANS), help="tabulate every scored decoding under --exp_dir"
    )
    parser.add_argument("--exp_dir", type=Path, default=Path("exp"), help="with --scan")
    parser.add_argument(
        "--test_sets", default="test", help="with --scan: space-separated column names"
    )
    parser.add_argument("--title", default="RESULTS", help="with --scan")
    parser.add_argument("--notes", default="", help="with --scan: markdown under the title")
    parser.add_argument("--out", type=Path, default=Path("RESULTS.md"))
    parser.add_argument(
        "--command",
        default=None,
        help="the command that produced the results (default: this command line)",
    )
    cli_args = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(cli_args)
    command = args.command or shlex.join(["python", "-m", "espnet_ext.results", *cli_args])
    if args.spec is not None:
        title, tables, notes = load_spec(args.spec)
    else:
        scorer, metrics = SCANS[args.scan]
        tables = scan_tables(args.exp_dir, args.test_sets.split(), scorer, metrics)
        title, notes = args.title, args.notes
    write_results(args.out, title, tables, command, notes)
    print(f"results: {len(tables)} table(s) -> {args.out}")


if __name__ == "__main__":
    sys.exit(main())
