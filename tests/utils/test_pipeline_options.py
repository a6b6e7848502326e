"""utils/pipeline_options.sh: the options the egs/TEMPLATE pipelines share, declared once, each pipeline taking
the groups it names (and no other), with its own defaults where they differ."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "egs" / "TEMPLATE"
PIPELINES = {  # pipeline -> its script
    name: TEMPLATE / f"{name}1" / f"{name}.sh" for name in ("asr", "mt", "st", "cls", "ocr", "lm")
}
SOURCE = re.compile(r"^\. utils/pipeline_options\.sh([a-z_ ]*)", re.M)


def groups(script: Path) -> list[str]:
    found = SOURCE.findall(script.read_text())
    assert len(found) == 1, f"{script}: sources utils/pipeline_options.sh once"
    return found[0].split()


def shared_options(*group: str) -> list[str]:
    """The variables utils/pipeline_options.sh GROUP... declares."""
    listing = "set -o posix; set | sed -n 's/^\\([a-z][a-z0-9_]*\\)=.*/\\1/p'"
    out = subprocess.run(
        [
            "bash",
            "-c",
            f'{listing}; echo --; . utils/pipeline_options.sh "$@"; {listing}',
            "x",
            *group,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    before, after = out.stdout.split("--\n")
    return sorted(set(after.split()) - set(before.split()))


def own_options(script: Path) -> list[str]:
    """The options a pipeline declares itself: assignments before it sources ./path.sh."""
    head = script.read_text().split("\n. ./path.sh\n")[0]
    return re.findall(r"^([a-z][a-z0-9_]*)=", head, re.M)


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_every_option_is_declared_once(name):
    script = PIPELINES[name]
    shared, own = shared_options(*groups(script)), own_options(script)
    assert "stage" in shared and "smoke" in shared
    assert not set(shared) & set(own), f"{script}: declared again: {sorted(set(shared) & set(own))}"
    assert len(own) == len(set(own)), f"{script}: an option declared twice"


def test_an_unknown_group_is_refused_naming_it():
    out = subprocess.run(
        ["bash", "-c", ". utils/pipeline_options.sh sequence speach"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1 and "no option group 'speach'" in out.stderr


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    """A recipe dir linked to the pipelines, as egs/TEMPLATE/setup.sh lays one out."""
    recipe = tmp_path_factory.mktemp("recipe")
    for name, script in PIPELINES.items():
        (recipe / f"{name}.sh").symlink_to(script)
    for name in ("path.sh", "cmd.sh", "db.sh"):
        (recipe / name).symlink_to(TEMPLATE / "asr1" / name)
    (recipe / "utils").symlink_to(ROOT / "utils")
    return recipe


def run(recipe, name, *args):
    return subprocess.run(
        [f"./{name}.sh", *args], cwd=recipe, capture_output=True, text=True, timeout=60
    )


def help_values(recipe, name) -> dict[str, str]:
    out = run(recipe, name, "--help")
    assert out.returncode == 0, out.stderr
    return dict(re.findall(r"^  --([a-z0-9_]+) (.*)$", out.stdout, re.M))


# pipeline -> defaults its --help must show (its own where the pipelines differ), options it must not take
DEFAULTS = {
    "asr": ({"valid_set": "dev", "inference_model": "valid.acc.ave.pth", "fbank_conf": "''",
             "use_lm": "false", "attention_variant": "baseline"}, ["inference_batch_size", "src_nbpe"]),
    "mt": ({"valid_set": "valid", "inference_tag": "''", "tgt_nbpe": "100", "use_lm": "false",
            "dumpdir": "dump"}, ["inference_batch_size", "fbank_conf"]),
    "st": ({"valid_set": "dev", "src_lang": "en", "max_frames": "3000", "bleu_opts": "''"},
           ["use_lm", "attention_variant", "inference_batch_size"]),
    "cls": ({"valid_set": "valid", "inference_tag": "decode", "inference_model": "valid.acc.best.pth",
             "inference_batch_size": "1", "results_notes": "''"}, ["dumpdir", "task_ids", "use_lm"]),
    "ocr": ({"valid_set": "dev", "inference_model": "valid.acc.best.pth", "num_plots": "8"},
            ["dumpdir", "bleu_opts"]),
    "lm": ({"stage": "1", "nj": "2", "smoke": "false", "token_type": "bpe"},
           ["test_sets", "inference_nj", "results_md"]),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_help_lists_the_shared_options_with_the_pipelines_defaults(recipe, name):
    values = help_values(recipe, name)
    want, absent = DEFAULTS[name]
    assert {k: values.get(k) for k in want} == want
    for option in (
        "stage",
        "stop_stage",
        "nj",
        "ngpu",
        "num_nodes",
        "train_num_threads",
        "cmd_backend",
    ):
        assert option in values, f"{name}.sh --help lacks --{option}"
    for option in absent:
        assert option not in values
    refused = run(recipe, name, f"--{absent[0]}", "1")
    assert refused.returncode != 0 and f"unknown option --{absent[0]}" in refused.stderr
