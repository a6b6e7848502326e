"""Averaging the last N epochs: elementwise mean, clear errors, and ESPnet keeping the files."""

from __future__ import annotations

import pytest
import torch
from espnet2.train.reporter import Reporter

from espnet_ext.bin import average_checkpoints
from espnet_ext.decoding.checkpoint_average import (
    KEEP_LAST_CRITERION,
    average_state_dicts,
    last_epoch_files,
)
from espnet_ext.errors import ConfigError, InputError


def _save(path, weight, steps):
    torch.save({"w": torch.tensor(weight), "bn.num_batches_tracked": torch.tensor(steps)}, path)


@pytest.fixture
def exp_dir(tmp_path):
    _save(tmp_path / "1epoch.pth", [[0.0, 1.0]], 10)
    _save(tmp_path / "2epoch.pth", [[1.0, 2.0]], 20)
    _save(tmp_path / "3epoch.pth", [[2.0, 6.0]], 31)
    (tmp_path / "latest.pth").symlink_to("3epoch.pth")
    return tmp_path


def test_two_checkpoints_give_the_elementwise_mean(exp_dir):
    avg = average_state_dicts(last_epoch_files(exp_dir, 2))
    assert torch.equal(avg["w"], torch.tensor([[1.5, 4.0]]))  # (1+2)/2, (2+6)/2
    assert avg["w"].dtype == torch.float32
    assert avg["bn.num_batches_tracked"].item() == 25  # floor((20+31)/2), as ESPnet's averaging


def test_cli_writes_the_average_of_the_last_epochs(exp_dir, capsys):
    out = exp_dir / "last3.pth"
    average_checkpoints.main(["--exp_dir", str(exp_dir), "--last", "3", "--out", str(out)])
    assert torch.allclose(torch.load(out)["w"], torch.tensor([[1.0, 3.0]]))
    assert "1epoch.pth, 2epoch.pth, 3epoch.pth" in capsys.readouterr().out


def test_missing_epoch_is_an_error_naming_the_file(exp_dir, capsys):
    (exp_dir / "2epoch.pth").unlink()
    with pytest.raises(InputError, match=r"2epoch\.pth: missing.*total_count"):
        last_epoch_files(exp_dir, 2)
    out = exp_dir / "last2.pth"
    assert (
        average_checkpoints.main(["--exp_dir", str(exp_dir), "--last", "2", "--out", str(out)]) == 1
    )
    assert "2epoch.pth: missing" in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(ConfigError, match="needs 4 epochs"):
        last_epoch_files(exp_dir, 4)


def test_mismatched_parameters_are_refused(exp_dir):
    torch.save({"v": torch.zeros(1)}, exp_dir / "3epoch.pth")
    with pytest.raises(InputError, match=r"3epoch\.pth: parameters differ"):
        average_state_dicts(last_epoch_files(exp_dir, 2))


def test_espnet_keeps_the_last_epochs_under_the_total_count_criterion():
    """ESPnet's trainer keeps the n best epochs by each criterion: with ours, the last n."""
    reporter = Reporter()
    for epoch, acc in enumerate([0.5, 0.9, 0.7, 0.6], start=1):
        reporter.set_epoch(epoch)
        with reporter.observe("train") as sub:
            for _ in range(3):
                sub.register({"acc": acc})
                sub.next()
    assert reporter.sort_epochs(*KEEP_LAST_CRITERION)[:2] == [4, 3]
    assert reporter.sort_epochs("train", "acc", "max")[:2] == [2, 3]


def test_model_name_mode_makes_lastn_and_leaves_other_names(exp_dir):
    average_checkpoints.main(["--exp_dir", str(exp_dir), "--model", "last2.pth"])
    assert torch.equal(torch.load(exp_dir / "last2.pth")["w"], torch.tensor([[1.5, 4.0]]))
    average_checkpoints.main(["--exp_dir", str(exp_dir), "--model", "valid.acc.ave.pth"])
    assert not (exp_dir / "valid.acc.ave.pth").exists()


def test_equals_espnets_nbest_average_of_the_same_epochs(tmp_path):
    """ESPnet's own averaging (one criterion whose 2 best are the last 2 epochs) is the reference."""
    from espnet2.main_funcs.average_nbest_models import average_nbest_models

    reporter = Reporter()
    for epoch in (1, 2, 3):
        torch.save({"w": torch.randn(3, 4), "b": torch.randn(4)}, tmp_path / f"{epoch}epoch.pth")
        reporter.set_epoch(epoch)
        with reporter.observe("valid") as sub:
            sub.register({"acc": 0.1 * epoch})
            sub.next()
    average_nbest_models(tmp_path, reporter, [("valid", "acc", "max")], nbest=[2])
    espnet = torch.load(tmp_path / "valid.acc.ave_2best.pth")
    ours = average_state_dicts(last_epoch_files(tmp_path, 2, upto=3))
    for key in ours:
        torch.testing.assert_close(ours[key], espnet[key])


def test_training_args_keep_the_last_epochs_as_espnet_parses_them(tmp_path):
    from espnet2.tasks.mt import MTTask

    from espnet_ext.decoding.checkpoint_average import training_args

    config = tmp_path / "conf.yaml"
    config.write_text(
        "max_epoch: 20\nbest_model_criterion:\n- [valid, acc, max]\nkeep_nbest_models: 2\n"
    )
    args = training_args(["python", "-m", "x", "--config", str(config)], "last10.pth")
    parsed = MTTask.get_parser().parse_args(args)
    assert parsed.best_model_criterion == [("valid", "acc", "max"), tuple(KEEP_LAST_CRITERION)]
    assert parsed.keep_nbest_models == [2, 10]
    # the command line over the config: its criteria already keep the last 10 epochs
    given = ["--config", str(config), "--best_model_criterion", "train,total_count,max"]
    assert training_args([*given, "--keep_nbest_models", "10"], "last10.pth") == []
    assert training_args([*given, "--max_epoch", "30"], "last10.pth") == [
        "--keep_nbest_models",
        "2",
        "10",
    ]
    with pytest.raises(ConfigError, match=r"runs 8 \(max_epoch of .*conf\.yaml"):
        training_args([*given, "--max_epoch", "8"], "last10.pth")
    assert training_args(["--config", str(config)], "valid.acc.ave.pth") == []
    # ESPnet's defaults (40 epochs, keep 10 of four criteria) where neither says
    assert training_args([], "last5.pth") == [
        "--best_model_criterion",
        *("train,loss,min", "valid,loss,min", "train,acc,max", "valid,acc,max"),
        "train,total_count,max",
    ]


def _training_with_bleu(directory, bleus):
    """Epoch files (w = epoch) and checkpoint.pth with ESPnet's reporter of valid.bleu per epoch."""
    reporter = Reporter()
    for epoch, bleu in enumerate(bleus, start=1):
        torch.save({"w": torch.tensor([float(epoch)])}, directory / f"{epoch}epoch.pth")
        reporter.set_epoch(epoch)
        with reporter.observe("valid") as sub:
            sub.register({"loss": 1.0 / epoch, "bleu": bleu})
            sub.next()
    torch.save({"reporter": reporter.state_dict(), "model": {}}, directory / "checkpoint.pth")
    (directory / "latest.pth").symlink_to(f"{len(bleus)}epoch.pth")


def test_window_of_consecutive_epochs_with_the_best_mean_valid_bleu(tmp_path):
    """LegoNN §V-B: a moving window of checkpoints chosen by validation BLEU, not the last epochs."""
    from espnet_ext.decoding.checkpoint_average import best_window, reported_values

    _training_with_bleu(tmp_path, [10.0, 20.0, 31.0, 30.0, 29.0, 25.0])
    values = reported_values(tmp_path, "valid", "bleu")
    assert values == pytest.approx({1: 10, 2: 20, 3: 31, 4: 30, 5: 29, 6: 25})
    # windows of 3: means 20.33, 27, 30, 28 -> epochs 3-5 (the last 3 would be 4-6)
    assert best_window(values, 3, "max") == [3, 4, 5]
    assert best_window(values, 2, "min") == [1, 2]
    assert best_window({1: 5.0, 2: 5.0, 3: 5.0}, 2, "max") == [2, 3]  # a tie: the later window
    assert best_window({1: 9.0, 2: float("nan"), 3: 1.0, 4: 1.0}, 2, "max") == [3, 4]
    with pytest.raises(ConfigError, match="no 4 consecutive epochs"):
        best_window({1: 1.0, 2: float("nan"), 3: 1.0, 4: 1.0}, 4, "max")
    average_checkpoints.main(["--exp_dir", str(tmp_path), "--model", "window3.valid.bleu.max.pth"])
    assert torch.load(tmp_path / "window3.valid.bleu.max.pth")["w"].item() == pytest.approx(4.0)


def test_window_needs_a_reported_metric_and_keeps_every_epoch(tmp_path):
    from espnet_ext.decoding.checkpoint_average import training_args, window_files, window_spec

    _training_with_bleu(tmp_path, [1.0, 2.0, 3.0])
    with pytest.raises(ConfigError, match=r"no valid\.acc .*valid\.bleu"):
        window_files(tmp_path, 2, "valid", "acc", "max")
    assert window_spec("window10.valid.bleu.max.pth") == (10, "valid", "bleu", "max")
    assert window_spec("window10.valid.bleu.pth") is None
    config = tmp_path / "conf.yaml"
    config.write_text(
        "max_epoch: 15\nbest_model_criterion:\n- [valid, acc, max]\nkeep_nbest_models: 10\n"
    )
    # the window may lie anywhere: all 15 epoch files are kept
    assert training_args(["--config", str(config)], "window10.valid.bleu.max.pth") == [
        "--best_model_criterion",
        "valid,acc,max",
        "train,total_count,max",
        "--keep_nbest_models",
        "10",
        "15",
    ]
    with pytest.raises(ConfigError, match="averages a window of 20 epochs"):
        training_args(["--config", str(config)], "window20.valid.bleu.max.pth")
