"""Per-step pictures of an attention recogniser's decoding, like the sharp-attention paper's Figs. 3 and 4:
the image with the region attended at every step, and below it what the decoder looked at per step (the
sharpener's patch, or for soft/hard attention the receptive field of the most attended column) under the
token it predicted."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

RECEPTIVE_FIELD = 46  # px of the 100-px-wide input seen by one backbone column
COLUMN_STRIDE = 4


def step_views(
    image: np.ndarray, steps: Sequence[tuple[int, torch.Tensor, torch.Tensor | None]]
) -> list[np.ndarray]:
    """What each step looked at: the patch when there is one, else the receptive field of argmax α."""
    views = []
    for _, alpha, patch in steps:
        if patch is not None:
            views.append(patch.detach().cpu().numpy())
            continue
        centre = 4 + COLUMN_STRIDE * int(alpha.argmax())
        x0 = max(0, centre - RECEPTIVE_FIELD // 2)
        views.append(image[:, x0 : x0 + RECEPTIVE_FIELD])
    return views


def plot_steps(image: np.ndarray, steps, token_text: Sequence[str], path, title: str = "") -> Path:
    """``image`` (32, 100) grey; ``steps`` as ``AttentionRecognizer.recognize(..., return_steps=True)`` gives;
    ``token_text`` the symbol predicted at each step. Writes a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    views = step_views(image, steps)
    fig = plt.figure(figsize=(max(4, 1.0 * len(views)), 3.2))
    top = fig.add_subplot(2, 1, 1)
    top.imshow(image, cmap="gray", vmin=0, vmax=1)
    attention = torch.stack([alpha for _, alpha, _ in steps]).detach().cpu().numpy()  # (N, 24)
    for n, row in enumerate(attention):
        centre = 4 + COLUMN_STRIDE * int(row.argmax())
        top.axvline(centre, color=plt.cm.viridis(n / max(1, len(attention) - 1)), linewidth=1)
    top.set_title(title, fontsize=8)
    top.axis("off")
    for n, (view, symbol) in enumerate(zip(views, token_text)):
        ax = fig.add_subplot(2, len(views), len(views) + n + 1)
        ax.imshow(view, cmap="gray", vmin=0, vmax=1)
        ax.set_title(symbol, fontsize=9)
        ax.axis("off")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
