"""asr.sh --input video, stage 2 (video checks) rerun: a part counted before is kept, so a rerun after a failed
job counts only that job's videos; another --nj counts every part again, and the parts of the longer split
are removed. The recipe dir is laid out as egs/TEMPLATE/setup.sh makes one; only stage 2 runs."""

import shlex
import subprocess
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "egs" / "TEMPLATE"
TRAIN_CONFIG = ROOT / "egs" / "librispeech" / "asr1" / "conf" / "train_asr_mini.yaml"
SETS = {"train": 5, "dev": 2, "test": 2}  # videos per set


def make_recipe(tmp_path: Path) -> Path:
    recipe = tmp_path / "recipe"
    (recipe / "conf").mkdir(parents=True)
    (recipe / "asr.sh").symlink_to(TEMPLATE / "asr1" / "asr.sh")
    for f in ("path.sh", "cmd.sh", "db.sh"):
        (recipe / f).symlink_to(TEMPLATE / "asr1" / f)
    (recipe / "utils").symlink_to(ROOT / "utils")
    (recipe / "conf" / "train.yaml").write_text(TRAIN_CONFIG.read_text())
    (recipe / "conf" / "decode.yaml").write_text("beam_size: 2\n")
    for dset, count in SETS.items():
        data = recipe / "data" / dset
        data.mkdir(parents=True)
        rows = []
        for i in range(count):
            key = f"{dset}{i}"
            np.save(recipe / f"{key}.npy", np.zeros((i + 3, 8, 8), np.uint8))
            rows.append(f"{key} {key}.npy\n")
        (data / "video.scp").write_text("".join(rows))
        (data / "text").write_text("".join(f"{row.split()[0]} a\n" for row in rows))
    return recipe


def run(recipe: Path, *options: str) -> subprocess.CompletedProcess:
    args = "--input video --asr_config conf/train.yaml --inference_config conf/decode.yaml"
    return subprocess.run(
        ["./asr.sh", *shlex.split(args), "--stage", "2", "--stop_stage", "2", *options],
        cwd=recipe,
        capture_output=True,
        text=True,
        timeout=300,
    )


def job_logs(recipe: Path, dset: str) -> dict[int, str]:
    logdir = recipe / "dump" / "video" / "log" / f"videos_{dset}"
    return {int(p.name.split(".")[1]): p.read_text() for p in logdir.glob("videos.*.log")}


def counted(logs: dict[int, str]) -> list[int]:
    """The jobs that decoded their videos (the others found their part counted before)."""
    assert all(("videos decode" in log) != ("counted before" in log) for log in logs.values()), logs
    return sorted(job for job, log in logs.items() if "videos decode" in log)


def test_a_rerun_counts_only_the_parts_not_counted(tmp_path):
    recipe = make_recipe(tmp_path)
    good = (recipe / "train1.npy").read_bytes()
    (recipe / "train1.npy").write_bytes(b"\x93NUMPY broken")  # in job 2 of 3 (round-robin)
    failed = run(recipe, "--nj", "3")
    assert failed.returncode != 0 and "Stage 2 (video checks) failed" in failed.stderr
    logdir = recipe / "dump" / "video" / "log" / "videos_train"
    assert sorted(p.name for p in logdir.glob("frames.*")) == ["frames.1", "frames.3"]
    (recipe / "train1.npy").write_bytes(good)
    done = run(recipe, "--nj", "3")
    assert done.returncode == 0, done.stderr
    assert counted(job_logs(recipe, "train")) == [2]  # jobs 1 and 3 kept their parts
    expected = "".join(f"train{i} {i + 3}\n" for i in range(5))
    frames = recipe / "dump" / "video" / "train" / "utt2num_frames"
    assert frames.read_text() == expected
    # another split (its stage forced to run again): every part counted again, frames.3 of 3 jobs removed
    (recipe / "dump" / ".stages" / "stage2.done").unlink()
    done = run(recipe, "--nj", "2")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in logdir.glob("frames.*")) == ["frames.1", "frames.2"]
    assert counted(job_logs(recipe, "train")) == [1, 2]
    assert frames.read_text() == expected
    assert counted(job_logs(recipe, "dev")) == []  # 2 videos: 2 jobs with --nj 3 as with 2
    # a video replaced at the same path: its part alone is counted again
    (recipe / "dump" / ".stages" / "stage2.done").unlink()
    np.save(recipe / "train4.npy", np.zeros((9, 8, 8), np.uint8))
    done = run(recipe, "--nj", "2")
    assert done.returncode == 0, done.stderr
    assert counted(job_logs(recipe, "train")) == [1]
    assert frames.read_text() == expected.replace("train4 7", "train4 9")
