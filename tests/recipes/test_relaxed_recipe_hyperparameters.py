"""The full-size training configs carry the values of the recipes the paper adopts (A.3.1, A.3.3)."""

from pathlib import Path

import pytest
import torch
import yaml
from espnet2.schedulers.tristage_lr import TristageLR

EGS = Path(__file__).resolve().parents[2] / "egs"


def load(recipe, name):
    return yaml.safe_load((EGS / recipe / "conf" / name).read_text())


def test_iwslt14_optimiser_is_shen_et_al_recipe():
    config = load("iwslt14/mt1", "train_mt_base.yaml")
    assert config["optim_conf"]["lr"] == 7e-4
    assert config["optim_conf"]["eps"] == 1e-9
    assert config["scheduler"] == "warmuplr"
    assert config["scheduler_conf"]["warmup_steps"] == 6000
    assert config["model_conf"]["consistency_weight"] == 5.0


@pytest.mark.parametrize("name", ["train_asr_base.yaml", "train_asr_small.yaml"])
def test_librispeech_optimiser_and_specaugment_are_espresso_recipe(name):
    config = load("librispeech/asr1", name)
    assert config["optim"] == "adam" and config["optim_conf"]["betas"] == [0.9, 0.999]
    assert config["grad_clip"] == 2.0
    spec = config["specaug_conf"]
    assert spec["time_warp_window"] == 80
    assert spec["freq_mask_width_range"] == [0, 27] and spec["num_freq_mask"] == 2
    assert spec["time_mask_width_range"] == [0, 100] and spec["num_time_mask"] == 2
    assert config["scheduler"] == "tristagelr"


def test_tristage_schedule_of_the_config_warms_holds_and_decays():
    conf = load("librispeech/asr1", "train_asr_base.yaml")
    peak = conf["optim_conf"]["lr"]
    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=peak)
    steps = 200  # the config's stage ratios on a short run
    scheduler = TristageLR(optimizer, **{**conf["scheduler_conf"], "max_steps": steps})
    lrs = []
    for _ in range(steps + 1):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    # lrs[i] is the rate of step i + 1: linear warm-up from 1 % of the peak over 20 steps
    assert lrs[0] == pytest.approx(0.01 * peak + 0.99 * peak / 20)
    assert lrs[9] == pytest.approx(0.01 * peak + 0.5 * 0.99 * peak)
    assert lrs[25] == pytest.approx(peak) and lrs[95] == pytest.approx(peak)  # held
    assert lrs[149] == pytest.approx(0.1 * peak, rel=2e-2)  # exponential: half-way down in log
    assert lrs[-1] == pytest.approx(0.01 * peak, rel=1e-2)
