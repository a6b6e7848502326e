"""tools/upstream/: every patch is listed in its README and applies cleanly to the ESPnet installed here
(the version our subclasses are written for), so the change we propose upstream is the one we would drop
our workaround for."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import espnet2
import pytest

UPSTREAM = Path(__file__).resolve().parents[2] / "tools" / "upstream"
PATCHES = sorted(UPSTREAM.glob("*.patch"))
SITE_PACKAGES = Path(espnet2.__file__).resolve().parents[1]


def test_every_patch_is_in_the_readme_table():
    listed = set(
        re.findall(r"^\| `([\w.-]+\.patch)` \|", (UPSTREAM / "README.md").read_text(), re.M)
    )
    assert listed == {p.name for p in PATCHES}


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.name)
def test_patch_applies_to_the_installed_espnet(patch):
    result = subprocess.run(
        ["patch", "-p1", "--dry-run", "--batch", "-d", str(SITE_PACKAGES), "-i", str(patch)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAILED" not in result.stdout and "fuzz" not in result.stdout, result.stdout
