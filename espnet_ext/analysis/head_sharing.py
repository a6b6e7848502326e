"""Which attention heads each task selects: the head-selection paper's sharing and load heatmaps (§5).

    python -m espnet_ext.analysis.head_sharing --checkpoint exp/.../valid.acc.ave.pth \\
        --config exp/.../config.yaml --out_dir exp/.../head_sharing

At inference a head-selection layer's choice for task t is fixed by its logits φ_t alone: the noise-free
posterior σ(φ_t/τ) through the strategy's mask (eq. 5 subset, eq. 6 group), exactly what
``HeadSelectionAttention.selection`` computes in eval mode. From the ``selection_logits`` of every layer
of a trained model (no model is built) this writes, per side (encoder self-attention, decoder
self-attention):

- ``sharing_<side>.png`` / ``.md``: the number of heads each pair of tasks shares over all layers of the
  side (Fig. 3); the diagonal is the number of heads a task uses (H x layers);
- ``load_<side>.png`` / ``.md``: per layer and candidate head, the number of tasks that select it (Fig. 4).

Task names come from ``model_conf.<side>_task_tags`` (ST models), else ``model_conf.task_tags``; the side's
H, strategy and τ from its ``*_conf``.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import yaml

from espnet_ext.analysis.head_weights import load_state
from espnet_ext.attention.head_selection import SELECTION_MASKS, gumbel_posterior
from espnet_ext.errors import InputError, reports_input_errors

SIDES = ("encoder", "decoder")
LOGITS = re.compile(r"^(encoder|decoder)\.(?:.*\.)?(\d+)\.self_attn\.selection_logits$")


@dataclass(frozen=True)
class SideSelection:
    """The inference-time selection of one side: ``mask`` (layers, tasks, H') of 0/1."""

    side: str
    mask: np.ndarray

    def sharing(self) -> np.ndarray:
        """(tasks, tasks): heads shared by each pair of tasks, summed over layers (Fig. 3)."""
        per_layer = np.einsum("lth,luh->ltu", self.mask, self.mask)
        return per_layer.sum(0).astype(int)

    def load(self) -> np.ndarray:
        """(layers, H'): the number of tasks selecting each candidate head (Fig. 4)."""
        return self.mask.sum(1).astype(int)


def side_options(config: dict, side: str, path: Path) -> tuple[int, str, float]:
    """(H, strategy, τ) of one side from its ``<side>_conf`` (ESPnet's default of 4 heads)."""
    conf = config.get(f"{side}_conf") or {}
    strategy = conf.get("selection_strategy", "group")
    if strategy not in SELECTION_MASKS:
        raise InputError(f"unknown selection strategy '{strategy}'", path=path, key=f"{side}_conf")
    return conf.get("attention_heads", 4), strategy, float(conf.get("gumbel_temperature", 1.0))


def selections(state: dict, config: dict, config_path: Path) -> list[SideSelection]:
    """The selection of every side of ``state`` that has head-selection layers (encoder first)."""
    layers: dict[str, dict[int, torch.Tensor]] = {side: {} for side in SIDES}
    for name, value in state.items():
        match = LOGITS.match(name)
        if match:
            layers[match.group(1)][int(match.group(2))] = value.detach().float().cpu()
    result = []
    for side in SIDES:
        if not layers[side]:
            continue
        n_head, strategy, temperature = side_options(config, side, config_path)
        logits = torch.stack([layers[side][i] for i in sorted(layers[side])])  # (L, T, H')
        posterior = gumbel_posterior(logits, temperature)
        mask = SELECTION_MASKS[strategy](posterior, n_head)
        result.append(SideSelection(side, mask.numpy()))
    if not result:
        raise InputError(
            "no head-selection layers (no *.self_attn.selection_logits)", path=config_path
        )
    return result


def task_names(config: dict, num_tasks: int, path: Path, side: str = "encoder") -> list[str]:
    """The tags of ``side``'s tasks: ``model_conf.<side>_task_tags`` (ST models: source languages for
    the encoder, target languages for the decoder), else ``model_conf.task_tags``, else the ids."""
    model_conf = config.get("model_conf") or {}
    key = f"{side}_task_tags" if model_conf.get(f"{side}_task_tags") is not None else "task_tags"
    tags = model_conf.get(key)
    if tags is None:
        return [str(t) for t in range(num_tasks)]
    if len(tags) != num_tasks:
        raise InputError(
            f"{len(tags)} task tags for {num_tasks} {side} tasks in the checkpoint",
            path=path,
            key=f"model_conf.{key}",
        )
    return [str(t) for t in tags]


def markdown(matrix: np.ndarray, rows: Sequence[str], cols: Sequence[str], corner: str) -> str:
    lines = [f"| {corner} | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    lines += [f"| {r} | " + " | ".join(str(v) for v in row) + " |" for r, row in zip(rows, matrix)]
    return "\n".join(lines) + "\n"


def heatmap(matrix: np.ndarray, rows: Sequence[str], cols: Sequence[str], title: str, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1.0 + 0.45 * len(cols), 1.0 + 0.4 * len(rows)))
    ax.imshow(matrix, cmap="Blues", vmin=0)
    ax.set_xticks(range(len(cols)), cols)
    ax.set_yticks(range(len(rows)), rows)
    for (i, j), value in np.ndenumerate(matrix):
        dark = value > matrix.max() / 2
        ax.text(j, i, str(value), ha="center", va="center", color="white" if dark else "black")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def analyse(checkpoint: Path, config_path: Path, out_dir: Path) -> list[SideSelection]:
    config = yaml.safe_load(Path(config_path).read_text()) or {}
    sides = selections(load_state(checkpoint), config, Path(config_path))
    out_dir.mkdir(parents=True, exist_ok=True)
    for sel in sides:
        names = task_names(config, sel.mask.shape[1], Path(config_path), sel.side)
        layers = [f"L{i + 1}" for i in range(sel.mask.shape[0])]
        heads = [f"h{i + 1}" for i in range(sel.mask.shape[2])]
        sharing, load = sel.sharing(), sel.load()
        (out_dir / f"sharing_{sel.side}.md").write_text(markdown(sharing, names, names, "task"))
        (out_dir / f"load_{sel.side}.md").write_text(markdown(load, layers, heads, "layer"))
        heatmap(
            sharing, names, names, f"heads shared ({sel.side})", out_dir / f"sharing_{sel.side}.png"
        )
        heatmap(
            load, layers, heads, f"tasks per head ({sel.side})", out_dir / f"load_{sel.side}.png"
        )
    return sides


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="model .pth (state dict)")
    parser.add_argument("--config", type=Path, required=True, help="the experiment's config.yaml")
    parser.add_argument("--out_dir", type=Path, required=True)
    args = parser.parse_args(argv)
    for sel in analyse(args.checkpoint, args.config, args.out_dir):
        print(
            f"{sel.side}: {sel.mask.shape[0]} layers, {sel.mask.shape[1]} tasks -> {args.out_dir}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
