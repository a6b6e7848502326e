"""ImageNet-1k Swin checkpoints -> our classifier's backbone, strictly, through timm's checkpoint filter.

Two formats are read:

- the official release (github.com/microsoft/Swin-Transformer, e.g. ``swin_tiny_patch4_window7_224.pth``):
  ``{'model': state_dict}``; patch merging is the *last* module of stages 1-3 (``layers.{i}.downsample``),
  and the buffers ``relative_position_index`` / ``attn_mask`` are saved with the weights;
- timm's (``timm.create_model('swin_tiny_patch4_window7_224')``, also a ``{'state_dict': ...}`` wrapper):
  patch merging is the *first* module of stages 2-4, the classifier is ``head.fc``.

timm's ``checkpoint_filter_fn`` maps either to timm's names, which are the backbone's (it is timm's Swin);
the 1000-class head is dropped (the classifier has its own head for the target classes). Every remaining
key must match the backbone exactly, in name and shape. Where timm's filter would interpolate, a
relative-position table of another window size or a patch embedding of another patch size, the checkpoint
is refused instead: fine-tune with the checkpoint's window, patch and image size (the paper's Swin-T at
224 x 224, window 7), not a silently resampled model.

    python -m espnet_ext.nets.swin.checkpoint --checkpoint swin_tiny_patch4_window7_224.pth \
        --config conf/train_swin_t_pretrained.yaml --num_classes 100 --out exp/init/swin_t.pth [-- OPTIONS]
writes the backbone weights under the classifier's names (``backbone.*``) for ESPnet's ``--init_param``.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Sequence
from pathlib import Path

import torch
from timm.models.swin_transformer import checkpoint_filter_fn

from espnet_ext.errors import InputError, reports_input_errors


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, pickle.UnpicklingError, RuntimeError, EOFError) as e:
        raise InputError(f"cannot read the checkpoint (weights only): {e}", path=path) from e
    for wrapper in ("model", "state_dict"):
        if isinstance(state, dict) and isinstance(state.get(wrapper), dict):
            state = state[wrapper]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise InputError("expected a state dict (or {'model': state_dict})", path=path)
    return state


def _refuse_resampling(
    state: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], path: str | Path
) -> None:
    """The tensors timm's filter would interpolate to fit, and tables of blocks the model lacks (the filter
    looks their module up), refused with the reason."""
    for key, value in state.items():
        if key.endswith("relative_position_bias_table"):
            if key not in expected:
                raise InputError(
                    f"checkpoint does not fit the backbone: unexpected {key}", path=path
                )
            if value.shape != expected[key].shape:
                raise InputError(
                    f"{key}: the checkpoint's relative-position table is {tuple(value.shape)} "
                    f"((2M-1)² x heads), the model's {tuple(expected[key].shape)}: another window "
                    "size or head count; use the checkpoint's (no interpolation is done)",
                    path=path,
                )
        elif key == "patch_embed.proj.weight" and value.shape[-2:] != expected[key].shape[-2:]:
            raise InputError(
                f"{key}: {tuple(value.shape[-2:])} patches in the checkpoint, "
                f"{tuple(expected[key].shape[-2:])} in the model: use the checkpoint's patch size "
                "(no resampling is done)",
                path=path,
            )


def load_backbone(backbone: torch.nn.Module, path: str | Path) -> None:
    """Load an official/timm checkpoint into ``backbone`` (a ``SwinTransformer``); every key must fit."""
    expected = backbone.state_dict()
    raw = read_state_dict(path)
    _refuse_resampling(raw, expected, path)
    state = {
        k: v for k, v in checkpoint_filter_fn(raw, backbone).items() if not k.startswith("head.")
    }
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise InputError(
            f"checkpoint does not fit the backbone: missing {missing[:6]}, unexpected {unexpected[:6]}",
            path=path,
        )
    wrong = [k for k in state if state[k].shape != expected[k].shape]
    if wrong:
        raise InputError(
            f"{wrong[0]}: shape {tuple(state[wrong[0]].shape)} in the checkpoint, "
            f"{tuple(expected[wrong[0]].shape)} in the model",
            path=path,
        )
    backbone.load_state_dict(state, strict=True)


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="ImageNet Swin checkpoint -> --init_param file")
    parser.add_argument("--checkpoint", required=True, help="official or timm Swin checkpoint")
    parser.add_argument("--config", required=True, help="the training config (builds the model)")
    parser.add_argument("--num_classes", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument(
        "training_options",
        nargs=argparse.REMAINDER,
        help="-- then options of the training that take effect after --config (a smoke run's narrower "
        "--model_conf widths): the backbone is built as the training builds it",
    )
    args = parser.parse_args(argv)
    from espnet_ext.fileio import atomic_write
    from espnet_ext.registry import build_model

    options = args.training_options
    options = options[1:] if options[:1] == ["--"] else options
    model = build_model(
        "espnet_ext.tasks.image_classification:ImageClassificationTask",
        ["--config", args.config, "--num_classes", str(args.num_classes), *options],
    )
    load_backbone(model.backbone, args.checkpoint)
    state = {f"backbone.{k}": v for k, v in model.backbone.state_dict().items()}
    with atomic_write(args.out, mode="wb") as f:
        torch.save(state, f)
    print(f"{args.out}: {len(state)} backbone tensors", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
