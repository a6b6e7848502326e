"""fairseq's SpecAugment per utterance, on a padded batch (``specaug: utterance_specaug``, and the masks of
``normalize: utterance_cmvn_specaug``).

fairseq's ``SpecAugmentTransform`` (``fairseq/data/audio/feature_transforms/specaugment.py``) transforms one
utterance of n frames and D bins at a time, with numpy's ``randint(lo, hi)`` (lo .. hi - 1):

- ``freq_mask_N`` times: width f = randint(0, F), first bin f0 = randint(0, D - f), bins f0 .. f0 + f - 1;
- T' = min(T, floor(n * p)); none if T' < 1; else ``time_mask_N`` times: width t = randint(0, T'), first frame
  t0 = randint(0, n - t), frames t0 .. t0 + t - 1 (so never the utterance's last frame);
- masked values: ``mask_value``, or where it is None (the S2T recipes' configs set none) the utterance's mean
  over all its frames and bins; nothing at all when D < F.

ESPnet's ``SpecAug`` (``espnet2/layers/mask_along_axis.py``) draws time positions over the batch's padded
length and one position range from the batch's widest mask, so a short utterance among long ones gets its
masks in its padding and none on its speech. Here every draw is the utterance's own: one uniform u per
randint, randint(lo, hi) = lo + floor(u (hi - lo)), the uniforms one (B, N_freq + N_time, 2) draw, so an
utterance's masks depend on its row of that draw and its own length only; padded frames are never touched.

Options, as ESPnet's ``SpecAug`` names them in the configs: ``freq_mask_width_range: [0, F]`` (ESPnet's
widths are also randint(lo, hi); fairseq's start at 0), ``num_freq_mask: N_freq``,
``time_mask_width_range: [0, T]``, ``num_time_mask: N_time``, ``apply_*_mask``; fairseq's ``time_mask_p`` (p,
1.0 in its LB / LD policies, 0.2 in SM / SS) and ``mask_value``. Time warping is not offered: every fairseq S2T
policy sets ``time_wrap_W: 0`` (and ``from_config_dict`` reads ``time_warp_W``, so it is 0 either way).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from espnet2.asr.specaug.abs_specaug import AbsSpecAug

from espnet_ext.errors import ConfigError
from espnet_ext.nets.padding import padding_mask


def _upper(width_range: int | Sequence[int], name: str) -> int:
    """[0, F] (or F) -> F: fairseq's widths are randint(0, F)."""
    if isinstance(width_range, int):
        width_range = (0, width_range)
    if len(width_range) != 2 or width_range[0] != 0 or width_range[1] < 1:
        raise ConfigError(
            f"must be [0, F] with F >= 1 (fairseq draws widths randint(0, F)), got {list(width_range)}",
            key=f"specaug_conf.{name}",
        )
    return int(width_range[1])


def randint(u: torch.Tensor, lo: torch.Tensor | int, hi: torch.Tensor | int) -> torch.Tensor:
    """numpy's randint(lo, hi) from uniforms u in [0, 1): lo + floor(u (hi - lo)), kept below hi (hi > lo)."""
    span = torch.as_tensor(hi, device=u.device) - lo
    return lo + torch.minimum((u * span).floor().long(), (span - 1).clamp(min=0))


class UtteranceSpecAugment(AbsSpecAug):
    def __init__(
        self,
        apply_time_warp: bool = False,
        apply_freq_mask: bool = True,
        freq_mask_width_range: int | Sequence[int] = (0, 27),
        num_freq_mask: int = 1,
        apply_time_mask: bool = True,
        time_mask_width_range: int | Sequence[int] = (0, 100),
        num_time_mask: int = 1,
        time_mask_p: float = 1.0,
        mask_value: float | None = None,
        **unknown,
    ):
        super().__init__()
        if unknown:
            raise ConfigError(
                f"unknown option(s) {sorted(unknown)} of fairseq's per-utterance SpecAugment",
                key="specaug_conf",
            )
        if apply_time_warp:
            raise ConfigError(
                "time warping is not offered: fairseq's S2T SpecAugment policies set time_wrap_W 0",
                key="specaug_conf.apply_time_warp",
            )
        if not 0.0 <= time_mask_p <= 1.0:
            raise ConfigError(
                f"must be in [0, 1], got {time_mask_p}", key="specaug_conf.time_mask_p"
            )
        self.freq_mask_n = num_freq_mask if apply_freq_mask else 0
        self.freq_mask_f = _upper(freq_mask_width_range, "freq_mask_width_range")
        self.time_mask_n = num_time_mask if apply_time_mask else 0
        self.time_mask_t = _upper(time_mask_width_range, "time_mask_width_range")
        self.time_mask_p = float(time_mask_p)
        self.mask_value = mask_value

    def extra_repr(self) -> str:
        return (
            f"freq_mask_N={self.freq_mask_n}, freq_mask_F={self.freq_mask_f}, time_mask_N={self.time_mask_n}, "
            f"time_mask_T={self.time_mask_t}, time_mask_p={self.time_mask_p}, mask_value={self.mask_value}"
        )

    def draw(
        self, lengths: torch.Tensor, num_bins: int, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Widths and first bins (B, N_freq), widths and first frames (B, N_time) of each utterance."""
        device = lengths.device if generator is None else generator.device
        u = torch.rand(
            (lengths.numel(), self.freq_mask_n + self.time_mask_n, 2),
            generator=generator,
            dtype=torch.float64,
            device=device,
        ).to(lengths.device)
        uf, ut = u[:, : self.freq_mask_n], u[:, self.freq_mask_n :]
        f = randint(uf[..., 0], 0, self.freq_mask_f)
        f0 = randint(uf[..., 1], 0, num_bins - f)
        # math.floor(n * p) in float64 as fairseq; T' < 1 leaves t = 0: no time mask
        longest = (lengths.double() * self.time_mask_p).floor().long().clamp(max=self.time_mask_t)
        t = randint(ut[..., 0], 0, longest[:, None].clamp(min=0))
        t0 = randint(ut[..., 1], 0, lengths[:, None] - t)
        return f, f0, t, t0

    def masks(
        self,
        lengths: torch.Tensor,
        num_frames: int,
        num_bins: int,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """(B, num_frames, num_bins) True where fairseq's transform of each utterance alone masks."""
        f, f0, t, t0 = self.draw(lengths, num_bins, generator)
        bins = torch.arange(num_bins, device=lengths.device)
        frames = torch.arange(num_frames, device=lengths.device)
        band = ((f0[..., None] <= bins) & (bins < (f0 + f)[..., None])).any(1)  # (B, D)
        span = ((t0[..., None] <= frames) & (frames < (t0 + t)[..., None])).any(1)  # (B, T)
        valid = frames < lengths[:, None]
        mask = (band[:, None, :] | span[:, :, None]) & valid[:, :, None]
        # fairseq returns a spectrogram of fewer bins than F untouched
        return mask & (num_bins >= self.freq_mask_f)

    def forward(
        self,
        x: torch.Tensor,
        x_lengths: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x`` (B, T, D) -> masked copy (padded frames as they were), ``x_lengths``."""
        lengths = x_lengths
        if lengths is None:
            lengths = x.new_full([x.size(0)], x.size(1), dtype=torch.long)
        lengths = lengths.to(x.device)
        mask = self.masks(lengths, x.size(1), x.size(2), generator)
        if self.mask_value is not None:
            value = x.new_full([x.size(0), 1, 1], self.mask_value)
        else:  # fairseq's "local mean": the utterance's own frames, all bins
            valid = (~padding_mask(lengths, x.size(1))).to(x.dtype)
            total = (x * valid[..., None]).sum((1, 2))
            value = (total / (lengths.to(x.dtype) * x.size(2)).clamp(min=1.0))[:, None, None]
        return torch.where(mask, value, x), x_lengths
