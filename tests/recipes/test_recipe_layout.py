"""Every recipe is a thin dir of links into egs/TEMPLATE and utils/, as egs/TEMPLATE/setup.sh makes them."""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted(
    p.parent for p in ROOT.glob("egs/*/*1/run.sh") if p.parent.parent.name != "TEMPLATE"
)


def links(recipe: Path) -> dict:
    return {
        str(p.relative_to(recipe)): os.readlink(p)
        for p in sorted(recipe.rglob("*"))
        if p.is_symlink()
        and p.parent.name != "utils"
        and p.relative_to(recipe).parts[0]
        not in ("data", "dump", "exp")  # outputs of a run, not the recipe
    }


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_recipe_links_resolve_into_the_template(recipe):
    for name, target in links(recipe).items():
        resolved = (recipe / name).resolve()
        assert resolved.exists(), f"{recipe}/{name} -> {target} is broken"
        assert ROOT in resolved.parents
    assert (recipe / "utils").resolve() == ROOT / "utils"
    assert os.access(recipe / "run.sh", os.X_OK) and os.access(
        recipe / "local" / "data.sh", os.X_OK
    )


def test_setup_makes_the_same_links_as_the_existing_recipes(tmp_path):
    (tmp_path / "egs").mkdir()
    (tmp_path / "egs" / "TEMPLATE").symlink_to(ROOT / "egs" / "TEMPLATE")
    (tmp_path / "utils").symlink_to(ROOT / "utils")
    new = tmp_path / "egs" / "newcorpus" / "asr1"
    out = subprocess.run(
        [str(ROOT / "egs" / "TEMPLATE" / "setup.sh"), str(new)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert links(new) == links(ROOT / "egs" / "librispeech" / "asr1")
    for name in links(new):
        assert (new / name).resolve().exists(), name
    again = subprocess.run(
        [str(ROOT / "egs" / "TEMPLATE" / "setup.sh"), str(new)], capture_output=True, text=True
    )
    assert again.returncode != 0 and "already exists" in again.stderr


def test_setup_of_an_mt_recipe_links_the_mt_pipeline(tmp_path):
    (tmp_path / "egs").mkdir()
    (tmp_path / "egs" / "TEMPLATE").symlink_to(ROOT / "egs" / "TEMPLATE")
    (tmp_path / "utils").symlink_to(ROOT / "utils")
    new = tmp_path / "egs" / "newcorpus" / "mt1"
    out = subprocess.run(
        [str(ROOT / "egs" / "TEMPLATE" / "setup.sh"), str(new)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert links(new) == links(ROOT / "egs" / "iwslt14" / "mt1")
    assert (
        os.readlink(new / "mt.sh") == "../../TEMPLATE/mt1/mt.sh"
        and (new / "mt.sh").resolve().exists()
    )
