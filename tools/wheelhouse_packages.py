#!/usr/bin/env python
"""The packages of a GPU node's wheelhouse (tools/wheelhouse.sh): what training and inference import, beyond
PyTorch, pinned as tools/requirements.txt pins them.

    tools/venv/bin/python tools/wheelhouse_packages.py [--skip FILE]  -> one "name==version" line per package
    NODE_PYTHON tools/wheelhouse_packages.py --missing REQUIREMENTS    -> the lines NODE_PYTHON lacks

--skip FILE leaves out the distributions a node already has (FILE: one name per line, or ``pip freeze`` /
``pip list --format freeze`` output of the node), so the wheelhouse holds only what it lacks. --missing, run
with the node's Python, prints the requirements whose distribution it has no version of (gpu_check.sh installs
those; a node's own numpy, scipy, ... are kept rather than replaced by this project's pins).

Found by importing, in this environment: every module of espnet_ext (the training and inference entry points,
the tasks, models, decoders, the preflight and timing tools), the scorers of utils/ and what those modules
import only inside functions (LAZY), plus pytest for ``pytest -m gpu``; each imported module is mapped to
the distribution that installed it. Left out: torch and everything torch itself requires (a node with PyTorch
has them: CUDA libraries, triton, sympy, ...), and this project (gpu_check.sh puts the checkout on the path).
``wheel`` is added so that a package published only as a source archive builds offline.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata as metadata
import os
import pkgutil
import re
import sys
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
# Third-party modules espnet_ext, utils/ and tests/bench import inside functions (a module-level import
# of every espnet_ext module does not reach them).
LAZY = (
    "av",
    "cv2",
    "g2p_en",
    "jiwer",
    "kaldiio",
    "lmdb",
    "matplotlib.pyplot",
    "nltk",
    "PIL.Image",
    "sacrebleu",
    "sacremoses",
    "scipy.signal",
    "sentencepiece",
    "soundfile",
    "timm",
    "torchaudio",
    "typeguard",
    "yaml",
)
EXTRA = ("pytest", "wheel")  # the GPU tests' runner; building a source archive offline


def normalized(name: str) -> str:
    """PEP 503 name: case and runs of -_. do not matter."""
    return re.sub(r"[-_.]+", "-", name).lower()


def import_everything() -> None:
    """Imports the modules; what they print goes to stderr (stdout is the package list)."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("NLTK_DATA", str(ROOT / "tools" / "nltk_data"))  # offline, as activate.sh
    with contextlib.redirect_stdout(sys.stderr):
        import espnet_ext

        for module in pkgutil.walk_packages(espnet_ext.__path__, "espnet_ext."):
            importlib.import_module(module.name)
        for module in LAZY:
            importlib.import_module(module)


def imported_distributions() -> set[str]:
    """Normalized names of the distributions whose modules are imported now."""
    owners = metadata.packages_distributions()
    found = set()
    for name in list(sys.modules):
        for dist in owners.get(name.partition(".")[0], []):
            found.add(normalized(dist))
    return found


def requirement_closure(name: str) -> set[str]:
    """``name`` and everything it requires on this platform (extras left out), recursively."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = normalized(todo.pop())
        if current in seen:
            continue
        seen.add(current)
        try:
            requires = metadata.requires(current) or []
        except metadata.PackageNotFoundError:
            continue
        for text in requires:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def pins(path: Path) -> dict[str, str]:
    """Normalized name -> "name==version" of a requirements file."""
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            found[normalized(line.split("==", 1)[0])] = line
    return found


def wheelhouse_packages() -> list[str]:
    import_everything()
    wanted = (imported_distributions() | {normalized(n) for n in EXTRA}) - requirement_closure(
        "torch"
    )
    wanted.discard("espnet-ext")
    pinned = pins(ROOT / "tools" / "requirements.txt")
    missing = sorted(wanted - set(pinned))
    if missing:
        raise SystemExit(
            f"tools/requirements.txt pins no version of {', '.join(missing)}: add them there first"
        )
    return sorted(pinned[name] for name in wanted)


def names_in(path: Path) -> set[str]:
    """Normalized distribution names of a list of names or of ``pip freeze`` output."""
    found = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            found.add(normalized(re.split(r"[=<>!~ @;\[]", line, maxsplit=1)[0]))
    return found


def installed(name: str) -> bool:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def missing_requirements(path: Path) -> list[str]:
    """The pinned lines of ``path`` whose distribution this Python has no version of."""
    return [line for name, line in sorted(pins(path).items()) if not installed(name)]


def main(argv: list[str]) -> None:
    if argv[:1] == ["--missing"] and len(argv) == 2:
        lines = missing_requirements(Path(argv[1]))
    elif argv[:1] == ["--skip"] and len(argv) == 2:
        skip = names_in(Path(argv[1]))
        lines = [p for p in wheelhouse_packages() if normalized(p.split("==")[0]) not in skip]
    elif not argv:
        lines = wheelhouse_packages()
    else:
        raise SystemExit(f"usage: {sys.argv[0]} [--skip FILE | --missing REQUIREMENTS]")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
