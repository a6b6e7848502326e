"""RankSeededLoaders: each DDP process' loader processes draw their own random numbers, batches unchanged."""

import random

import numpy as np
import torch
from espnet2.iterators.sequence_iter_factory import SequenceIterFactory

from espnet_ext.tasks.loader_seeds import RankSeededLoaders


class Draws(torch.utils.data.Dataset):
    """Each item: its key and what an augmentation would draw from random, NumPy and torch."""

    def __getitem__(self, key):
        return key, (random.random(), float(np.random.rand()), float(torch.rand(())))

    def __len__(self):
        return 8


def collate(items):
    return items


def loaded(factory, epoch):
    return [item for batch in factory.build_iter(epoch) for item in batch]


def test_each_rank_draws_its_own_augmentations_over_the_same_batches():
    factory = SequenceIterFactory(
        Draws(), [[0, 1], [2, 3], [4, 5], [6, 7]], seed=3, shuffle=True, num_workers=2,
        collate_fn=collate,
    )  # fmt: skip
    torch.manual_seed(0)  # ESPnet seeds every process alike: the loader processes' torch seed too
    espnet_0 = loaded(factory, 1)
    torch.manual_seed(0)
    espnet_1 = loaded(factory, 1)
    assert espnet_0 == espnet_1  # ESPnet's: every rank's i-th item drew the same augmentation
    ranks = [loaded(RankSeededLoaders(factory, rank), 1) for rank in (0, 1)]
    assert [key for key, _ in ranks[0]] == [key for key, _ in ranks[1]] == [k for k, _ in espnet_0]
    for (_, draws_0), (_, draws_1) in zip(*ranks):
        assert all(a != b for a, b in zip(draws_0, draws_1))  # random, NumPy and torch alike
    assert (
        loaded(RankSeededLoaders(factory, 1), 1) == ranks[1]
    )  # reproducible: resumes draw the same
    assert loaded(RankSeededLoaders(factory, 1), 2) != ranks[1]  # and epochs differ


def test_our_tasks_seed_their_training_loaders_per_process_under_ddp(monkeypatch):
    from argparse import Namespace
    from types import SimpleNamespace

    from espnet2.tasks.abs_task import AbsTask

    from espnet_ext.tasks.image_classification import ImageClassificationTask

    built = object()
    monkeypatch.setattr(AbsTask, "build_iter_factory", classmethod(lambda cls, *a, **k: built))
    args = Namespace(iterator_type="sequence", valid_iterator_type=None)
    ddp = SimpleNamespace(distributed=True, dist_rank=3)
    factory = ImageClassificationTask.build_iter_factory(args, ddp, "train")
    assert isinstance(factory, RankSeededLoaders) and factory.rank == 3 and factory.factory is built
    assert (
        ImageClassificationTask.build_iter_factory(args, ddp, "valid") is built
    )  # no augmentation
    one = SimpleNamespace(distributed=False, dist_rank=0)
    assert ImageClassificationTask.build_iter_factory(args, one, "train") is built  # as ESPnet's
