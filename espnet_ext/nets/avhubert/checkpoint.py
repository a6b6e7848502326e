"""Released AV-HuBERT checkpoints (fairseq format) -> our lip-reading model's front-end and encoder.

A fairseq checkpoint is a ``torch.load``-able dict with ``model`` (the state dict) and ``cfg`` (or
``args`` in older releases). Two layouts are read:

- pre-trained (``AVHubertModel``): ``feature_extractor_video.resnet.*`` (3D conv + ResNet-18),
  ``feature_extractor_video.proj``, ``layer_norm`` (over the fused audio/video channels),
  ``post_extract_proj``, ``encoder.*`` (fairseq's wav2vec 2.0 TransformerEncoder: ``pos_conv.0`` with
  weight norm, ``layers.N.self_attn.{q,k,v,out}_proj``, ``self_attn_layer_norm``, ``fc1``, ``fc2``,
  ``final_layer_norm``; ``layer_norm``);
- fine-tuned (``AVHubertSeq2Seq``): the same under ``encoder.w2v_model.``, plus ``decoder.*``.

The name map is strict: every tensor of the checkpoint is either mapped onto one of ours or belongs to a
part that a video-only recognizer does not use (``IGNORED``: the audio stream, the pre-training heads,
and the fine-tuned decoder whose vocabulary is fairseq's, not ours); every tensor of our front-end and
encoder must be filled, with the same shape. Anything else is an ``InputError`` listing all offending
tensors. The architecture in the checkpoint's config (layers, width, heads, pre-LN) is checked too:
attention heads cannot be seen in tensor shapes.

    python -m espnet_ext.nets.avhubert.checkpoint --checkpoint large_vox_iter5.pt \
        --config conf/train_vsr_large.yaml --token_list data/token_list/pretrain_trainval/bpe_unigram1000/tokens.txt \
        --out exp/avhubert_init.pth

writes the mapped tensors as an ESPnet state dict for training's ``--init_param exp/avhubert_init.pth``;
options after ``--`` are the training's own that shape the model (asr.sh passes a smoke run's widths).

fairseq is not needed: a checkpoint pickles fairseq objects next to the tensors (the task state's
``fairseq.data.dictionary.Dictionary``, the dataclasses and enums behind an omegaconf ``cfg``, AV-HuBERT's
own ``avhubert.*`` config classes), and ``read_checkpoint`` unpickles those as inert stand-ins that only
hold their pickled state. It is also a restricted unpickler: besides those two families only tensors,
numpy arrays, omegaconf containers, ``argparse.Namespace`` and plain Python values are rebuilt; any other
class or function in a checkpoint (``os.system``, say) is refused, naming it. (``torch.load``'s
``weights_only`` mode cannot be used: it cannot stand in for classes that are not importable, and omegaconf
rebuilds its nodes through classes that mode does not allow.)
"""

from __future__ import annotations

import _compat_pickle
import argparse
import pickle
import re
import sys
import types
from collections.abc import Mapping
from pathlib import Path

import torch

from espnet_ext.errors import ConfigError, InputError, reports_input_errors
from espnet_ext.fileio import atomic_write

FINETUNED_PREFIX = "encoder.w2v_model."

# fairseq name (regular expression, after the fine-tuned prefix is removed) -> our name template.
RULES = [
    (r"feature_extractor_video\.resnet\.(.+)", r"frontend.res_encoder.\1"),
    (r"feature_extractor_video\.proj\.(weight|bias)", r"encoder.video_proj.\1"),
    (r"layer_norm\.(weight|bias)", r"encoder.fuse_norm.\1"),
    (r"post_extract_proj\.(weight|bias)", r"encoder.post_proj.\1"),
    (r"encoder\.pos_conv\.0\.(weight_g|weight_v|bias)", r"encoder.pos_conv.\1"),
    # fairseq >= 0.12 with torch's parametrized weight norm: original0 = g, original1 = v
    (r"encoder\.pos_conv\.0\.parametrizations\.weight\.original0", r"encoder.pos_conv.weight_g"),
    (r"encoder\.pos_conv\.0\.parametrizations\.weight\.original1", r"encoder.pos_conv.weight_v"),
    (r"encoder\.layers\.(\d+)\.self_attn\.q_proj\.(weight|bias)", r"encoder.layers.\1.self_attn.linear_q.\2"),
    (r"encoder\.layers\.(\d+)\.self_attn\.k_proj\.(weight|bias)", r"encoder.layers.\1.self_attn.linear_k.\2"),
    (r"encoder\.layers\.(\d+)\.self_attn\.v_proj\.(weight|bias)", r"encoder.layers.\1.self_attn.linear_v.\2"),
    (r"encoder\.layers\.(\d+)\.self_attn\.out_proj\.(weight|bias)", r"encoder.layers.\1.self_attn.linear_out.\2"),
    (r"encoder\.layers\.(\d+)\.(self_attn_layer_norm|fc1|fc2|final_layer_norm)\.(weight|bias)",
     r"encoder.layers.\1.\2.\3"),
    (r"encoder\.layer_norm\.(weight|bias)", r"encoder.layer_norm.\1"),
]  # fmt: skip

# Checkpoint parts a video-only recognizer does not use, with the reason (listed when loading).
IGNORED = {
    r"feature_extractor_audio\..+": "audio stream",
    r"mask_emb": "pre-training mask embedding",
    r"label_embs_concat": "pre-training cluster embeddings",
    r"final_proj\..+": "pre-training projection head",
    r"target_glu\..+": "pre-training target GLU",
    r"decoder\..+": "fine-tuned decoder (fairseq's vocabulary, not the recipe's token list)",
}

# Our parts that a checkpoint fills (the rest -- decoder, CTC -- is trained from scratch).
LOADED_PREFIXES = ("frontend.", "encoder.")


# Top-level packages whose classes a checkpoint may name without being importable here: fairseq's, and the
# AV-HuBERT user dir that fairseq imports as "avhubert" (facebookresearch/av_hubert, avhubert/__init__.py).
STAND_IN_PACKAGES = ("fairseq", "fairseq_cli", "avhubert")

# Everything else a checkpoint may name: (module, name), or (module, None) for all of a module's names.
_ALLOWED = {
    ("collections", "OrderedDict"),
    ("collections", "defaultdict"),
    ("argparse", "Namespace"),
    ("copyreg", "_reconstructor"),
    ("typing", "Any"),
    ("pathlib", "PosixPath"),
    ("pathlib", "WindowsPath"),
    ("torch._utils", None),  # _rebuild_tensor_v2, _rebuild_parameter, ...
    ("torch.nn.parameter", "Parameter"),
    ("torch", "Size"),
    ("torch", "device"),
    *((f"numpy{core}.multiarray", name) for core in (".core", "._core") for name in ("_reconstruct", "scalar")),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.dtypes", None),
    *(("builtins", name) for name in ("int", "float", "str", "bool", "bytes", "complex", "list", "tuple",
                                       "dict", "set", "frozenset", "slice", "object", "bytearray")),
}  # fmt: skip
_ALLOWED_PACKAGES = ("omegaconf",)  # its containers, nodes and metadata (pure data classes)


class StandIn:
    """An object of a class that is not importable here: its constructor arguments and pickled state."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs

    def __setstate__(self, state):
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
            state = {**(state[0] or {}), **state[1]}  # (dict, slots)
        if isinstance(state, dict):
            self.__dict__.update(state)
        else:
            self.state = state

    def __repr__(self):
        return f"<stand-in for {type(self).__module__}.{type(self).__qualname__}>"


_stand_ins: dict[tuple[str, str], type] = {}


def stand_in(module: str, name: str) -> type:
    """The inert class standing in for ``module.name`` (one per name, so identity checks hold)."""
    if (module, name) not in _stand_ins:
        cls = type(
            name.rsplit(".", 1)[-1], (StandIn,), {"__module__": module, "__qualname__": name}
        )
        _stand_ins[module, name] = cls
    return _stand_ins[module, name]


class FairseqUnpickler(pickle.Unpickler):
    """Stand-ins for fairseq's and AV-HuBERT's classes, the allowed classes above, nothing else."""

    def find_class(self, module, name):
        # Python 2 names, as protocol 2 (torch.save's) writes builtins: pickle maps them the same way
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[module, name]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        if module.split(".")[0] in STAND_IN_PACKAGES:
            return stand_in(module, name)
        torch_dtype = module == "torch" and isinstance(getattr(torch, name, None), torch.dtype)
        allowed = (module, name) in _ALLOWED or (module, None) in _ALLOWED or torch_dtype
        if allowed or module.split(".")[0] in _ALLOWED_PACKAGES:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"refused to load {module}.{name} (not part of a fairseq checkpoint)"
        )


# torch.load's pickle_module: a module with this Unpickler (torch subclasses it for tensor storages)
_fairseq_pickle = types.ModuleType("fairseq_pickle")
_fairseq_pickle.Unpickler = FairseqUnpickler
_fairseq_pickle.load = lambda file, **kwargs: FairseqUnpickler(file, **kwargs).load()


def read_checkpoint(path: str | Path) -> tuple[dict[str, torch.Tensor], dict]:
    """``(state dict, model config)`` of a fairseq checkpoint; the config is {} when it has none."""
    try:
        content = torch.load(
            path, map_location="cpu", pickle_module=_fairseq_pickle, weights_only=False
        )
    except (
        OSError,
        RuntimeError,
        EOFError,
        ImportError,
        AttributeError,
        pickle.UnpicklingError,
    ) as e:
        raise InputError(f"cannot read a fairseq checkpoint: {e}", path=path) from e
    if not isinstance(content, Mapping) or not isinstance(content.get("model"), Mapping):
        raise InputError("not a fairseq checkpoint: no 'model' state dict", path=path)
    return dict(content["model"]), _model_config(content)


def _model_config(content: Mapping) -> dict:
    """The encoder's settings: ``cfg.model`` (``cfg.model.w2v_args.model`` when fine-tuned) or ``args``."""
    cfg = content.get("cfg") or {}
    if cfg:
        model = dict(cfg.get("model") or {})
        inner = (model.get("w2v_args") or {}).get("model") if "w2v_args" in model else None
        return dict(inner) if inner else model
    args = content.get("args")
    return dict(vars(args)) if args is not None else {}


def map_names(state: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """``(our name -> tensor, ignored checkpoint name -> reason)``; unmapped names raise ``InputError``."""
    finetuned = any(name.startswith(FINETUNED_PREFIX) for name in state)
    mapped, ignored, unmapped = {}, {}, []
    for name, tensor in state.items():
        inner = name
        if finetuned:
            inner = name[len(FINETUNED_PREFIX) :] if name.startswith(FINETUNED_PREFIX) else None
            if inner is None and re.fullmatch(r"decoder\..+", name):
                ignored[name] = IGNORED[r"decoder\..+"]
                continue
        target = None if inner is None else _our_name(inner)
        if target is not None:
            mapped[target] = tensor
            continue
        reason = None if inner is None else next(
            (why for pattern, why in IGNORED.items() if re.fullmatch(pattern, inner)), None
        )  # fmt: skip
        if reason is None:
            unmapped.append(name)
        else:
            ignored[name] = reason
    if unmapped:
        raise InputError(f"{len(unmapped)} checkpoint tensor(s) have no counterpart: "
                         + ", ".join(sorted(unmapped)))  # fmt: skip
    return mapped, ignored


def _our_name(name: str) -> str | None:
    for pattern, template in RULES:
        match = re.fullmatch(pattern, name)
        if match:
            return match.expand(template)
    return None


def check_architecture(config: Mapping, model: torch.nn.Module) -> None:
    """The checkpoint's encoder settings against ours (those its tensor shapes cannot show)."""
    encoder = model.encoder
    ours = {
        "encoder_layers": len(encoder.layers),
        "encoder_embed_dim": encoder.output_size(),
        "encoder_attention_heads": encoder.layers[0].self_attn.h if len(encoder.layers) else None,
        "layer_norm_first": encoder.layer_norm_first,
        "modality_fuse": encoder.modality_fuse,
    }
    differing = [f"{key}: checkpoint {config[key]!r}, config {value!r}"
                 for key, value in ours.items() if key in config and config[key] != value]  # fmt: skip
    if differing:
        raise ConfigError("the checkpoint's architecture differs from the encoder_conf: "
                          + "; ".join(differing))  # fmt: skip


def load_avhubert(model: torch.nn.Module, path: str | Path) -> dict[str, str]:
    """Fill ``model.frontend`` and ``model.encoder`` from a checkpoint; returns the ignored tensors."""
    state, config = read_checkpoint(path)
    try:
        check_architecture(config, model)
        mapped, ignored = map_names(state)
        ours = {k: v for k, v in model.state_dict().items() if k.startswith(LOADED_PREFIXES)}
        problems = [f"missing: {name}" for name in sorted(set(ours) - set(mapped))]
        problems += [f"not in the model: {name}" for name in sorted(set(mapped) - set(ours))]
        problems += [
            f"shape of {name}: checkpoint {tuple(mapped[name].shape)}, model {tuple(ours[name].shape)}"
            for name in sorted(set(ours) & set(mapped))
            if mapped[name].shape != ours[name].shape
        ]
        if problems:
            raise InputError(f"does not fit the model ({len(problems)} problem(s)): "
                             + "; ".join(problems))  # fmt: skip
    except InputError as e:
        raise type(e)(e.message, path=path) from e
    model.load_state_dict({**model.state_dict(), **mapped})
    return ignored


@reports_input_errors
def main(argv=None) -> None:
    from espnet_ext.registry import build_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, help="fairseq AV-HuBERT checkpoint (.pt)")
    parser.add_argument("--config", required=True, help="the lip-reading training YAML")
    parser.add_argument("--token_list", required=True)
    parser.add_argument("--out", required=True, help="ESPnet state dict for --init_param")
    parser.add_argument(
        "model_args",
        nargs=argparse.REMAINDER,
        help="-- then further options of the training the model is built for (a smoke run's widths)",
    )
    args = parser.parse_args(argv)
    extra = args.model_args[1:] if args.model_args[:1] == ["--"] else args.model_args
    model = build_model(
        "espnet_ext.tasks.lip_reading:LipReadingTask",
        ["--config", args.config, "--token_list", args.token_list, *extra],
    )
    ignored = load_avhubert(model, args.checkpoint)
    for name, reason in sorted(ignored.items()):
        print(f"not used: {name} ({reason})", file=sys.stderr)
    state = {k: v for k, v in model.state_dict().items() if k.startswith(LOADED_PREFIXES)}
    with atomic_write(args.out, mode="wb") as out:
        torch.save(state, out)
    print(f"{args.out}: {len(state)} tensors from {args.checkpoint}")


if __name__ == "__main__":
    sys.exit(main())
