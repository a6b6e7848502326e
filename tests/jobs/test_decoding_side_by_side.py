"""Every pipeline's decoding stage decodes its test sets side by side (utils/pipeline.sh for_each_set; in turn
with --parallel_stages false): each set into its own dir, from its own jobs, and a set that fails fails the
stage, naming it, while the other set's decoding ends. The recipe dirs and the stand-in decoder are those of
tests/jobs/test_gpu_inference.py; for_each_set itself (side by side, in turn) is tested in
tests/utils/test_pipeline_sh.py.
"""

from pathlib import Path

import pytest

from tests.jobs.test_gpu_inference import KEYS, PIPELINES, decoder_calls, make_recipe

# The second set has other keys (a hypothesis of the wrong set shows) and one utterance: one job where the first
# set has two, so a merge of the video score / the top-5 classes that read the other set's job count fails.
OTHER_KEYS = ["other1"]


def add_second_set(tmp_path: Path, pipeline: str) -> None:
    """The second test set's input (data/test2/image.scp, dump/.../test2/feats.scp...) beside the first's."""
    first = tmp_path / "recipe" / PIPELINES[pipeline][2][1]
    second = first.parent.parent / "test2" / first.name
    second.parent.mkdir(parents=True)
    second.write_text("".join(f"{k} x\n" for k in OTHER_KEYS))


def decoded(tmp_path: Path, pipeline: str, dset: str) -> Path:
    """The decoding dir of DSET (exp/<model>/<inference tag>/DSET)."""
    exp = (tmp_path / "recipe" / PIPELINES[pipeline][2][0]).parent
    (tag,) = [d for d in exp.iterdir() if d.is_dir()]
    return tag / dset


@pytest.mark.parametrize("parallel", ["true", "false"])
@pytest.mark.parametrize("pipeline", list(PIPELINES))
def test_each_test_set_is_decoded_by_its_own_jobs(tmp_path, pipeline, parallel):
    run = make_recipe(tmp_path, pipeline)
    add_second_set(tmp_path, pipeline)
    done = run("--test_sets", "test test2", "--parallel_stages", parallel)
    assert done.returncode == 0, done.stderr
    assert len(decoder_calls(tmp_path)) == 3  # two jobs of the first set, one of the second
    for dset, keys in (("test", KEYS), ("test2", OTHER_KEYS)):
        out = decoded(tmp_path, pipeline, dset)
        assert (out / "text").read_text() == "".join(f"{k} HYP\n" for k in keys)
        for merged in {"vsr": ["score"], "cls": ["topk"]}.get(pipeline, []):
            assert len((out / merged).read_text().splitlines()) == len(keys)


@pytest.mark.parametrize("pipeline", list(PIPELINES))
def test_a_failed_set_fails_the_stage_naming_it_after_the_other_set_ended(tmp_path, pipeline):
    run = make_recipe(tmp_path, pipeline)  # no input for test_missing: its decoding fails at once
    done = run("--test_sets", "test_missing test")
    assert done.returncode != 0
    assert "failed for the set(s): test_missing\n" in done.stderr
    assert (
        decoded(tmp_path, pipeline, "test") / "text"
    ).is_file()  # decoded to its end, not stopped
    assert not (decoded(tmp_path, pipeline, "test_missing") / "text").exists()
