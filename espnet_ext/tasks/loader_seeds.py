"""Data augmentation of its own on every DDP process.

ESPnet seeds every process of a DDP training alike (``seed + epoch``) and the loader processes of each
alike too (``random`` and NumPy: ``seed + epoch + worker``; torch: from the main process' generator), so
the i-th utterance or image of every process' share of a batch got the same random crop, flip,
RandAugment operations and erasing: a batch of 8 GPUs drew an eighth of the augmentations one GPU draws.
The authors' Swin training seeds each process with its rank added (yhlleo/VTs-Drloc main.py:
``seed = config.SEED + dist.get_rank()``). ``RankSeededLoaders`` wraps a training iterator factory: its
loader processes are seeded with the rank mixed in (Python's ``random``, NumPy and torch), while the
batches and their order, which ESPnet draws from ``seed + epoch`` and splits among the processes, stay as
they are. Augmentation in the training process itself (``num_workers: 0``) is left to ESPnet's seeds.
"""

from __future__ import annotations

from functools import partial

import torch
from espnet2.iterators.abs_iter_factory import AbsIterFactory
from espnet2.iterators.sequence_iter_factory import worker_init_fn

# far apart from the epochs and worker ids ESPnet adds to the seed
RANK_STRIDE = 1_000_003


class RankSeededLoaders(AbsIterFactory):
    """``factory`` (ESPnet's ``SequenceIterFactory``) whose loader processes draw other random numbers on
    each DDP process ``rank``."""

    def __init__(self, factory, rank: int):
        self.factory, self.rank = factory, rank

    def build_iter(self, epoch: int, shuffle: bool | None = None):
        loader = self.factory.build_iter(epoch, shuffle)
        seed = epoch + self.factory.seed + RANK_STRIDE * self.rank
        loader.worker_init_fn = partial(worker_init_fn, base_seed=seed)  # random, NumPy
        loader.generator = torch.Generator().manual_seed(
            seed
        )  # each worker's torch seed comes from it
        return loader
