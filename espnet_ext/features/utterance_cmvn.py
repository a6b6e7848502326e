"""fairseq's utterance CMVN as an ESPnet2 normalisation (``normalize: utterance_cmvn | utterance_cmvn_specaug``).

Per utterance and feature dimension over its own frames: y = (x - mean) / sqrt(max(var, 1e-10)), var the
population variance (fairseq ``data/audio/feature_transforms/utterance_cmvn.py``, the transform of its
MuST-C and mTEDx S2T recipes, which the Multiformer and head-selection papers follow). Padded frames stay 0.

ESPnet's ``utterance_mvn`` with ``norm_vars: true`` is not this on a padded batch: after subtracting the
mean its padded frames hold -mean and enter the variance (espnet2/layers/utterance_mvn.py), so every
utterance shorter than the batch's longest gets a larger std.

Order: ESPnet's models normalise after SpecAugment (``ESPnetASRModel.encode``: frontend, specaug, normalize),
fairseq's S2T recipes before it: their data config lists ``transforms: {_train: [utterance_cmvn, specaugment],
'*': [utterance_cmvn]}`` (fairseq ``examples/speech_to_text/data_utils.py`` gen_config_yaml) and the
``specaugment`` transform masks with the mean of the already normalised utterance (its config sets no
``mask_value``: ``SpecAugmentTransform.from_config_dict`` passes None, "use local mean"), i.e. 0. With
``normalize: utterance_cmvn`` the masked frames (0 in the log-mel domain) enter each band's statistics
instead and come out at -mean/std (a masked band is constant and comes out 0 either way).
``normalize: utterance_cmvn_specaug`` (``UtteranceCMVNSpecAug``) is fairseq's order: the CMVN, then, in
training only, fairseq's per-utterance SpecAugment (``espnet_ext.features.specaugment``) built from
``normalize_conf.specaug_conf`` (masks at the normalised utterance's mean, 0); the config sets
``specaug: null``. It sits in the normalisation slot because the pipelines give ESPnet features
(``--input_size``), and ESPnet's ASR/ST tasks then build no frontend (``frontend: null``), so a frontend
cannot run before SpecAugment; the module has no parameters, so its checkpoints are
``utterance_cmvn``'s.
"""

from __future__ import annotations

import torch
from espnet2.layers.abs_normalize import AbsNormalize

from espnet_ext.errors import ConfigError
from espnet_ext.features.specaugment import UtteranceSpecAugment


class UtteranceCMVN(AbsNormalize):
    def __init__(self, min_var: float = 1.0e-10):
        super().__init__()
        self.min_var = min_var

    def extra_repr(self) -> str:
        return f"min_var={self.min_var}"

    def forward(
        self, x: torch.Tensor, ilens: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``x`` (B, T, D), ``ilens`` (B,) -> normalised (B, T, D) with padded frames 0, ``ilens``."""
        if ilens is None:
            ilens = x.new_full([x.size(0)], x.size(1), dtype=torch.long)
        valid = torch.arange(x.size(1), device=x.device)[None, :] < ilens.to(x.device)[:, None]
        valid = valid.unsqueeze(-1).to(x.dtype)  # (B, T, 1)
        n = valid.sum(1, keepdim=True).clamp(min=1.0)
        mean = (x * valid).sum(1, keepdim=True) / n
        var = ((x - mean).pow(2) * valid).sum(1, keepdim=True) / n
        return (x - mean) / var.clamp(min=self.min_var).sqrt() * valid, ilens


class UtteranceCMVNSpecAug(UtteranceCMVN):
    """fairseq's S2T feature transforms in their order: utterance CMVN, then (training only) SpecAugment."""

    def __init__(self, specaug_conf: dict | None = None, min_var: float = 1.0e-10):
        super().__init__(min_var)
        if not isinstance(specaug_conf, dict) or not specaug_conf:
            raise ConfigError(
                "utterance_cmvn_specaug needs SpecAugment's options (ESPnet SpecAug's names, fairseq's time_mask_p)",
                key="normalize_conf.specaug_conf",
            )
        self.specaug = UtteranceSpecAugment(**specaug_conf)

    def forward(
        self, x: torch.Tensor, ilens: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        x, ilens = super().forward(x, ilens)
        if self.training:  # ESPnet's encode runs its own specaug slot in training only, as here
            x, ilens = self.specaug(x, ilens)
        return x, ilens
