"""The tree passes its style checks: ruff (pyproject.toml) on the Python code, shellcheck on the shell.

Each check fails with the tool's own output. shellcheck is a Debian package
(tools/apt-packages.txt): a machine without it fails here with the install command instead of
skipping the check.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHELL_DIRS = ("egs", "utils", "tools")
# Outputs of recipe runs (gitignored), and the links to the shared environment.
SKIP_DIRS = {"data", "dump", "exp", "downloads", "venv", "nltk_data", "__pycache__"}

# Findings in scripts of other parts of the tree, tolerated until those scripts are fixed: one entry
# per (real file, shellcheck code). Every entry must still match a finding (a stale one fails), so
# the list only shrinks; it is meant to be empty.
SHELLCHECK_ALLOWED = {
    # Sourced by the pipelines, no shebang: need a "# shellcheck shell=bash" directive.
    ("egs/TEMPLATE/asr1/cmd.sh", 2148),
    ("egs/TEMPLATE/asr1/db.sh", 2148),
    ("egs/TEMPLATE/asr1/path.sh", 2148),
    # Unquoted expansions and $(...) word splitting.
    ("egs/TEMPLATE/asr1/asr.sh", 2046),
    ("egs/TEMPLATE/asr1/asr.sh", 2086),
    ("egs/TEMPLATE/mt1/mt.sh", 2046),
    ("egs/TEMPLATE/mt1/mt.sh", 2086),
    ("egs/TEMPLATE/lm1/lm.sh", 2086),
    ("egs/TEMPLATE/ocr1/ocr.sh", 2046),
    # Variables the sourcing pipeline sets (stage, cmd wrappers, ngpu); a for-loop over $(cat ...).
    ("utils/pipeline.sh", 2013),
}


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-m", "ruff", *args])


def test_ruff_format():
    result = _ruff("format", "--check", ".")
    assert result.returncode == 0, (
        "ruff format would change these files (run `ruff format <files>`):\n"
        + result.stdout
        + result.stderr
    )


def test_ruff_check():
    result = _ruff("check", "--output-format", "concise", ".")
    assert result.returncode == 0, "ruff check:\n" + result.stdout + result.stderr


def _is_shell_script(path: Path) -> bool:
    if path.suffix == ".sh":
        return True
    if path.suffix:
        return False
    with open(path, "rb") as f:
        first = f.readline()
    return first.startswith(b"#!") and b"bash" in first


def shell_scripts() -> dict[str, str]:
    """Every shell script under egs/, utils/ and tools/, once per real file.

    Returns {real path: path to lint}, both relative to the root. A script linked into a recipe
    directory is linted through its first link there, so that its `. ./path.sh` resolves as at run
    time; directory links (a recipe's utils/) are not walked, their targets are.
    """
    found: dict[str, list[str]] = {}
    for top in SHELL_DIRS:
        for dirpath, dirnames, filenames in os.walk(ROOT / top):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if not path.exists() or not _is_shell_script(path):
                    continue
                real = path.resolve()
                if not real.is_relative_to(ROOT):
                    continue
                found.setdefault(str(real.relative_to(ROOT)), []).append(
                    str(path.relative_to(ROOT))
                )
    chosen = {}
    for real, paths in found.items():
        links = [p for p in paths if p != real]
        chosen[real] = links[0] if links else real
    return chosen


def test_shell_scripts_found():
    scripts = shell_scripts()
    for expected in ("utils/pipeline.sh", "egs/TEMPLATE/asr1/asr.sh", "tools/install.sh"):
        assert expected in scripts
    # Linted through a recipe's link, where its neighbours (cmd.sh, db.sh) resolve as at run time.
    assert scripts["egs/TEMPLATE/asr1/path.sh"].split("/")[1] != "TEMPLATE"


def test_shellcheck():
    if shutil.which("shellcheck") is None:
        pytest.fail(
            "shellcheck is not installed: run tools/install.sh (installs the Debian packages of "
            "tools/apt-packages.txt), or apt-get install shellcheck"
        )
    scripts = shell_scripts()
    real_of = {lint: real for real, lint in scripts.items()}
    # Scripts run from their recipe directory: ./path.sh is beside a pipeline, one level up from
    # local/. -x follows what they source, so variables set there are known.
    result = _run(
        ["shellcheck", "-x", "-P", "SCRIPTDIR", "-P", "SCRIPTDIR/..", "-f", "json1"]
        + sorted(scripts.values())
    )
    findings = json.loads(result.stdout or '{"comments": []}')["comments"]
    if result.returncode not in (0, 1) or (result.returncode == 1 and not findings):
        pytest.fail("shellcheck failed:\n" + result.stdout + result.stderr)
    new, seen = [], set()
    for c in findings:
        real = real_of.get(c["file"], c["file"])
        seen.add((real, c["code"]))
        if (real, c["code"]) not in SHELLCHECK_ALLOWED:
            linted = "" if real == c["file"] else f" (linted as {c['file']})"
            new.append(
                f"{real}:{c['line']}:{c['column']}: SC{c['code']} ({c['level']}) "
                f"{c['message']}{linted}"
            )
    stale = sorted(SHELLCHECK_ALLOWED - seen)
    assert not new, "shellcheck findings:\n" + "\n".join(new)
    assert not stale, f"fixed, remove from SHELLCHECK_ALLOWED in {Path(__file__).name}: {stale}"
