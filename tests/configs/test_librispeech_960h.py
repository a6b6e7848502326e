"""./run.sh --config conf/train_960h.conf selects the 960 h setting: data, training config, results title.

Runs stage 1 (data preparation and validation) of the recipe on a corpus laid out as the release, each
part a renamed copy of the fixture's reader 1272, so data/train_960 must hold the three training parts.
"""

import os
import shutil
import subprocess
from pathlib import Path

from tests.recipes.recipe_fixture import ROOT, make_recipe_copy

FIXTURE = ROOT / "tests" / "fixtures" / "librispeech" / "LibriSpeech"
PARTS = {  # part -> reader id of its copy
    "train-clean-100": "9100",
    "train-clean-360": "9360",
    "train-other-500": "9500",
    "dev-clean": "1272",
    "dev-other": "9201",
    "test-clean": "9301",
    "test-other": "9401",
}


def make_corpus(dest: Path) -> Path:
    corpus = dest / "LibriSpeech"
    source = FIXTURE / "dev-clean" / "1272"
    speakers = [(FIXTURE / "SPEAKERS.TXT").read_text()]
    for part, reader in PARTS.items():
        for path in source.rglob("*"):
            if path.is_file():
                target = corpus / part / reader / path.relative_to(source)
                target = target.with_name(path.name.replace("1272-", f"{reader}-"))
                target.parent.mkdir(parents=True, exist_ok=True)
                if path.suffix == ".txt":
                    target.write_text(path.read_text().replace("1272-", f"{reader}-"))
                else:
                    shutil.copy(path, target)
        speakers.append(f"{reader} | M | {part} | 1.00 | Reader {reader}\n")
    (corpus / "SPEAKERS.TXT").write_text("".join(speakers))
    return dest


def ids(path: Path) -> set:
    return {line.split()[0] for line in path.read_text().splitlines()}


def test_one_option_prepares_and_selects_960h(tmp_path):
    recipe = make_recipe_copy("librispeech", "asr1", tmp_path / "recipe")
    env = {**os.environ, "LIBRISPEECH": str(make_corpus(tmp_path / "corpus")), "LIBRISPEECH_LM": ""}
    cmd = ["./run.sh", "--config", "conf/train_960h.conf"]
    shown = subprocess.run([*cmd, "--help"], cwd=recipe, env=env, capture_output=True, text=True)
    assert "--train_set train_960" in shown.stdout
    assert "--asr_config conf/train_asr_base.yaml" in shown.stdout
    done = subprocess.run(
        [*cmd, "--stage", "1", "--stop_stage", "1", "--nj", "1"],
        cwd=recipe,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = recipe / "data"
    train = ids(data / "train_960" / "text")
    parts = [
        ids(data / p / "text") for p in ("train_clean_100", "train_clean_360", "train_other_500")
    ]
    assert train == set.union(*parts) and all(parts) and len(train) == sum(map(len, parts))
    assert {u.split("-")[0] for u in train} == {"9100", "9360", "9500"}
