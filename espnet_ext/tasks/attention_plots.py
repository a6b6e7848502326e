"""Attention plots need attention weights: refuse ``num_att_plot`` for a model that keeps none.

ESPnet's trainer plots, after each epoch's validation, the weights of every ``MultiHeadedAttention`` of the
model on ``num_att_plot`` utterances: a forward hook reads the module's ``attn`` (espnet2
``calculate_all_attentions``). A module that computes its attention without materialising the weights leaves
``attn`` None and the plot fails there, after the epoch's training and before its checkpoint:

- ESPnet's own ``use_sdpa`` (PyTorch's fused ``scaled_dot_product_attention``; the AV-HuBERT encoder and the
  ``relaxed_transformer`` decoder pass it on),
- a Multiformer layer without Full heads (Local, Conv and Fast heads have no T x T matrix),
- relaxed attention with matched inference through the fused path.

``AttentionPlotCheck`` (a base of every training task of ours) checks when the task builds the optimizers,
the first step after the model that only training takes, with ESPnet's own condition for plotting
(``num_att_plot`` != 0 and ``use_matplotlib``).
"""

from __future__ import annotations

import argparse

import torch
from espnet.nets.pytorch_backend.transformer.attention import MultiHeadedAttention

from espnet_ext.errors import ConfigError


def weightless_reason(module: torch.nn.Module) -> str | None:
    """Why ``module``'s evaluation forward leaves no weights in ``attn``; None when it keeps them (or is no
    ESPnet attention)."""
    if not isinstance(module, MultiHeadedAttention):
        return None
    if getattr(module, "use_sdpa", False):
        return "use_sdpa: PyTorch's fused attention keeps no weights"
    return getattr(module, "weightless_reason", None)


def check_attention_plots(model: torch.nn.Module, args: argparse.Namespace) -> None:
    """ConfigError naming ``num_att_plot`` and the first module that would fail ESPnet's attention plots."""
    if not getattr(args, "num_att_plot", 0) or not getattr(args, "use_matplotlib", True):
        return
    for name, module in model.named_modules():
        reason = weightless_reason(module)
        if reason is not None:
            raise ConfigError(
                f"{name}: {reason}, and ESPnet plots the weights of {args.num_att_plot} utterances after "
                "each epoch's validation: set num_att_plot: 0",
                path=getattr(args, "config", None),
                key="num_att_plot",
            )


class AttentionPlotCheck:
    """Task mixin (first base): ``check_attention_plots`` before the optimizers are built."""

    @classmethod
    def build_optimizers(cls, args: argparse.Namespace, model: torch.nn.Module):
        check_attention_plots(model, args)
        return super().build_optimizers(args, model)
