"""The paper's attention variants as ESPnet2 command-line overrides of any Transformer config.

    python -m espnet_ext.attention.variants --config conf/train_asr.yaml --variant relaxed_cross [--gamma 0.25]
    -> _relaxed_cross_g0.25                                                     (experiment-name suffix)
       --decoder relaxed_transformer --decoder_conf attention_sites.src_attn.gamma=0.25    (training options)

(two lines; both empty for the baseline), so a pipeline gets both from one call.

ESPnet2 merges ``--<x>_conf key.sub=value`` into the config's dict, so one training config serves every
variant and an experiment differs from the baseline by exactly the printed options. The encoder/decoder are
switched to their ``relaxed_*`` registrations (identical to ESPnet's when no site is set).

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


def variant_args(
    config: dict, variant: str, gamma: float | None = None, task: str = "asr"
) -> list[str]:
    """ESPnet2 training options turning ``config`` into ``variant``."""
    return resolve_variant(config, variant, gamma, task).options


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the training YAML the variant modifies")
    parser.add_argument("--variant", required=True, choices=sorted(VARIANTS))
    parser.add_argument(
        "--gamma", type=float, default=None, help="relaxation coefficient (default: paper's)"
    )
    parser.add_argument(
        "--task", choices=sorted(PAPER_GAMMA), default="asr", help="whose paper γ to default to"
    )
    args = parser.parse_args(argv)
    path = Path(args.config)
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise SystemExit(f"error: {path}: {e}") from None
    try:
        options, tag = resolve_variant(config, args.variant, args.gamma, args.task)
        print(tag)
        print(" ".join(options))
    except ConfigError as e:
        raise SystemExit(f"error: {path}: {e}") from None


if __name__ == "__main__":
    main()
