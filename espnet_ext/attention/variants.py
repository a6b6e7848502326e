"""The paper's attention variants as ESPnet2 command-line overrides of any Transformer config.

    python -m espnet_ext.attention.variants --config conf/train_asr.yaml --variant relaxed_cross [--gamma 0.25]
    -> _relaxed_cross_g0.25                                                     (experiment-name suffix)
       --decoder relaxed_transformer --decoder_conf attention_sites.src_attn.gamma=0.25    (training options)

(two lines; both empty for the baseline), so a pipeline gets both from one call.

ESPnet2 merges ``--<x>_conf key.sub=value`` into the config's dict, so one training config serves every
variant and an experiment differs from the baseline by exactly the printed options. The encoder/decoder are
switched to their ``relaxed_*`` registrations (identical to ESPnet's when no site is set).

The Swin rows of the paper's Table 4 (CIFAR-100, §4.4) are ``model_conf`` overrides of one Swin config
(``SWIN_ROWS``; ``--task cls``, egs/cifar100/cls1):

    python -m espnet_ext.attention.variants --config conf/train_swin_t.yaml --task cls --variant fuzzy
    -> fuzzy_g0.1_s0.03                                                     (the row's experiment tag)
       --model_conf gamma=0.1 --model_conf fuzzy_std=0.03                   (training options)

The sharp-attention paper's recognisers (§4, egs/mnist_seq/ocr1) are ``--model`` choices of one OCR config
(``SHARP_ROWS``; ``--task ocr``): soft, hard, and sharp attention with the pooling, chain or weighting
context, or supervised by reference images:

    python -m espnet_ext.attention.variants --config conf/train_ocr_paper.yaml --task ocr --variant chain
    -> chain
       --model sharp_attention --model_conf context=chain

Matched inference is not a training option: the same trained model is decoded with or without relaxation
(``--matched_inference true`` of our inference entry points), as in the paper's tables.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NamedTuple

import yaml

from espnet_ext.attention.gamma import check_gamma
from espnet_ext.errors import ConfigError

# variant -> (module, site, option); module "encoder" or "decoder"
VARIANTS: dict[str, tuple | None] = {
    "baseline": None,
    "smooth_focus": ("decoder", "src_attn", "smooth_focus"),
    "relaxed_cross": ("decoder", "src_attn", "gamma"),
    "relaxed_self": ("encoder", "self_attn", "gamma"),
}

# The paper's tuned relaxation coefficients (A.3.1: ASR; §4.3/A.3.3: MT).
PAPER_GAMMA = {
    "asr": {"relaxed_cross": 0.25, "relaxed_self": 0.01},
    "mt": {"relaxed_cross": 0.1, "relaxed_self": 0.05},
}

RELAXED_NAMES = {
    "encoder": {"transformer": "relaxed_transformer", "cnn_transformer": "relaxed_cnn_transformer"},
    "decoder": {"transformer": "relaxed_transformer"},
}


# Table 4's rows: model_conf overrides of the Swin config (espnet_ext/nets/swin/classifier.py), with γ (the
# relaxed rows; γ0 of fuzzy relaxation), σ (fuzzy) and λ of L_drloc the paper's tuned values by default.
SWIN_ROWS: dict[str, tuple[str, ...]] = {
    "baseline": (),
    "no_stochastic_depth": ("drop_path_rate=0.0",),
    "drloc": ("drloc_weight={drloc_weight}",),
    "smooth_focus": ("smooth_focus=true",),
    "relaxed": ("gamma={gamma}",),
    "relaxed_no_stochastic_depth": ("gamma={gamma}", "drop_path_rate=0.0"),
    "relaxed_drloc": ("gamma={gamma}", "drloc_weight={drloc_weight}"),
    "fuzzy": ("gamma={gamma}", "fuzzy_std={fuzzy_std}"),
}
SWIN_DEFAULTS = {"gamma": "0.1", "fuzzy_std": "0.03", "drloc_weight": "0.5"}


# The sharp-attention paper's models (espnet_ext/nets/sharp): the recogniser and, for sharp attention, its
# context (§3.2) or reference-image supervision (§4.1).
SHARP_ROWS: dict[str, tuple[str, ...]] = {
    "soft": ("--model", "soft_attention"),
    "hard": ("--model", "hard_attention"),
    "pooling": ("--model", "sharp_attention", "--model_conf", "context=pooling"),
    "chain": ("--model", "sharp_attention", "--model_conf", "context=chain"),
    "weighting": ("--model", "sharp_attention", "--model_conf", "context=weighting"),
    "reference": (
        "--model", "sharp_attention", "--model_conf", "reference_images=data/reference_digits.npy",
    ),
}  # fmt: skip


class Variant(NamedTuple):
    options: list[str]  # ESPnet2 training options, [] for the baseline
    tag: str  # experiment-name suffix: '' (baseline), '_smooth_focus', '_relaxed_self_g0.01'


def resolve_variant(
    config: dict, variant: str, gamma: float | None = None, task: str = "asr"
) -> Variant:
    """The ESPnet2 training options turning ``config`` into ``variant``, and the variant's tag."""
    if variant not in VARIANTS:
        raise ConfigError(f"unknown attention variant '{variant}' (known: {', '.join(VARIANTS)})")
    spec = VARIANTS[variant]
    if spec is None:
        return Variant([], "")
    module, site, option = spec
    name = config.get(module, "")
    relaxed = RELAXED_NAMES[module].get(name, name if name.startswith("relaxed_") else None)
    if relaxed is None:
        raise ConfigError(
            f"the {variant} variant needs a Transformer {module}, the config has '{name}'"
        )
    tag = f"_{variant}"
    if option == "gamma":
        if gamma is None:
            gamma = PAPER_GAMMA[task][variant]
        value = str(check_gamma(gamma, f"--gamma of {variant}"))
        tag += f"_g{value}"
    else:
        value = "true"
    options = [
        f"--{module}",
        relaxed,
        f"--{module}_conf",
        f"attention_sites.{site}.{option}={value}",
    ]
    return Variant(options, tag)


def resolve_swin_row(row: str, **values: str | None) -> Variant:
    """Table 4's row ``row`` as Swin training options, and its experiment tag (``<row>[_g<γ>][_s<σ>]``: the
    values as given, so a tag names what was typed). ``values``: gamma, fuzzy_std, drloc_weight (strings;
    None: the paper's)."""
    if row not in SWIN_ROWS:
        raise ConfigError(f"unknown Table 4 row '{row}' (known: {', '.join(SWIN_ROWS)})")
    unknown = set(values) - set(SWIN_DEFAULTS)
    if unknown:
        raise ConfigError(f"a Table 4 row takes no {', '.join(sorted(unknown))}")
    given = {k: values.get(k) or v for k, v in SWIN_DEFAULTS.items()}
    for name, value in given.items():
        try:
            if float(value) < 0:
                raise ValueError
        except ValueError:
            raise ConfigError(f"--{name} must be a number >= 0, got '{value}'") from None
    check_gamma(float(given["gamma"]), "--gamma")
    overrides = [o.format(**given) for o in SWIN_ROWS[row]]
    tag = row
    if any(o.startswith("gamma=") for o in overrides):
        tag += f"_g{given['gamma']}"
    if any(o.startswith("fuzzy_std=") for o in overrides):
        tag += f"_s{given['fuzzy_std']}"
    return Variant([w for o in overrides for w in ("--model_conf", o)], tag)


def resolve_sharp_row(row: str) -> Variant:
    """The sharp-attention paper's model ``row`` as OCR training options; its tag is the row's name."""
    if row not in SHARP_ROWS:
        raise ConfigError(f"unknown attention '{row}' (known: {', '.join(SHARP_ROWS)})")
    return Variant(list(SHARP_ROWS[row]), row)


def variant_args(
    config: dict, variant: str, gamma: float | None = None, task: str = "asr"
) -> list[str]:
    """ESPnet2 training options turning ``config`` into ``variant``."""
    return resolve_variant(config, variant, gamma, task).options


def _number(value: str, name: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got '{value}'") from None


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the training YAML the variant modifies")
    parser.add_argument(
        "--variant",
        required=True,
        help=f"{', '.join(VARIANTS)}; --task cls: {', '.join(SWIN_ROWS)}; --task ocr: {', '.join(SHARP_ROWS)}",
    )
    parser.add_argument("--gamma", default=None, help="relaxation coefficient (default: paper's)")
    parser.add_argument(
        "--task",
        choices=[*sorted(PAPER_GAMMA), "cls", "ocr"],
        default="asr",
        help="whose paper γ to default to; cls: Table 4's Swin rows; ocr: the sharp-attention models",
    )
    parser.add_argument("--fuzzy_std", default=None, help="cls: σ of fuzzy relaxation")
    parser.add_argument("--drloc_weight", default=None, help="cls: λ of the L_drloc rows")
    args = parser.parse_args(argv)
    path = Path(args.config)
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise SystemExit(f"error: {path}: {e}") from None
    try:
        if args.task == "cls":
            values = {"gamma": args.gamma, "fuzzy_std": args.fuzzy_std}
            options, tag = resolve_swin_row(args.variant, **values, drloc_weight=args.drloc_weight)
        elif args.task == "ocr":
            options, tag = resolve_sharp_row(args.variant)
        else:
            gamma = None if args.gamma is None else _number(args.gamma, "--gamma")
            options, tag = resolve_variant(config, args.variant, gamma, args.task)
        print(tag)
        print(" ".join(options))
    except ConfigError as e:
        raise SystemExit(f"error: {path}: {e}") from None


if __name__ == "__main__":
    main()
