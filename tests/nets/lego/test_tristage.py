"""Appendix C's tri-stage schedule through ESPnet2's tristagelr, against LRs worked out by hand."""

import math

import pytest
import torch
from espnet2.schedulers.tristage_lr import TristageLR

from espnet_ext.errors import ConfigError
from espnet_ext.nets.lego.tristage import tristage_conf

# Table XII: start 1e-6, peak 1e-3, end 5e-6, 80K steps, 35K warm-up, 1K hold (so 44K decay).
TABLE_XII = dict(
    start_lr=1e-6, max_lr=1e-3, end_lr=5e-6, total_steps=80000, warmup_steps=35000, hold_steps=1000
)


def lr_at(step: int) -> float:
    """The schedule at ``step``: ESPnet's get_lr with step_num = step."""
    conf = tristage_conf(**TABLE_XII)
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
    assert lr_at(step) == pytest.approx(expected, rel=1e-9)


def test_counts_that_do_not_add_up_are_refused():
    with pytest.raises(ConfigError, match="exceed 80000"):
        tristage_conf(1e-6, 1e-3, 5e-6, 80000, 79500, 1000)
    with pytest.raises(ConfigError, match="max_lr"):
        tristage_conf(1e-2, 1e-3, 5e-6, 80000, 35000, 1000)
