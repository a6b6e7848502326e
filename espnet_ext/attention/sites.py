"""Per-site attention configuration of ESPnet encoder/decoder layers.

A *site* is an attention attribute of ESPnet's layers: ``self_attn`` in encoder layers, ``self_attn`` (masked
self-attention) and ``src_attn`` (cross attention) in decoder layers. A model config names the sites to
change and how, e.g. in ``decoder_conf``::

    attention_sites:
        src_attn: {gamma: 0.25, matched_inference: false}

Sites not named keep ESPnet's attention. Unknown sites or options, and γ outside [0, 1], raise
``ConfigError`` while the model is built, i.e. before any training starts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import torch

from espnet_ext.attention.gamma import check_gamma
from espnet_ext.attention.relaxed import RelaxedMultiHeadedAttention
from espnet_ext.errors import ConfigError

SITE_OPTIONS = ("gamma", "matched_inference", "smooth_focus", "fused")


def check_site_config(sites: Mapping | None, available: Sequence[str], owner: str) -> dict:
    """Validated copy of an ``attention_sites`` mapping: {site: {option: value}}."""
    if not sites:
        return {}
    if not isinstance(sites, Mapping):
        raise ConfigError(f"{owner}: attention_sites must map site names to options, got {sites!r}")
    checked = {}
    for site, options in sites.items():
        if site not in available:
            raise ConfigError(
                f"{owner}: no attention site '{site}' (it has: {', '.join(available)})"
            )
        options = dict(options or {})
        unknown = sorted(set(options) - set(SITE_OPTIONS))
        if unknown:
            raise ConfigError(
                f"{owner}: attention_sites.{site}: unknown option(s) {', '.join(unknown)} "
                f"(known: {', '.join(SITE_OPTIONS)})"
            )
        if "gamma" in options:
            check_gamma(options["gamma"], f"{owner}: attention_sites.{site}.gamma")
        checked[site] = options
    return checked


def configure_attention_sites(layers: Iterable[torch.nn.Module], sites: Mapping) -> None:
    """Swap the named attention modules of every layer for relaxed ones sharing their parameters."""
    for layer in layers:
        for site, options in sites.items():
            setattr(
                layer,
                site,
                RelaxedMultiHeadedAttention.from_attention(getattr(layer, site), **options),
            )
