"""The READMEs: every recipe has one, and every command a README shows in a shell code block exists.

Checked per command of a ```bash / ```sh block (README.md, docs/*.md, egs/<corpus>/<task>/README.md):
- `./run.sh --opt ...`: each option is one that run.sh, or the pipeline it hands options to, lists in its
  `--help` (utils/parse_options.sh; `--help` and `--config` are its own). A recipe README's commands run in
  its recipe dir; elsewhere a block says where with `cd egs/<corpus>/<task>`.
- `python -m MODULE`: the module imports (all of them in one fresh interpreter).
- every path-like argument (`conf/x.yaml`, `tests/bench/x.py`, `../asr1`, ...) exists, relative to the
  command's directory or the repository root; run outputs (data/, dump/, exp/), placeholders (<x>, {a,b},
  *, $VAR) and absolute paths (a user's corpora) are not checked.
"""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from espnet_ext.analysis.sweep import declared_options as sweep_declared_options

ROOT = Path(__file__).resolve().parent.parent
RECIPES = sorted(
    p.parent for p in ROOT.glob("egs/*/*/run.sh") if p.parent.parent.name != "TEMPLATE"
)
READMES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))] + [
    r / "README.md" for r in RECIPES
]
SHELL_LANGS = {"bash", "sh", "shell", "console"}
OUTPUT_DIRS = ("data/", "dump/", "exp/", "downloads/")
PARSE_OPTIONS_OWN = {"help", "config"}
PYTHONS = {"python", "python3", "tools/venv/bin/python"}


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def code_blocks(text: str) -> list[tuple[int, str]]:
    """(first line number, body) of each shell code block."""
    blocks, lang, start, body = [], None, 0, []
    for number, line in enumerate(text.split("\n"), 1):
        fence = re.match(r"\s*```(\w*)", line)
        if fence and lang is None:
            lang, start, body = fence.group(1), number + 1, []
        elif fence:
            if lang in SHELL_LANGS:
                blocks.append((start, "\n".join(body)))
            lang = None
        elif lang is not None:
            body.append(line)
    return blocks


def commands(block: str) -> list[tuple[int, list[str]]]:
    """Simple commands of a block (line offset, words): continuation lines joined, comments dropped, split at
    && || ; | ( ), with the commands inside $(...) as commands of their own."""
    out = []
    lines = block.replace("\\\n", " ").split("\n")
    for offset, line in enumerate(lines):
        inner = re.findall(r"\$\(([^()]*)\)", line)
        line = re.sub(r"\$\([^()]*\)", "SUBST", line)
        for text in [line, *inner]:
            lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            words: list[str] = []
            for word in lexer:
                if word and set(word) <= set("&|;()"):
                    if words:
                        out.append((offset, words))
                    words = []
                    # A subshell's cd ends with it: its parentheses are kept as commands of their own.
                    out += [(offset, [c]) for c in word if c in "()"]
                else:
                    words.append(word)
            if words:
                out.append((offset, words))
    return out


def declared_options(recipe: Path) -> set[str]:
    """Option names the recipe's run.sh accepts, as the scripts themselves list them in their --help (run.sh's,
    and that of the pipeline it hands every other option to). Asking the scripts, not reading them: an
    option some other script of the recipe declares is still refused by the one the command reaches."""
    return PARSE_OPTIONS_OWN | sweep_declared_options(["./run.sh"], recipe / "run.sh", cwd=recipe)


def is_checked_path(word: str) -> bool:
    if "/" not in word or word.startswith(("/", "http", "-", "~")) or " " in word:
        return False
    if any(c in word for c in "<>{}*$[]|…") or "..." in word.replace("../", ""):
        return False
    return not word.lstrip("./").startswith(OUTPUT_DIRS)


def check_block(where: Path, cwd: Path, block: str, line: int, modules: dict) -> list[str]:
    problems, outer = [], []
    for offset, words in commands(block):
        at = f"{rel(where)}:{line + offset}"
        if words == ["("]:
            outer.append(cwd)
            continue
        if words == [")"]:
            cwd = outer.pop() if outer else cwd
            continue
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):  # VAR=value prefixes
            value = words.pop(0).split("=", 1)[1].replace("$PWD", str(cwd))
            if is_checked_path(value) and not (cwd / value).exists():
                problems.append(f"{at}: no such path {value}")
        if not words:
            continue
        if words[0] == "cd" and len(words) > 1:
            target = cwd / words[1] if (cwd / words[1]).is_dir() else ROOT / words[1]
            if not target.is_dir():
                problems.append(f"{at}: cd {words[1]}: no such directory")
            else:
                cwd = target.resolve()
            continue
        if words[0] in PYTHONS and len(words) > 2 and words[1] == "-m":
            modules.setdefault(words[2], at)
        if words[0] == "./run.sh":
            if not (cwd / "run.sh").exists():
                problems.append(
                    f"{at}: ./run.sh run in {rel(cwd)}, which has none (cd egs/<corpus>/<task>)"
                )
            else:
                known = declared_options(cwd)
                for word in words[1:]:
                    name = word.lstrip("[")
                    # A quoted value such as "--download true" belongs to the option before it.
                    if " " in name or not name.startswith("--"):
                        continue
                    if name[2:].split("=")[0] not in known:
                        problems.append(
                            f"{at}: {rel(cwd)}/run.sh and its scripts declare no {name}"
                        )
        for word in words[1:] if words[0] == "./run.sh" else words:
            path = word.strip("[]\"'")
            if path.startswith("--"):
                path = path.split("=", 1)[1] if "=" in path else ""
            if is_checked_path(path) and not ((cwd / path).exists() or (ROOT / path).exists()):
                problems.append(f"{at}: no such path {path}")
    return problems


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_recipe_has_a_readme(recipe):
    assert (recipe / "README.md").is_file(), f"{rel(recipe)}/README.md is missing"


def test_top_readme_is_an_index_with_the_ci_command():
    text = (ROOT / "README.md").read_text()
    assert len(text.split("\n")) <= 200, (
        "README.md is an index: at most 200 lines (details go to docs/)"
    )
    ci = (ROOT / ".ci" / "run").read_text()
    command = "tools/venv/bin/python -m pytest -q -n 2 --dist loadgroup tests"
    assert command in ci and command in text, "README.md shows the test command .ci/run runs"
    for recipe in RECIPES:
        assert f"egs/{recipe.parent.name}/{recipe.name}" in text, (
            f"README.md does not list {rel(recipe)}"
        )


def test_commands_in_readmes_exist():
    problems, modules = [], {}
    for readme in READMES:
        if not readme.exists():
            continue
        cwd = readme.parent if readme.parent in RECIPES else ROOT
        for line, block in code_blocks(readme.read_text()):
            problems += check_block(readme, cwd, block, line, modules)
    assert modules, "no python -m command found: the parser is broken"
    script = (
        "import importlib, sys\n"
        "for name, at in " + repr(sorted(modules.items())) + ":\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as e:\n"
        "        print(f'{at}: python -m {name}: {type(e).__name__}: {e}')\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True)
    problems += [line for line in out.stdout.splitlines() if line.strip()]
    assert out.returncode == 0, out.stderr
    assert not problems, "README commands that do not exist:\n" + "\n".join(problems)


def test_the_checks_catch_what_does_not_exist():
    recipe = ROOT / "egs" / "librispeech" / "asr1"
    modules: dict = {}
    block = (
        "./run.sh --no_such_option 1 --stage 2\n"
        "python -m espnet_ext.analysis.sweep run --spec conf/sweeps/no_such.yaml\n"
        "(cd ../../../egs/mustc/asr1 && ./run.sh --asr_config conf/train_asr.yaml)\n"
        "./run.sh --lm_config conf/train_lm_rnn.yaml\n"
        "cd ../../no_such_corpus/asr1\n"
    )
    problems = check_block(recipe / "README.md", recipe, block, 1, modules)
    assert any("--no_such_option" in p for p in problems)
    assert not any("--stage" in p for p in problems)
    assert any("conf/sweeps/no_such.yaml" in p for p in problems)
    assert any("no_such_corpus" in p for p in problems)
    # mustc/asr1 has conf/train_asr.yaml and no conf/train_lm_rnn.yaml: the subshell's cd ended with it.
    assert not any("train_asr.yaml" in p or "train_lm_rnn.yaml" in p for p in problems), problems
    assert modules == {"espnet_ext.analysis.sweep": f"{rel(recipe)}/README.md:2"}
