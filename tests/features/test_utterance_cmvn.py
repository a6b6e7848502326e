"""fairseq's utterance CMVN (espnet_ext.features.utterance_cmvn) against its formula, and in the configs."""

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from espnet2.layers.utterance_mvn import UtteranceMVN
from espnet2.tasks.asr import ASRTask
from espnet2.tasks.st import STTask

from espnet_ext.bin.normalize_opts import normalize_opts
from espnet_ext.features.utterance_cmvn import UtteranceCMVN
from espnet_ext.registry import install

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


@pytest.mark.parametrize("task", [ASRTask, STTask])
def test_registered_for_speech_tasks(task):
    install()
    normalize = next(c for c in task.class_choices_list if c.name == "normalize")
    assert normalize.get_class("utterance_cmvn") is UtteranceCMVN


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
    cfg = yaml.safe_load((ROOT / config).read_text())
    assert cfg["normalize"] == "utterance_cmvn"
    assert normalize_opts(cfg, "stats.npz") == []  # the pipelines pass no --normalize over it
