"""fairseq's utterance CMVN (espnet_ext.features.utterance_cmvn) against its formula, before SpecAugment as
fairseq's S2T recipes, and in the configs."""

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from espnet2.layers.utterance_mvn import UtteranceMVN
from espnet2.tasks.asr import ASRTask

from espnet_ext.bin.normalize_opts import normalize_opts
from espnet_ext.errors import ConfigError
from espnet_ext.features.utterance_cmvn import UtteranceCMVN, UtteranceCMVNSpecAug
from espnet_ext.registry import install
from espnet_ext.tasks.st import STTask

ROOT = Path(__file__).resolve().parents[2]


def fairseq_cmvn(frames: np.ndarray) -> np.ndarray:
    """fairseq UtteranceCMVN.__call__ (data/audio/feature_transforms/utterance_cmvn.py), by hand."""
    mean = frames.mean(axis=0)
    var = (frames**2).sum(axis=0) / frames.shape[0] - mean**2
    return (frames - mean) / np.sqrt(np.maximum(var, 1e-10))


def batch():
    torch.manual_seed(0)
    return torch.randn(3, 7, 4, dtype=torch.float64) * 4.0 + 2.0, torch.tensor([7, 5, 2])


def test_each_utterance_as_fairseq_normalises_it_alone():
    x, lengths = batch()
    y, out_lengths = UtteranceCMVN()(x, lengths)
    assert torch.equal(out_lengths, lengths)
    for b, n in enumerate(lengths.tolist()):
        np.testing.assert_allclose(y[b, :n].numpy(), fairseq_cmvn(x[b, :n].numpy()), rtol=1e-9)
        assert y[b, n:].eq(0).all()
    constant = torch.full((1, 3, 2), 5.0)  # var 0: clamped, no division by zero
    assert torch.isfinite(UtteranceCMVN()(constant, torch.tensor([3]))[0]).all()


def test_espnet_utterance_mvn_counts_padding_in_the_variance():
    """Why the module exists: ESPnet's norm_vars is right for the longest utterance only."""
    x, lengths = batch()
    y, _ = UtteranceMVN(norm_vars=True)(x.clone(), lengths)
    np.testing.assert_allclose(y[0].numpy(), fairseq_cmvn(x[0].numpy()), rtol=1e-9)
    assert not np.allclose(y[1, :5].numpy(), fairseq_cmvn(x[1, :5].numpy()), rtol=1e-3)


# fairseq's "lb" policy (data_utils.py set_specaugment_lb_policy) in ESPnet SpecAug's names
LB = dict(
    apply_time_warp=False,
    freq_mask_width_range=[0, 27],
    num_freq_mask=1,
    time_mask_width_range=[0, 100],
    num_time_mask=1,
)


def speech_batch(lengths=(50, 41, 30, 12)):
    torch.manual_seed(1)
    return torch.randn(len(lengths), 50, 40) * 3.0 + 7.0, torch.tensor(lengths)


def test_specaugment_masks_sit_at_the_normalised_mean():
    """fairseq's order: CMVN, then per-utterance masks (espnet_ext.features.specaugment) at the normalised
    utterance's mean (0); everything else is exactly utterance_cmvn's, padding included."""
    x, lengths = speech_batch()
    module = UtteranceCMVNSpecAug(specaug_conf=LB).train()
    for seed in range(5):
        torch.manual_seed(seed)
        y, out_lengths = module(x, lengths)
        torch.manual_seed(seed)
        mask = module.specaug.masks(lengths, 50, 40)
        assert torch.equal(out_lengths, lengths) and mask.any()
        cmvn, _ = UtteranceCMVN()(x, lengths)
        assert torch.equal(y[~mask], cmvn[~mask])
        assert y[mask].abs().max() < 1e-5  # fairseq's mask value: the normalised spectrogram's mean


def test_espnet_order_leaves_masked_frames_off_the_mean():
    """What the module changes: ESPnet's encode masks first, so masked frames enter each band's statistics
    and come out of the normalisation at -mean/std, not 0 (a masked band is constant, so it is 0 either way)."""
    from espnet2.asr.specaug.specaug import SpecAug

    x, lengths = speech_batch((50, 50, 50))
    time_masks = dict(apply_time_warp=False, apply_freq_mask=False, time_mask_width_range=[5, 6])
    y, _ = UtteranceCMVN()(*SpecAug(**time_masks)(x, lengths))
    assert not any(y[b].eq(0).all(1).any() for b in range(3))


def test_inference_is_utterance_cmvn():
    x, lengths = speech_batch()
    module = UtteranceCMVNSpecAug(specaug_conf=LB)
    y, _ = module.eval()(x, lengths)
    assert torch.equal(y, UtteranceCMVN()(x, lengths)[0])
    assert (
        not module.state_dict()
    )  # no parameters: utterance_cmvn's checkpoints are its checkpoints


def test_specaugment_options_are_required():
    with pytest.raises(ConfigError, match="normalize_conf.specaug_conf"):
        UtteranceCMVNSpecAug()


@pytest.mark.parametrize("task", [ASRTask, STTask])
def test_registered_for_speech_tasks(task):
    install()
    normalize = next(c for c in task.class_choices_list if c.name == "normalize")
    assert normalize.get_class("utterance_cmvn") is UtteranceCMVN
    assert normalize.get_class("utterance_cmvn_specaug") is UtteranceCMVNSpecAug


@pytest.mark.parametrize(
    "config",
    [
        "egs/mtedx/asr1/conf/train_asr_group.yaml",
        "egs/mtedx/asr1/conf/train_asr_shared_domains.yaml",
        "egs/mtedx/st1/conf/train_st_group.yaml",
        "egs/mustc/asr1/conf/train_asr.yaml",
        "egs/mustc/st1/conf/train_st.yaml",
    ],
)
def test_fairseq_recipes_use_it(config):
    """The real configs of the fairseq S2T recipes: CMVN, then their SpecAugment, in fairseq's order."""
    cfg = yaml.safe_load((ROOT / config).read_text())
    assert cfg["normalize"] == "utterance_cmvn_specaug"
    assert cfg["specaug"] is None
    specaug = UtteranceCMVNSpecAug(**cfg["normalize_conf"]).specaug
    lb = (specaug.freq_mask_n, specaug.freq_mask_f, specaug.time_mask_n, specaug.time_mask_t)
    assert lb == (1, 27, 1, 100)  # fairseq's "lb" policy (data_utils.py), no warping
    assert (specaug.time_mask_p, specaug.mask_value) == (
        1.0,
        None,
    )  # its p; masks at the utterance's mean
    assert normalize_opts(cfg, "stats.npz") == []  # the pipelines pass no --normalize over it


POLICY_KEYS = {
    "freq_mask_width_range",
    "num_freq_mask",
    "time_mask_width_range",
    "num_time_mask",
    "time_mask_p",
}


def test_every_config_spells_out_its_specaugment_policy():
    """A config running fairseq's SpecAugment names every setting of the policy it follows (time_mask_p
    included), so its card row reads the config, not a module default."""
    configs = [
        path
        for path in sorted(ROOT.glob("egs/*/*/conf/**/*.yaml"))
        if "card" not in path.parts and "sweeps" not in path.parts
    ]
    checked = 0
    for path in configs:
        cfg = yaml.safe_load(path.read_text()) or {}
        if cfg.get("normalize") == "utterance_cmvn_specaug":
            spec = cfg["normalize_conf"]["specaug_conf"]
        elif cfg.get("specaug") == "utterance_specaug":
            spec = cfg["specaug_conf"]
        else:
            continue
        checked += 1
        assert set(spec) >= POLICY_KEYS, (path, POLICY_KEYS - set(spec))
    assert checked >= 55
