"""egs/lrs3/vsr1's real mode (LRS3 set) end to end as a smoke run (--smoke true, README "Smoke runs") on the
release-layout fixture with its mouth crops (--roi): the 30 h setup (base model, trainval), then the default
433 h setup with self-training on pseudo-labelled VoxCeleb2-en (large model, stages 13-16)."""

import json

import pytest
import yaml
from real_fixtures import LRS3_FIXTURE, voxceleb2_mouth_crops
from recipe_fixture import make_recipe_copy, read_table, run

# A tiny corpus forces: one job per stage, 1 dev video (of 3 trainval ones), clips of 8 frames kept.
SMOKE = [
    "--smoke",
    "true",
    "--nj",
    "1",
    "--inference_nj",
    "1",
    "--train_num_threads",
    "1",
    "--min_frames",
    "1",
]
DATA = f"--roi {LRS3_FIXTURE / 'roi'} --dev_size 1"


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory):
    dest = tmp_path_factory.mktemp("lrs3_real")
    recipe = make_recipe_copy("lrs3", "vsr1", dest)
    env = {"LRS3": str(LRS3_FIXTURE / "lrs3")}
    vox = voxceleb2_mouth_crops(dest / "voxceleb2_en")
    runs = {
        "30h": run(recipe, [*SMOKE, "--setup", "30h", "--local_data_opts", DATA], env=env),
        "433h_self": run(
            recipe,
            # the setup's stage 13 decodes on GPUs (run.sh); the caller's option wins
            [
                *SMOKE,
                "--pseudo_label_gpu",
                "false",
                "--local_data_opts",
                f"{DATA} --voxceleb2_dir {vox}",
            ],
            env=env,
        ),
    }
    return recipe, runs


@pytest.mark.parametrize(
    "setup, exp, train_set",
    [
        ("30h", "vsr_train_vsr_base", "trainval_nodev"),
        ("433h_self", "vsr_train_vsr_large", "pretrain_trainval"),
    ],
)
def test_setup_trains_decodes_and_scores(real_runs, setup, exp, train_set):
    recipe, runs = real_runs
    assert runs[setup].returncode == 0, runs[setup].stderr[-4000:]
    config = yaml.safe_load((recipe / "exp" / exp / "config.yaml").read_text())
    assert config["num_iters_per_epoch"] == 1
    assert any(
        f"/{train_set}_filtered/" in str(e) for e in config["train_data_path_and_name_and_type"]
    )
    decodes = [p for p in (recipe / "exp" / exp).glob("decode_*") if p.is_dir()]
    assert len(decodes) == 1
    # the real setups crop in 32 jobs (run.sh), however few clips the fixture has
    assert len(list((recipe / "data" / "log").glob("lrs3_rois.all.*.log"))) == 32
    for dset in ("dev", "test"):
        refs = read_table(recipe / "data" / dset / "text")
        hyps = (decodes[0] / dset / "text").read_text().splitlines()
        assert [line.split(" ", 1)[0] for line in hyps] == sorted(refs)
        assert json.loads((decodes[0] / dset / "score_wer" / "result.json").read_text())["wer"] >= 0


def test_self_training_trains_on_the_pseudo_labelled_voxceleb2(real_runs):
    recipe, runs = real_runs
    assert runs["433h_self"].returncode == 0, runs["433h_self"].stderr[-4000:]
    exp = recipe / "exp" / "vsr_train_vsr_large_self_training"
    assert (exp / "valid.acc.ave.pth").exists() or any(exp.glob("last*.pth"))
    # stage 14 on AV-HuBERT's self-training schedule, the labelling model (stage 9) on the 433 h one
    schedules = {
        name: yaml.safe_load((recipe / "exp" / name / "config.yaml").read_text())["scheduler_conf"]
        for name in ("vsr_train_vsr_large", "vsr_train_vsr_large_self_training")
    }
    assert schedules["vsr_train_vsr_large"]["max_steps"] == 30000
    assert schedules["vsr_train_vsr_large_self_training"]["max_steps"] == 100000
    assert "vsr_train_vsr_large_self_training" in (recipe / "exp" / "RESULTS.md").read_text()
