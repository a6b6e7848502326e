"""A throw-away copy of a recipe dir (links to the real template, utils and configs) for end-to-end tests."""

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parents[2]


def make_recipe_copy(corpus: str, task: str, dest: Path) -> Path:
    """dest/egs/<corpus>/<task>: symlinks resolved to the repository, run.sh/local/conf copied."""
    src = ROOT / "egs" / corpus / task
    recipe = dest / "egs" / corpus / task
    recipe.mkdir(parents=True)
    for entry in src.iterdir():
        if entry.name in ("data", "dump", "exp", "RESULTS.md"):
            continue
        target = recipe / entry.name
        if entry.is_symlink():
            target.symlink_to(entry.resolve())
        elif entry.is_dir():
            shutil.copytree(entry, target, symlinks=True)
            for link in target.rglob("*"):
                if link.is_symlink():
                    resolved = (entry / link.relative_to(target)).resolve()
                    link.unlink()
                    link.symlink_to(resolved)
        else:
            shutil.copy2(entry, target)
    return recipe


def run(recipe: Path, args: List[str], env: Optional[Dict[str, str]] = None, timeout: int = 900):
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        ["./run.sh", *args], cwd=recipe, env=full_env, capture_output=True, text=True, timeout=timeout
    )


def run_until(recipe: Path, args: List[str], path: Path, timeout: int = 600) -> subprocess.Popen:
    """Start run.sh and kill its whole process group as soon as ``path`` exists (an interrupted job)."""
    proc = subprocess.Popen(
        ["./run.sh", *args], cwd=recipe, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    deadline = time.time() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"run.sh ended before {path} appeared:\n{proc.stdout.read().decode()[-3000:]}")
        if time.time() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"{path} did not appear in {timeout} s")
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return proc
