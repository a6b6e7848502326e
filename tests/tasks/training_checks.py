"""What the task tests check about an ESPnet2 training run: its outputs and that ``--resume`` continues it."""

from pathlib import Path

import torch


def write_table(path: Path, rows) -> Path:
    path.write_text("".join(f"{key} {value}\n" for key, value in rows), encoding="utf-8")
    return path


def reporter_state(exp: Path) -> dict:
    """The trainer's record of finished epochs, from the checkpoint ``--resume`` continues from."""
    checkpoint = torch.load(exp / "checkpoint.pth", map_location="cpu", weights_only=False)
    return checkpoint["reporter"]


def train_loss(exp: Path, epoch: int) -> float:
    return float(reporter_state(exp)["stats"][epoch]["train"]["loss"])


def assert_trained_and_resumed(exp: Path, run_first, run_resumed, final_epoch: int = 2) -> None:
    """Train one epoch, check ESPnet's outputs, resume up to ``final_epoch``: it must continue, not restart."""
    run_first()
    assert reporter_state(exp)["epoch"] == 1
    assert (exp / "config.yaml").is_file() and (exp / "1epoch.pth").is_file()
    assert list(exp.glob("valid.*.best.pth")), sorted(p.name for p in exp.iterdir())
    loss_of_epoch_1 = train_loss(exp, 1)

    run_resumed()
    state = reporter_state(exp)
    assert state["epoch"] == final_epoch and sorted(state["stats"]) == list(
        range(1, final_epoch + 1)
    )
    assert train_loss(exp, 1) == loss_of_epoch_1  # epoch 1 was kept, not trained again
    assert (exp / f"{final_epoch}epoch.pth").is_file()
