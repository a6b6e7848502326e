"""Appendix C's tri-stage schedule (Table XII) in the Europarl LegoNN configs, through ESPnet2's tristagelr.

ESPnet's ``TristageLR`` (after fairseq's ``tri_stage``) is the paper's schedule: linear warm-up from the start
LR to the peak, a hold at the peak, exponential decay to the end LR, then the end LR. It takes the stages as
fractions of ``max_steps`` and the LRs as scales of the optimiser's LR; the paper gives step counts and
absolute LRs. ``tristage_conf`` converts one into the other; the configs must hold its result, and ESPnet's
scheduler on it must give the LRs worked out by hand. One difference from fairseq: ESPnet's scheduler is one
step ahead (after n updates it has set the LR of step n + 1), 1/35000 of the warm-up.
"""

import math
from pathlib import Path

import pytest
import torch
import yaml
from espnet2.schedulers.tristage_lr import TristageLR

CONF = Path(__file__).resolve().parents[3] / "egs" / "europarl" / "asr1" / "conf"
# Table XII: start 1e-6, peak 1e-3, end 5e-6, 80K steps, 35K warm-up, 1K hold (so 44K decay).
TABLE_XII = dict(
    start_lr=1e-6, max_lr=1e-3, end_lr=5e-6, total_steps=80000, warmup_steps=35000, hold_steps=1000
)
# §V-C2 fine-tuning of a composed model (conf/finetune.yaml's header): peak 1e-4 after 1k warm-up, 20k in all,
# Table XII's start and end LRs and 1k hold.
FINETUNE = dict(TABLE_XII, max_lr=1e-4, total_steps=20000, warmup_steps=1000)


def tristage_conf(start_lr, max_lr, end_lr, total_steps, warmup_steps, hold_steps) -> dict:
    """The paper's step counts and LRs as ESPnet2's ``tristagelr`` options."""
    decay_steps = total_steps - warmup_steps - hold_steps
    assert 0 < start_lr <= max_lr and 0 < end_lr <= max_lr and decay_steps >= 0
    return {
        "optim_conf": {"lr": max_lr},
        "scheduler": "tristagelr",
        "scheduler_conf": {
            "max_steps": total_steps,
            "warmup_ratio": warmup_steps / total_steps,
            "hold_ratio": hold_steps / total_steps,
            "decay_ratio": decay_steps / total_steps,
            "init_lr_scale": start_lr / max_lr,
            "final_lr_scale": end_lr / max_lr,
        },
    }


def lr_at(step: int, conf: dict) -> float:
    """The schedule at ``step``: ESPnet's get_lr with step_num = step."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], **conf["optim_conf"])
    scheduler = TristageLR(optimizer, **conf["scheduler_conf"])
    scheduler.last_epoch = step - 1  # state after step - 1 scheduler steps
    return scheduler.get_lr()[0]


@pytest.mark.parametrize(
    "step, expected",
    [
        (0, 1e-6),  # warm-up starts at the start LR
        (17500, 1e-6 + (1e-3 - 1e-6) / 2),  # linear: half-way = 5.005e-4
        (35000, 1e-3),  # peak
        (35999, 1e-3),  # hold
        (36000, 1e-3),  # decay begins: 1e-3 * exp(0)
        (58000, 1e-3 / math.sqrt(200)),  # half the decay: sqrt(end/peak) = 7.071e-5
        (80000, 5e-6),  # end LR
        (90000, 5e-6),  # and it stays there
    ],
)
def test_espnet_tristage_with_converted_conf_gives_table_xii_lrs(step, expected):
    assert lr_at(step, tristage_conf(**TABLE_XII)) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(
    "config, paper",
    [
        ("train_baseline.yaml", TABLE_XII),
        ("train_legonn.yaml", TABLE_XII),
        ("train_legonn_ctc.yaml", TABLE_XII),
        ("finetune.yaml", FINETUNE),
    ],
)
def test_europarl_configs_hold_the_converted_schedule(config, paper):
    held = yaml.safe_load((CONF / config).read_text())
    want = tristage_conf(**paper)
    assert held["scheduler"] == want["scheduler"]
    assert held["optim_conf"]["lr"] == pytest.approx(want["optim_conf"]["lr"], rel=1e-12)
    assert held["scheduler_conf"] == pytest.approx(want["scheduler_conf"], rel=1e-12)
