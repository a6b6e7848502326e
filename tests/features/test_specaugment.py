"""fairseq's per-utterance SpecAugment (espnet_ext.features.specaugment) against a hand computation of
SpecAugmentTransform.__call__ (fairseq/data/audio/feature_transforms/specaugment.py), on padded batches."""

import math

import pytest
import torch
from espnet2.asr.specaug.specaug import SpecAug
from espnet2.tasks.asr import ASRTask
from espnet2.tasks.st import STTask

from espnet_ext.errors import ConfigError
from espnet_ext.features.specaugment import UtteranceSpecAugment
from espnet_ext.registry import install

LB = dict(
    freq_mask_width_range=[0, 27], num_freq_mask=1, time_mask_width_range=[0, 100], num_time_mask=1
)
SS = dict(
    freq_mask_width_range=[0, 27],
    num_freq_mask=2,
    time_mask_width_range=[0, 70],
    num_time_mask=2,
    time_mask_p=0.2,
)  # fairseq examples/speech_to_text/data_utils.py set_specaugment_{lb,ss}_policy


def fairseq_mask(u: torch.Tensor, n: int, bins: int, F: int, Nf: int, T: int, p: float, Nt: int):
    """SpecAugmentTransform.__call__ on one utterance of n frames, its np.random.randint(lo, hi) calls read
    as lo + floor(u (hi - lo)) from u's rows in call order (u[i, 0] the width, u[i, 1] the start)."""

    def randint(x, lo, hi):
        return lo + math.floor(float(x) * (hi - lo))

    mask = torch.zeros(n, bins, dtype=torch.bool)
    if n == 0 or bins < F:
        return mask
    for i in range(Nf):
        f = randint(u[i, 0], 0, F)
        f0 = randint(u[i, 1], 0, bins - f)
        mask[:, f0 : f0 + f] = True
    longest = min(T, math.floor(n * p))
    if longest < 1:
        return mask
    for i in range(Nf, Nf + Nt):
        t = randint(u[i, 0], 0, longest)
        t0 = randint(u[i, 1], 0, n - t)
        mask[t0 : t0 + t, :] = True
    return mask


@pytest.mark.parametrize("conf", [LB, SS])
def test_masks_are_fairseqs_for_each_utterance_alone(conf):
    """Exact masks: the module's and the hand computation, from the same uniforms, one utterance at a time."""
    module = UtteranceSpecAugment(**conf)
    lengths = torch.tensor([400, 137, 60, 7, 1, 0])
    for seed in range(20):
        got = module.masks(lengths, 400, 80, torch.Generator().manual_seed(seed))
        rows = (6, module.freq_mask_n + module.time_mask_n, 2)
        u = torch.rand(rows, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        policy = (module.freq_mask_n, module.time_mask_t, module.time_mask_p, module.time_mask_n)
        for b, n in enumerate(lengths.tolist()):
            want = fairseq_mask(u[b], n, 80, 27, *policy)
            assert torch.equal(got[b, :n], want), (seed, n)
            assert not got[b, n:].any()  # padding never masked


def test_masks_do_not_depend_on_the_other_utterances():
    """A short utterance among long ones gets the masks it gets among short ones (same seed): ESPnet's SpecAug
    draws its time masks over the padded length instead, and mostly masks the short one's padding."""
    module = UtteranceSpecAugment(**LB)
    alone = module.masks(torch.tensor([40, 30, 35]), 40, 80, torch.Generator().manual_seed(3))
    among_long = module.masks(
        torch.tensor([40, 900, 870]), 900, 80, torch.Generator().manual_seed(3)
    )
    assert torch.equal(alone[0], among_long[0, :40]) and not among_long[0, 40:].any()

    espnet = SpecAug(
        apply_time_warp=False,
        apply_freq_mask=False,
        time_mask_width_range=[0, 100],
        num_time_mask=1,
    )
    x = torch.ones(1000, 900, 2)
    x[:, :40] = 2.0  # a 40-frame utterance padded to 900 frames, 1000 draws of its mask
    torch.manual_seed(0)
    y, _ = espnet(x.clone(), torch.full([1000], 900))
    on_speech = (y[:, :40, 0] == 0).any(1).float().mean().item()
    ours = module.masks(torch.full([1000], 40), 900, 80, torch.Generator().manual_seed(0))
    ours = ours[:, :40].all(2).any(1).float().mean().item()  # a time mask: all bins of a frame
    assert on_speech < 0.2 and ours > 0.9


def test_widths_bounded_by_p_times_length_and_uniform():
    """T' = min(T, floor(p n)): widths 0 .. T' - 1, each about equally often; starts 0 .. n - t - 1."""
    module = UtteranceSpecAugment(**SS)
    n = torch.tensor([37] * 20000)  # T' = min(70, floor(7.4)) = 7
    f, f0, t, t0 = module.draw(n, 80, torch.Generator().manual_seed(0))
    assert t.min() == 0 and t.max() == 6
    counts = torch.bincount(t.flatten(), minlength=7).double() / t.numel()
    torch.testing.assert_close(
        counts, torch.full([7], 1 / 7, dtype=torch.float64), atol=0.01, rtol=0
    )
    assert (
        t0.min() == 0 and ((t0 + t) <= 36).all() and ((t0 + t) == 36).any()
    )  # the last frame: never
    assert f.max() == 26 and ((f0 + f) <= 79).all() and ((f0 + f) == 79).any()
    long = module.draw(torch.tensor([1000] * 2000), 80, torch.Generator().manual_seed(0))[2]
    assert long.max() == 69  # T caps it where p n does not
    short = module.draw(torch.tensor([4] * 200), 80, torch.Generator().manual_seed(0))[2]
    assert not short.any()  # floor(0.8) = 0: no time mask at all


def test_masked_values_are_the_utterances_mean_and_the_rest_is_untouched():
    torch.manual_seed(0)
    x = torch.randn(3, 50, 30) * 3.0 + 5.0
    lengths = torch.tensor([50, 21, 8])
    module = UtteranceSpecAugment(**{**LB, "freq_mask_width_range": [0, 10]})
    y, out_lengths = module(x, lengths, torch.Generator().manual_seed(1))
    mask = module.masks(lengths, 50, 30, torch.Generator().manual_seed(1))
    assert out_lengths is lengths and mask.any()
    for b, n in enumerate(lengths.tolist()):
        mean = x[b, :n].mean()  # fairseq: spectrogram.mean() of the utterance
        torch.testing.assert_close(y[b][mask[b]], mean.expand(int(mask[b].sum())))
    assert torch.equal(y[~mask], x[~mask])
    y, _ = UtteranceSpecAugment(**LB, mask_value=-1.5)(x, lengths, torch.Generator().manual_seed(1))
    assert y[mask].eq(-1.5).all()


def test_fewer_bins_than_F_left_untouched():
    x = torch.randn(2, 30, 20)
    y, _ = UtteranceSpecAugment(**LB)(x, torch.tensor([30, 12]))
    assert torch.equal(y, x)  # fairseq: num_freqs < freq_mask_F returns the spectrogram


@pytest.mark.parametrize(
    "conf, key",
    [
        ({"apply_time_warp": True}, "specaug_conf.apply_time_warp"),
        ({"time_mask_width_range": [5, 40]}, "specaug_conf.time_mask_width_range"),
        ({"freq_mask_width_range": [0, 0]}, "specaug_conf.freq_mask_width_range"),
        ({"time_mask_p": 1.5}, "specaug_conf.time_mask_p"),
        ({"replace_with_zero": True}, "specaug_conf"),
    ],
)
def test_bad_options_name_their_key(conf, key):
    with pytest.raises(ConfigError, match=f"key '{key}'"):
        UtteranceSpecAugment(**conf)


@pytest.mark.parametrize("task", [ASRTask, STTask])
def test_registered_as_a_specaug_choice(task):
    install()
    specaug = next(c for c in task.class_choices_list if c.name == "specaug")
    assert specaug.get_class("utterance_specaug") is UtteranceSpecAugment
