"""Padding masks made on the device.

ESPnet's ``make_pad_mask`` reads the lengths back to the host (``lengths.max()``, and with ``maxlen`` an
``assert maxlen >= lengths.max()``): a GPU forward waits there for all the work queued before it. Comparing
positions with the lengths on the device gives the same mask without waiting.
"""

from __future__ import annotations

import torch


def padding_mask(
    lengths: torch.Tensor, length: int, device: torch.device | None = None
) -> torch.Tensor:
    """(B, ``length``) bool, True at the padded positions (index >= the utterance's length), on
    ``device`` (default: the lengths' device). Lengths beyond ``length`` pad nothing."""
    device = lengths.device if device is None else device
    return torch.arange(length, device=device) >= lengths.to(device)[:, None]
