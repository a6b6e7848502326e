"""The full-size training configs carry the values of the recipes the paper adopts (A.3.1, A.3.3)."""

import math
import warnings
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
    # --max-tokens 2048 per side (fairseq bounds batch x longest padded side); ESPnet's length bins add
    # source and target lengths: 2 x 2048
    assert (config["batch_type"], config["batch_bins"], config.get("accum_grad", 1)) == (
        "length",
        4096,
        1,
    )
    assert config["max_epoch"] == 100
    assert ["train", "total_count", "max"] in config["best_model_criterion"]


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


def fairseq_tri_stage(n, peak, warmup, hold, decay, init_scale=0.01, final_scale=0.01):
    """fairseq's tri_stage lr after n updates (espresso's fairseq/optim/lr_scheduler, step_update)."""
    if n < warmup:
        return init_scale * peak + (peak - init_scale * peak) / warmup * n
    if n < warmup + hold:
        return peak
    if n <= warmup + hold + decay:
        return peak * math.exp(math.log(final_scale) / decay * (n - warmup - hold))
    return final_scale * peak


@pytest.mark.parametrize("name", ["train_asr_base.yaml", "train_asr_small.yaml"])
def test_tristage_schedule_is_espressos_update_by_update(name):
    """espresso: --warmup-steps 25000/8 --hold-steps 900000/8 --decay-steps 1550000/8 (8 = GPUs x
    update_freq); ESPnet's k-th update runs with fairseq's lr after k updates."""
    conf = load("librispeech/asr1", name)
    peak = conf["optim_conf"]["lr"]
    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=peak)
    scheduler = TristageLR(optimizer, **conf["scheduler_conf"])
    warmup, hold, decay = 25000 // 8, 900000 // 8, 1550000 // 8
    assert (scheduler.warmup_steps, scheduler.hold_steps, scheduler.decay_steps) == (
        warmup,
        hold,
        decay,
    )
    total = warmup + hold + decay
    for k in [
        1,
        2,
        1000,
        warmup - 1,
        warmup,
        warmup + 1,
        60000,
        warmup + hold - 1,
        warmup + hold,
        warmup + hold + 1,
        200000,
        total - 1,
        total,
        total + 1,
        400000,
    ]:
        scheduler.last_epoch = k - 1  # ESPnet's lr for its k-th update (1-based)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # get_lr() outside step() warns
            espnet_lr = scheduler.get_lr()[0]
        assert espnet_lr == pytest.approx(fairseq_tri_stage(k, peak, warmup, hold, decay), rel=1e-9)
    assert fairseq_tri_stage(total, peak, warmup, hold, decay) == pytest.approx(0.01 * peak)


@pytest.mark.parametrize("name", ["train_asr_base.yaml", "train_asr_small.yaml"])
def test_librispeech_batches_and_selection_are_espressos(name):
    conf = load("librispeech/asr1", name)
    # --max-tokens 22000 frames x --update-freq 8 (one GPU)
    assert (conf["batch_type"], conf["batch_bins"], conf["accum_grad"]) == ("length", 22000, 8)
    assert conf["max_epoch"] == 100
    assert ["train", "total_count", "max"] in conf["best_model_criterion"]


def test_decoding_configs_are_espressos():
    plain = load("librispeech/asr1", "decode_asr.yaml")
    fused = load("librispeech/asr1", "decode_asr_lm.yaml")
    for conf in (plain, fused):
        assert conf["beam_size"] == 60 and conf["lenpen"] == 1.0 and conf["fairseq_stop"] is True
        assert conf["maxlenratio"] == pytest.approx(0.08 * 4)  # --max-len-a 0.08, 4x subsampling
        assert conf["lm_weight"] == 0.4 and conf["penalty"] == 0.0
    assert (
        "eos_threshold" not in plain and fused["eos_threshold"] == 1.5
    )  # --eos-factor with LM only
    mt = load("iwslt14/mt1", "decode_mt.yaml")
    assert (mt["beam_size"], mt["lenpen"], mt["fairseq_stop"]) == (10, 0.5, True)
