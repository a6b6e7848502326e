"""Padding masks made on the device: ESPnet's make_pad_mask's values, nothing read back."""

import torch
from espnet.nets.pytorch_backend.nets_utils import make_pad_mask
from host_sync import HostSyncs

from espnet_ext.nets.padding import padding_mask


def test_equals_espnets_make_pad_mask_and_reads_nothing_back():
    lengths = torch.tensor([7, 2, 3, 7, 1])
    for length in (7, 9):
        with HostSyncs() as syncs:
            mask = padding_mask(lengths, length)
        assert syncs.found == []
        assert torch.equal(mask, make_pad_mask(lengths, maxlen=length))


def test_an_empty_utterance_is_all_padding_and_a_long_one_pads_nothing():
    # (ESPnet's make_pad_mask, indexing row length - 1 of a triangle, gives an empty one no padding)
    assert padding_mask(torch.tensor([0, 5]), 3).tolist() == [[True] * 3, [False] * 3]
