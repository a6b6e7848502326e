"""Recipe runs shared by several test modules: each recipe is prepared and trained once per session.

Modules that branch from a shared run (other tags, stages, backends) must leave its outputs as they
found them. The suite runs on two pytest-xdist workers with ``--dist loadgroup`` (tests/xdist_groups.py): a
module's tests stay on one worker, so its module-scoped run is made once, and the modules that use one of
the session runs below declare one xdist group named after it, so the run is made once.
"""

import os
import subprocess

import pytest
from recipe_fixture import (
    CIFAR100_TINY_ARGS,
    MTEDX_ASR_ARGS,
    MTEDX_TINY_ASR,
    MTEDX_TINY_DECODE,
    MUSTC_ASR_ARGS,
    MUSTC_SHARED_ARGS,
    MUSTC_TINY_ASR,
    MUSTC_TINY_DECODE,
    TINY_ARGS,
    TINY_SWIN,
    make_recipe_copy,
    run,
    tiny_librispeech_recipe,
)
from slurm_fixtures import slurm_cluster  # noqa: F401
from wmt_fixture import LEGO_ARGS, tiny_wmt_recipe


@pytest.fixture(scope="session")
def librispeech_finished(tmp_path_factory):
    """The tiny librispeech recipe after all stages (local backend): (recipe dir, its run)."""
    recipe = tiny_librispeech_recipe(tmp_path_factory.mktemp("librispeech"))
    out = run(recipe, TINY_ARGS)
    assert out.returncode == 0, out.stderr[-4000:]
    return recipe, out


@pytest.fixture(scope="session")
def wmt_lego_deen(tmp_path_factory):
    """The tiny egs/wmt/mt1 after --mode lego_deen (the De-En LegoNN model, its modules exported): the
    recipe dir. test_wmt_lego_recipe.py runs the other LegoNN modes in it, egs/europarl/asr1 takes the decoder."""
    recipe = tiny_wmt_recipe(tmp_path_factory.mktemp("wmt"))
    out = run(recipe, ["--mode", "lego_deen", *LEGO_ARGS], env={"WMT": ""})
    assert out.returncode == 0, out.stderr[-4000:]
    return recipe


@pytest.fixture(scope="session")
def mustc_asr_finished(tmp_path_factory):
    """egs/mustc/asr1 after all stages on tiny mini talks, with egs/mustc/st1 beside it (not run)."""
    dest = tmp_path_factory.mktemp("mustc")
    asr = make_recipe_copy("mustc", "asr1", dest)
    make_recipe_copy("mustc", "st1", dest)
    (asr / "conf" / "tiny_asr.yaml").write_text(MUSTC_TINY_ASR)
    (asr / "conf" / "tiny_decode.yaml").write_text(MUSTC_TINY_DECODE)
    out = run(asr, MUSTC_ASR_ARGS + MUSTC_SHARED_ARGS, env={"MUSTC": ""})
    assert out.returncode == 0, out.stderr[-4000:]
    return asr, out


@pytest.fixture(scope="session")
def mtedx_asr_finished(tmp_path_factory):
    """egs/mtedx/asr1 after all stages on a tiny es/it mini corpus (group head selection), with
    egs/mtedx/st1 beside it (not run): the recipe dir."""
    dest = tmp_path_factory.mktemp("mtedx")
    recipe = make_recipe_copy("mtedx", "asr1", dest)
    make_recipe_copy("mtedx", "st1", dest)
    (recipe / "conf" / "tiny_asr.yaml").write_text(MTEDX_TINY_ASR)
    (recipe / "conf" / "tiny_decode.yaml").write_text(MTEDX_TINY_DECODE)
    out = run(recipe, MTEDX_ASR_ARGS, env={"MTEDX": ""})
    assert out.returncode == 0, out.stderr[-4000:]
    return recipe


@pytest.fixture(scope="session")
def cifar100_finished(tmp_path_factory):
    """egs/cifar100/cls1 on the mini corpus with a tiny Swin: the baseline through all stages, then the
    relaxed (+ drloc) and fuzzy variants trained and evaluated side by side (two processes, like two
    Slurm jobs of a sweep), then RESULTS.md over all three. (recipe dir, {variant: completed run})."""
    recipe = make_recipe_copy("cifar100", "cls1", tmp_path_factory.mktemp("cifar100"))
    (recipe / "conf" / "tiny_swin.yaml").write_text(TINY_SWIN)
    env = {"CIFAR100": ""}
    runs = {"baseline": run(recipe, CIFAR100_TINY_ARGS + ["--stop_stage", "6"], env=env)}
    assert runs["baseline"].returncode == 0, runs["baseline"].stderr[-4000:]
    variants = {
        "relaxed_drloc": ["--variant", "relaxed_drloc", "--matched_inference", "true"],
        "fuzzy": ["--variant", "fuzzy", "--matched_inference", "true"],
    }
    procs = {
        name: subprocess.Popen(
            ["./run.sh", *CIFAR100_TINY_ARGS, "--stage", "4", "--stop_stage", "6", *args],
            cwd=recipe,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, args in variants.items()
    }
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=600)
        runs[name] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
        assert proc.returncode == 0, stderr[-4000:]
    runs["results"] = run(recipe, CIFAR100_TINY_ARGS + ["--stage", "7"], env=env)
    assert runs["results"].returncode == 0, runs["results"].stderr[-4000:]
    return recipe, runs
