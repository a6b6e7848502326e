"""ImageNet-1k Swin checkpoints -> our classifier's backbone, strictly.

Two formats are read:

- the official release (github.com/microsoft/Swin-Transformer, e.g. ``swin_tiny_patch4_window7_224.pth``):
  ``{'model': state_dict}``; patch merging is the *last* module of stages 1-3 (``layers.{i}.downsample``),
  and the buffers ``relative_position_index`` / ``attn_mask`` are saved with the weights;
- timm's (``timm.create_model('swin_tiny_patch4_window7_224')``, also a ``{'state_dict': ...}`` wrapper):
  patch merging is the *first* module of stages 2-4, the classifier is ``head.fc``.

Our names are timm's without ``head``: official ``layers.{i}.downsample`` -> ``layers.{i+1}.downsample``,
buffers dropped (ours are rebuilt from the window size), the 1000-class head dropped (the classifier has
its own head for the target classes). Every remaining key must match the backbone exactly, in name and
shape; a relative-position table of another window size is refused (no interpolation: fine-tune with the
checkpoint's window size and image size).

    python -m espnet_ext.nets.swin.checkpoint --checkpoint swin_tiny_patch4_window7_224.pth \
        --config conf/train_swin_t_pretrained.yaml --num_classes 100 --out exp/init/swin_t.pth [-- OPTIONS]
writes the backbone weights under the classifier's names (``backbone.*``) for ESPnet's ``--init_param``.
"""

from __future__ import annotations

import argparse
import pickle
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from espnet_ext.errors import InputError, reports_input_errors

_BUFFERS = ("relative_position_index", "attn_mask")


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


def to_backbone_names(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Official or timm names -> ours; heads and saved buffers dropped."""
    official = any(k.startswith("layers.0.downsample.") for k in state)
    mapped = {}
    for key, value in state.items():
        if key.startswith("head.") or key.rsplit(".", 1)[-1] in _BUFFERS:
            continue
        if official:
            key = re.sub(
                r"^layers\.(\d+)\.downsample\.",
                lambda m: f"layers.{int(m.group(1)) + 1}.downsample.",
                key,
            )
        mapped[key] = value
    return mapped


def load_backbone(backbone: torch.nn.Module, path: str | Path) -> None:
    """Load an official/timm checkpoint into ``backbone`` (a ``SwinTransformer``); every key must fit."""
    state = to_backbone_names(read_state_dict(path))
    expected = backbone.state_dict()
    for key, value in state.items():
        table = key.endswith("relative_position_bias_table") and key in expected
        if table and value.shape != expected[key].shape:
            raise InputError(
                f"{key}: the checkpoint's relative-position table is {tuple(value.shape)} "
                f"((2M-1)² x heads), the model's {tuple(expected[key].shape)}: another window "
                "size or head count; use the checkpoint's (no interpolation is done)",
                path=path,
            )
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
