"""egs/lrs3/vsr1 with LRS3 set (db.sh): local/data.sh on the release-layout fixture (tests/fixtures/lrs3),
and the options refused before any video is read."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from recipe_fixture import make_recipe_copy, read_table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lrs3_fixtures import FIXTURE  # noqa: E402

MEAN_FACE = str(FIXTURE / "mean_face.npy")


@pytest.fixture()
def recipe(tmp_path):
    return make_recipe_copy("lrs3", "vsr1", tmp_path)


def data_sh(recipe: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["local/data.sh", "--nj", "1", *options],
        cwd=recipe,
        env={**os.environ, "LRS3": str(FIXTURE / "lrs3"), "LIBRISPEECH_LM": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_landmarks_with_their_mean_face_and_the_fps_policy_reach_the_reader(recipe):
    out = data_sh(recipe, "--landmarks", str(FIXTURE / "landmarks"), "--mean_face", MEAN_FACE,
                  "--fps_policy", "resample", "--dev_size", "1")  # fmt: skip
    assert out.returncode == 0, out.stderr
    # dev: the first speaker (C order) of trainval, whole; the rest trains
    assert list(read_table(recipe / "data/dev/utt2spk").values()) == ["Zq0kLm4Pw1E"]
    assert sorted(read_table(recipe / "data/trainval_nodev/utt2spk")) == [
        "aB3-x_Yz09Q-00001",
        "aB3-x_Yz09Q-00002",
    ]
    assert len(read_table(recipe / "data/pretrain_trainval/text")) == 3


def test_avhubert_dev_list_is_the_dev_set_and_the_rest_trains(recipe, tmp_path):
    """--valid_ids: AV-HuBERT's lrs3-valid.id picks dev videos, not whole speakers (its lrs3_manifest.py)."""
    ids = tmp_path / "lrs3-valid.id"
    ids.write_text("trainval/aB3-x_Yz09Q/00002\n")
    out = data_sh(recipe, "--roi", str(FIXTURE / "roi"), "--valid_ids", str(ids))
    assert out.returncode == 0, out.stderr
    assert sorted(read_table(recipe / "data/dev/text")) == ["aB3-x_Yz09Q-00002"]
    assert sorted(read_table(recipe / "data/trainval_nodev/text")) == [
        "Zq0kLm4Pw1E-00001",
        "aB3-x_Yz09Q-00001",
    ]
    assert not (recipe / "data/trainval_valid_ids").exists()


def test_roi_size_96_reaches_the_reader(recipe):
    out = data_sh(recipe, "--landmarks", str(FIXTURE / "landmarks"), "--mean_face", MEAN_FACE,
                  "--roi_size", "96", "--dev_size", "1")  # fmt: skip
    assert out.returncode == 0, out.stderr
    for path in read_table(recipe / "data/dev/video.scp").values():
        assert np.load(path).shape[1:] == (96, 96)


@pytest.mark.parametrize(
    "options,message",
    [
        ([], "give the mouth crops' source, --landmarks DIR --mean_face NPY or --roi DIR"),
        (["--landmarks", str(FIXTURE / "landmarks")], "--landmarks needs --mean_face"),
        (["--roi", str(FIXTURE / "roi"), "--dev_size", "3"],
         "--dev_size 3: .*/trainval has 3 videos, and training needs some of them"),
        (["--roi", str(FIXTURE / "roi"), "--voxceleb2_dir", "/nonexistent/vox"],
         "--voxceleb2_dir /nonexistent/vox: no video.scp"),
        (["--roi", str(FIXTURE / "roi"), "--valid_ids", "/nonexistent/lrs3-valid.id"],
         "--valid_ids /nonexistent/lrs3-valid.id: no such file"),
        (["--roi", str(FIXTURE / "roi"), "--nj", "0"], "--nj must be a positive number of jobs"),
    ],
)  # fmt: skip
def test_options_refused_before_any_video_is_read(recipe, options, message):
    out = data_sh(recipe, *options)
    assert out.returncode != 0
    assert re.search(message, out.stderr), out.stderr
    assert not (recipe / "data").exists()  # nothing read, nothing written


def test_mouth_crops_are_made_by_nj_backend_jobs_and_a_rerun_reuses_them(recipe, tmp_path):
    """--nj 2: the crops as 2 jobs of ${train_cmd} (run alone: the local backend), --shard 1/2 and 2/2."""
    for attempt in range(2):
        out = data_sh(recipe, "--roi", str(FIXTURE / "roi"), "--dev_size", "1", "--nj", "2")
        assert out.returncode == 0, out.stderr
        logs = [recipe / f"data/log/lrs3_rois.all.{k}.log" for k in (1, 2)]
        texts = [log.read_text() for log in logs]
        assert all(f"--shard {k}/2" in text for k, text in zip((1, 2), texts, strict=True))
        cropped = [int(n) for text in texts for n in re.findall(r"(\d+) clips cropped", text)]
        assert sum(cropped) == (5 if attempt == 0 else 0)  # the rerun reuses every clip
        assert "0 clips cropped" in out.stdout  # the last run: every clip done by the jobs
    assert len(read_table(recipe / "data/pretrain_trainval/text")) == 3
    # A clip that cannot be cropped fails its job, and the stage, naming the log.
    roi = tmp_path / "roi"
    shutil.copytree(FIXTURE / "roi", roi)
    (roi / "test/0Fi83BHQsMA/00003.mp4").write_bytes(b"not a video")
    out = data_sh(recipe, "--roi", str(roi), "--dev_size", "1", "--nj", "2")
    assert out.returncode != 0
    assert re.search(r"1 of 2 jobs failed:\n.*log: data/log/lrs3_rois\.all\.\d\.log", out.stderr)
    assert "00003.mp4: cannot use the ROI video" in out.stderr


def test_a_dev_set_whose_whole_speakers_take_all_of_trainval_is_refused(recipe):
    # 2 videos: the first speaker has 1, so the second (2 videos) joins dev whole
    out = data_sh(recipe, "--roi", str(FIXTURE / "roi"), "--dev_size", "2")
    assert out.returncode != 0
    assert "none is left for training" in out.stderr


def test_self_training_setup_needs_voxceleb2_before_any_stage(recipe):
    out = subprocess.run(
        ["./run.sh", "--stop_stage", "1", "--local_data_opts", f"--roi {FIXTURE / 'roi'}"],
        cwd=recipe,
        env={**os.environ, "LRS3": str(FIXTURE / "lrs3")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 1
    assert "--setup 433h_self self-trains on VoxCeleb2-en" in out.stderr
    assert "--voxceleb2_dir DIR" in out.stderr and "Stage 1" not in out.stderr
    assert not (recipe / "data").exists()
