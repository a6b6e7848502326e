"""W_o head analysis of a trained Multiformer encoder (thesis §4.3, Figs. 21-22).

    python -m espnet_ext.analysis.head_weights --checkpoint exp/.../valid.acc.ave.pth \\
        --config exp/.../config.yaml --out_dir exp/.../head_weights [--low_share 0.5]

In eq. 23, Z = concat(Z_1..Z_h) · W_o: the rows of W_o (PyTorch: the columns of
``linear_out.weight``) that multiply head i's output are W_o's region for head i. A head whose region is
concentrated near 0 contributes little to the layer's output. For every encoder layer this writes:

- ``layer_NN.png``: the distribution (violin + box) of the weights of each head's region, labelled with
  the head's kind (Fig. 21), and ``overview.png`` with every layer (Fig. 22);
- ``heads.tsv`` / ``heads.md``: per head its kind, mean |w|, std, and its *share* of the layer's W_o
  energy, ‖W_o,i‖²_F / Σ_j ‖W_o,j‖²_F (1/h each when heads contribute alike);
- ``proposal.md``: the "second iteration": heads with a share below ``low_share``/h are proposed for
  replacement by the kind of the layer's strongest head, and the resulting encoder in the thesis
  notation, ready for ``encoder_conf.layers``.

The thesis notes W_v carries relevance too (§6); this analysis, like the thesis', reads W_o only.
"""

from __future__ import annotations

import argparse
import math
import shutil
from pathlib import Path

import torch
import yaml

from espnet_ext.attention.multi_attention import HeadKind
from espnet_ext.errors import ConfigError, InputError
from espnet_ext.nets.multiformer_encoder import parse_blocks

PREFIX = "encoder.encoders.{}.self_attn.linear_out.weight"


def encoder_heads(config: dict, path: Path) -> list[list[HeadKind]]:
    """Head kinds of every encoder layer from an ESPnet training config (multiformer or plain)."""
    conf = config.get("encoder_conf") or {}
    heads = conf.get("attention_heads", 4)  # ESPnet's default
    if config.get("encoder") is None:
        raise InputError("no encoder in this config", path=path, key="encoder")
    if config["encoder"] == "multiformer":
        try:
            return parse_blocks(conf.get("layers"), heads)
        except ConfigError as error:
            raise InputError(str(error), path=path) from None
    return [[HeadKind("full")] * heads for _ in range(conf.get("num_blocks", 6))]


def load_state(checkpoint: Path) -> dict:
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    if isinstance(state, dict) and "model" in state and isinstance(state["model"], dict):
        state = state["model"]  # ESPnet's checkpoint.pth (model + optimiser + ...)
    if not isinstance(state, dict):
        raise InputError("not a model state dict", path=checkpoint)
    return state


def head_regions(state: dict, layers: list[list[HeadKind]], checkpoint: Path) -> list[torch.Tensor]:
    """Per layer: W_o split by head, (h, d_model, d_k) -- region i multiplies head i's output."""
    regions = []
    for index, heads in enumerate(layers):
        key = PREFIX.format(index)
        if key not in state:
            raise InputError(
                "checkpoint has no such weight (config and checkpoint differ?)", checkpoint, key=key
            )
        weight = state[key].float()  # (d_model, h·d_k): Linear's weight is W_oᵀ
        if weight.size(1) % len(heads):
            raise InputError(
                f"{weight.size(1)} inputs do not split into {len(heads)} heads", checkpoint, key=key
            )
        regions.append(weight.reshape(weight.size(0), len(heads), -1).permute(1, 0, 2))
    if PREFIX.format(len(layers)) in state:
        raise InputError(
            f"checkpoint has more than the config's {len(layers)} encoder layers", checkpoint
        )
    return regions


def head_table(layers, regions) -> list[dict]:
    rows = []
    for index, (heads, region) in enumerate(zip(layers, regions)):
        energy = region.pow(2).sum(dim=(1, 2))
        for head, (kind, values) in enumerate(zip(heads, region)):
            rows.append(
                dict(
                    layer=index,
                    head=head,
                    kind=str(kind),
                    mean_abs=values.abs().mean().item(),
                    std=values.std().item(),
                    share=(energy[head] / energy.sum()).item(),
                )
            )
    return rows


def propose(layers, rows, low_share: float) -> tuple[list[list[HeadKind]], list[dict]]:
    """Heads below ``low_share``/h take the kind of their layer's strongest head."""
    new_layers, replaced = [list(h) for h in layers], []
    for index, heads in enumerate(layers):
        mine = [r for r in rows if r["layer"] == index]
        strongest = max(mine, key=lambda r: r["share"])
        for row in mine:
            if row["share"] < low_share / len(heads) and row["kind"] != strongest["kind"]:
                new_layers[index][row["head"]] = heads[strongest["head"]]
                replaced.append({**row, "by": strongest["kind"]})
    return new_layers, replaced


def notation(layers: list[list[HeadKind]]) -> list[str]:
    """Per-layer head kinds -> blocks ``"N x (k x Kind, ...)"`` (equal consecutive layers merged)."""

    def heads_text(heads):
        runs = []
        for head in sorted(heads, key=lambda h: (h.kind, h.params)):
            if runs and runs[-1][1] == head:
                runs[-1][0] += 1
            else:
                runs.append([1, head])
        return ", ".join(f"{n} x {h}" for n, h in runs)

    blocks = []
    for heads in layers:
        text = heads_text(heads)
        if blocks and blocks[-1][1] == text:
            blocks[-1][0] += 1
        else:
            blocks.append([1, text])
    return [f"{n} x ({text})" for n, text in blocks]


def plot_layer(ax, region, heads, title):
    data = [values.flatten().numpy() for values in region]
    ax.violinplot(data, showextrema=False)
    ax.boxplot(data, widths=0.15, showfliers=False)
    ax.axhline(0.0, color="grey", linewidth=0.5)
    ax.set_xticks(range(1, len(heads) + 1), [f"{i}: {h}" for i, h in enumerate(heads)], fontsize=7)
    ax.set_title(title, fontsize=9)
    ax.set_ylabel("W_o weight")


def write_outputs(layers, regions, rows, proposal, replaced, out_dir: Path, low_share: float):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    for index, (heads, region) in enumerate(zip(layers, regions)):
        fig, ax = plt.subplots(figsize=(1.6 * len(heads) + 2, 3.5))
        plot_layer(ax, region, heads, f"encoder layer {index}: W_o regions by head")
        fig.tight_layout()
        fig.savefig(out_dir / f"layer_{index:02d}.png", dpi=110)
        plt.close(fig)
    cols = min(4, len(layers))
    rows_n = math.ceil(len(layers) / cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(4 * cols, 3 * rows_n), squeeze=False)
    for index, ax in enumerate(axes.flat):
        if index < len(layers):
            plot_layer(ax, regions[index], layers[index], f"layer {index}")
        else:
            ax.axis("off")
    fig.tight_layout()
    fig.savefig(out_dir / "overview.png", dpi=100)
    plt.close(fig)

    fields = ["layer", "head", "kind", "mean_abs", "std", "share"]
    tsv = ["\t".join(fields)] + ["\t".join(str(r[f]) for f in fields) for r in rows]
    (out_dir / "heads.tsv").write_text("\n".join(tsv) + "\n", encoding="utf-8")
    md = [
        "| layer | head | kind | mean abs(w) | std | share of W_o energy |",
        "|---:|---:|---|---:|---:|---:|",
    ]
    md += [
        f"| {r['layer']} | {r['head']} | {r['kind']} | {r['mean_abs']:.4f} | {r['std']:.4f} | {r['share']:.3f} |"
        for r in rows
    ]
    (out_dir / "heads.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    lines = [f"# Heads to replace (share < {low_share}/h of their layer's W_o energy)", ""]
    lines += [
        f"- layer {r['layer']} head {r['head']} ({r['kind']}, share {r['share']:.3f}) -> {r['by']}"
        for r in replaced
    ] or ["- none: every head carries at least that share"]
    lines += ["", "Proposed encoder_conf.layers:", "", "```yaml", "layers:"]
    lines += [f"- {block}" for block in notation(proposal)] + ["```"]
    (out_dir / "proposal.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def analyse(checkpoint: Path, config: Path, out_dir: Path, low_share: float = 0.5):
    """Runs the analysis; returns (rows, replaced heads, proposed blocks)."""
    try:
        config_dict = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as error:
        raise InputError(f"cannot read the config: {error}", path=config) from None
    layers = encoder_heads(config_dict, config)
    regions = head_regions(load_state(checkpoint), layers, checkpoint)
    rows = head_table(layers, regions)
    proposal, replaced = propose(layers, rows, low_share)
    # Written beside, then moved into place: an interrupted run leaves no out_dir that looks finished.
    partial = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    write_outputs(layers, regions, rows, proposal, replaced, partial, low_share)
    shutil.rmtree(out_dir, ignore_errors=True)
    partial.rename(out_dir)
    return rows, replaced, notation(proposal)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--config", type=Path, required=True, help="the training config.yaml")
    parser.add_argument("--out_dir", type=Path, required=True)
    parser.add_argument("--low_share", type=float, default=0.5, help="replace heads below this/h")
    args = parser.parse_args(argv)
    _, replaced, blocks = analyse(args.checkpoint, args.config, args.out_dir, args.low_share)
    print((args.out_dir / "heads.md").read_text(encoding="utf-8"))
    print(f"{len(replaced)} head(s) proposed for replacement; proposed layers: {blocks}")
    print(f"figures and tables in {args.out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
