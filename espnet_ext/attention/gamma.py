"""The relaxation coefficient γ and its valid range (kept free of torch/ESPnet imports: shell tools use it)."""

import math

from espnet_ext.errors import ConfigError


def check_gamma(gamma: float, where: str = "gamma") -> float:
    gamma = float(gamma)
    if math.isnan(gamma) or not 0.0 <= gamma <= 1.0:
        raise ConfigError(f"{where}: the relaxation coefficient must lie in [0, 1], got {gamma}")
    return gamma
