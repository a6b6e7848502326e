"""InterruptSafeTrainer: a training stopped while ESPnet saves its checkpoint resumes an epoch earlier."""

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from espnet2.tasks import lm
from lm_corpus import write_lm_corpus

from espnet_ext.tasks.lm import LMTask
from espnet_ext.tasks.trainer import (
    CHECKPOINT,
    PREVIOUS,
    InterruptSafeTrainer,
    readable,
    repair_last_epoch,
    restore_previous,
)

TESTS = Path(__file__).resolve().parents[1]


def cut_short(path):
    """What a job killed while ``torch.save`` wrote ``path`` leaves: its first part."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_readable_tells_a_whole_checkpoint_from_one_cut_short(tmp_path):
    path = tmp_path / "c.pth"
    torch.save({"model": {"w": torch.randn(300, 300)}, "epoch": 3}, path)
    assert readable(path)
    cut_short(path)
    assert not readable(path)
    assert not readable(tmp_path / "missing.pth")
    (tmp_path / "noise.pth").write_bytes(b"\x00" * 1000)
    assert not readable(tmp_path / "noise.pth")


def test_restore_previous_puts_it_back_only_where_the_save_did_not_finish(tmp_path, caplog):
    checkpoint, previous = tmp_path / CHECKPOINT, tmp_path / PREVIOUS
    assert not restore_previous(tmp_path)  # nothing saved yet
    torch.save({"epoch": 1}, previous)
    torch.save({"epoch": 2}, checkpoint)
    assert not restore_previous(tmp_path)  # saved, stopped before the cleanup: the new one stays
    assert not previous.exists() and torch.load(checkpoint)["epoch"] == 2
    torch.save({"epoch": 1}, previous)
    cut_short(checkpoint)
    with caplog.at_level(logging.WARNING):
        assert restore_previous(tmp_path)
    assert torch.load(checkpoint)["epoch"] == 1 and not previous.exists()
    assert f"{checkpoint} is unreadable (cut short while saved): resuming from" in caplog.text
    checkpoint.replace(previous)  # stopped after the rename, before the save began
    assert restore_previous(tmp_path) and torch.load(checkpoint)["epoch"] == 1


CRITERIA = [("valid", "loss", "min"), ("train", "loss", "min")]  # ESPnet's LM default


class SeenAtSave(InterruptSafeTrainer):
    """Records, after each epoch's validation (just before ESPnet saves), which files exist."""

    seen: list[tuple[bool, bool]] = []

    @classmethod
    def validate_one_epoch(cls, **kwargs) -> None:
        super().validate_one_epoch(**kwargs)
        out = Path(kwargs["options"].output_dir)
        cls.seen.append(((out / PREVIOUS).exists(), (out / CHECKPOINT).exists()))


class SpiedLMTask(LMTask):
    trainer = SeenAtSave


def test_training_stopped_while_saving_resumes_an_epoch_earlier(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    args = write_lm_corpus(tmp_path) + ["--output_dir", "exp", "--resume", "true"]
    exp = tmp_path / "exp"
    SpiedLMTask.main(cmd=args + ["--max_epoch", "2"])
    # while epoch 2's checkpoint is written, epoch 1's is the previous one; gone once training ends
    assert SeenAtSave.seen == [(False, False), (True, False)]
    assert readable(exp / CHECKPOINT) and not (exp / PREVIOUS).exists()
    assert repair_last_epoch(exp, CRITERIA) is None  # ESPnet wrote the epoch's model file after it

    # epoch 3 stopped while saving: epoch 2's checkpoint moved aside, the new one cut short
    (exp / CHECKPOINT).replace(exp / PREVIOUS)
    torch.save(torch.load(exp / PREVIOUS, weights_only=False), exp / CHECKPOINT)
    cut_short(exp / CHECKPOINT)
    with pytest.raises((RuntimeError, OSError)):  # ESPnet's trainer: every rerun dies reading it
        lm.LMTask.main(cmd=args + ["--max_epoch", "3"])
    with caplog.at_level(logging.WARNING):
        LMTask.main(cmd=args + ["--max_epoch", "3"])
    assert "is unreadable (cut short while saved): resuming from" in caplog.text
    assert (exp / "3epoch.pth").exists() and not (exp / PREVIOUS).exists()
    state = torch.load(exp / CHECKPOINT, weights_only=False)
    assert state["reporter"]["epoch"] == 3

    # stopped after epoch 3's checkpoint, while ESPnet wrote 3epoch.pth, before its links
    model = torch.load(exp / CHECKPOINT, weights_only=False)["model"]
    cut_short(exp / "3epoch.pth")
    (exp / "latest.pth").unlink()
    (exp / "latest.pth").symlink_to("2epoch.pth")
    with caplog.at_level(logging.WARNING):
        assert repair_last_epoch(exp, CRITERIA) == 3
    assert "3epoch.pth was not saved whole after" in caplog.text
    rewritten = torch.load(exp / "3epoch.pth")
    assert rewritten.keys() == model.keys() and all(
        torch.equal(rewritten[k], model[k]) for k in model
    )
    assert os.readlink(exp / "latest.pth") == "3epoch.pth"
    assert (exp / os.readlink(exp / "valid.loss.best.pth")).exists()
    assert repair_last_epoch(exp, CRITERIA) is None  # whole again
    (exp / "3epoch.pth").unlink()  # stopped before ESPnet began the file
    assert repair_last_epoch(exp, CRITERIA) == 3 and readable(exp / "3epoch.pth")
    cut_short(exp / "3epoch.pth")  # and a resumed training repairs it before it goes on
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        LMTask.main(cmd=args + ["--max_epoch", "4"])
    assert "3epoch.pth was not saved whole after" in caplog.text
    assert readable(exp / "3epoch.pth") and os.readlink(exp / "latest.pth") == "4epoch.pth"


def weights(exp):
    return torch.load(exp / CHECKPOINT, weights_only=False)["model"]


@pytest.mark.parametrize("task", [LMTask, lm.LMTask], ids=["ours", "espnet"])
def test_a_resumed_training_with_accumulation_equals_the_uninterrupted_one(
    tmp_path, monkeypatch, task
):
    # 4 batches an epoch, 3 to an update: one batch an epoch makes no whole update. ESPnet added its
    # gradient to the next epoch's first update, which a resumed process never saw.
    monkeypatch.chdir(tmp_path)
    args = write_lm_corpus(tmp_path) + ["--resume", "true", "--accum_grad", "3"]
    task.main(cmd=args + ["--output_dir", "straight", "--max_epoch", "3"])
    task.main(cmd=args + ["--output_dir", "stopped", "--max_epoch", "2"])
    task.main(cmd=args + ["--output_dir", "stopped", "--max_epoch", "3"])
    straight, resumed = weights(tmp_path / "straight"), weights(tmp_path / "stopped")
    same = all(torch.equal(straight[k], resumed[k]) for k in straight)
    assert same == (task is LMTask)


@pytest.mark.parametrize("task", [LMTask, lm.LMTask], ids=["ours", "espnet"])
def test_a_training_that_stopped_early_stays_stopped_when_resumed(tmp_path, monkeypatch, task):
    # patience 0 on a criterion the second epoch cannot improve (the highest validation loss: the first)
    monkeypatch.chdir(tmp_path)
    args = write_lm_corpus(tmp_path) + [
        "--output_dir",
        "exp",
        "--resume",
        "true",
        "--max_epoch",
        "5",
    ]
    args += ["--patience", "0", "--early_stopping_criterion", "valid", "loss", "max"]
    task.main(cmd=args)
    assert (tmp_path / "exp/2epoch.pth").exists() and not (tmp_path / "exp/3epoch.pth").exists()
    task.main(cmd=args)  # a requeue after the end, or a rerun of the stage
    trained_on = (tmp_path / "exp/3epoch.pth").exists()
    assert trained_on == (task is lm.LMTask)  # ESPnet's trainer: one more epoch at every resume


TWO_PROCESS_RUN = """
import sys
from pathlib import Path
from lm_corpus import write_lm_corpus
from espnet_ext.tasks.lm import LMTask
rank, epochs, store = sys.argv[1:]
LMTask.main(cmd=write_lm_corpus(Path(".")) + [
    "--output_dir", "exp", "--resume", "true", "--max_epoch", epochs, "--dist_backend", "gloo",
    "--dist_init_method", f"file://{store}", "--dist_world_size", "2", "--dist_rank", rank,
    "--multiprocessing_distributed", "false"])
"""


def train_on_two_processes(directory, epochs, store):
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    )
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", TWO_PROCESS_RUN, str(rank), str(epochs), str(store)],
            cwd=directory,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        for rank in (0, 1)
    ]
    logs = [run.communicate(timeout=300)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], logs[0][-2000:] + logs[1][-2000:]
    return logs


def test_ddp_ranks_resume_from_the_checkpoint_rank_0_put_back(tmp_path, monkeypatch):
    # two CPU processes (gloo) as ESPnet's DDP: rank 0 restores the previous checkpoint, the other waits
    # for it before ESPnet reads the checkpoint on every rank (two epochs first in this process: the
    # checkpoint is the same either way)
    exp = tmp_path / "exp"
    monkeypatch.chdir(tmp_path)
    LMTask.main(cmd=write_lm_corpus(tmp_path) + ["--output_dir", "exp", "--max_epoch", "2"])
    (exp / CHECKPOINT).replace(exp / PREVIOUS)
    (exp / CHECKPOINT).write_bytes((exp / PREVIOUS).read_bytes()[:20000])  # cut short
    logs = train_on_two_processes(tmp_path, 3, tmp_path / "store")
    assert "is unreadable (cut short while saved): resuming from" in logs[0]
    assert "resuming from" not in logs[1]  # rank 1 touches no file
    assert (exp / "3epoch.pth").exists() and not (exp / PREVIOUS).exists()
