"""Cutoff augmentation for machine translation (Shen et al., 2020), as used by the relaxed-attention paper (§4.3).

Each training batch is encoded once as is and ``num_augmented`` more times with parts of the *embedded* source
erased:
- token cutoff: ``floor(token_rate * length)`` random positions of each sentence set to zero,
- feature cutoff: ``floor(feature_rate * dim)`` random embedding dimensions of each sentence set to zero.
The loss is the mean cross entropy over the original and augmented copies plus ``js_weight`` times the
Jensen-Shannon divergence among their predicted token distributions (a consistency loss):

    L = 1/(N+1) sum_i CE_i + js_weight * JS(p_0, ..., p_N),
    JS = 1/(N+1) sum_i KL(p_i || m),   m = 1/(N+1) sum_i p_i     (mean over target tokens).

At inference (``eval()``) the model is ESPnet's ``ESPnetMTModel`` unchanged.
"""

from __future__ import annotations

import torch
from espnet.nets.pytorch_backend.nets_utils import make_pad_mask, th_accuracy
from espnet.nets.pytorch_backend.transformer.add_sos_eos import add_sos_eos
from espnet2.mt.espnet_model import ESPnetMTModel
from espnet2.torch_utils.device_funcs import force_gatherable

from espnet_ext.errors import ConfigError


def check_rate(name: str, rate: float) -> float:
    if not 0.0 <= rate < 1.0:
        raise ConfigError(f"{name} must be in [0, 1): a rate of {rate} would erase the whole input")
    return rate


def token_cutoff(feats: torch.Tensor, lengths: torch.Tensor, rate: float) -> torch.Tensor:
    """Zero ``floor(rate * length)`` random valid positions of each sequence of ``feats`` (B, T, D)."""
    if rate == 0.0:
        return feats
    b, t, _ = feats.shape
    scores = torch.rand(b, t, device=feats.device).masked_fill(
        make_pad_mask(lengths, maxlen=t).to(feats.device), 2.0
    )
    ranks = scores.argsort(dim=1).argsort(
        dim=1
    )  # rank of each position; padded positions rank last
    cut = ranks < (lengths.to(feats.device) * rate).floor().long()[:, None]
    return feats.masked_fill(cut[:, :, None], 0.0)


def feature_cutoff(feats: torch.Tensor, rate: float) -> torch.Tensor:
    """Zero ``floor(rate * D)`` random embedding dimensions of each sequence (the same ones at every position)."""
    if rate == 0.0:
        return feats
    b, _, d = feats.shape
    ranks = torch.rand(b, d, device=feats.device).argsort(dim=1).argsort(dim=1)
    cut = ranks < int(rate * d)
    return feats.masked_fill(cut[:, None, :], 0.0)


def js_divergence(logits: list[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
    """Generalised Jensen-Shannon divergence of the distributions softmax(logits_i), averaged over ``mask``."""
    log_p = torch.stack([x.log_softmax(dim=-1) for x in logits])  # (N, B, L, V)
    log_m = torch.logsumexp(log_p, dim=0) - torch.log(
        torch.tensor(float(len(logits)), device=log_p.device)
    )
    kl = (log_p.exp() * (log_p - log_m)).sum(-1).mean(0)  # (B, L): mean over copies of KL(p_i || m)
    return kl.masked_select(mask).mean()


class CutoffMTModel(ESPnetMTModel):
    def __init__(
        self,
        *args,
        token_cutoff_rate: float = 0.05,
        feature_cutoff_rate: float = 0.0,
        num_augmented: int = 1,
        js_weight: float = 1.0,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.token_cutoff_rate = check_rate("token_cutoff_rate", token_cutoff_rate)
        self.feature_cutoff_rate = check_rate("feature_cutoff_rate", feature_cutoff_rate)
        if num_augmented < 0:
            raise ConfigError(f"num_augmented must be >= 0, not {num_augmented}")
        if js_weight < 0:
            raise ConfigError(f"js_weight must be >= 0, not {js_weight}")
        self.num_augmented = num_augmented
        self.js_weight = js_weight

    def _encode_feats(
        self, feats: torch.Tensor, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.preencoder is not None:
            feats, lengths = self.preencoder(feats, lengths)
        out, out_lens, _ = self.encoder(feats, lengths)
        if self.postencoder is not None:
            out, out_lens = self.postencoder(out, out_lens)
        return out, out_lens

    def augment(self, feats: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return feature_cutoff(
            token_cutoff(feats, lengths, self.token_cutoff_rate), self.feature_cutoff_rate
        )

    def forward(self, text, text_lengths, src_text, src_text_lengths, **kwargs):
        if not self.training or self.num_augmented == 0:
            return super().forward(text, text_lengths, src_text, src_text_lengths, **kwargs)
        batch_size = src_text.shape[0]
        copies = self.num_augmented + 1
        text = text[:, : text_lengths.max()]
        feats, feats_lengths = self._extract_feats(
            src_text[:, : src_text_lengths.max()], src_text_lengths
        )
        # All copies in one batch: one encoder and one decoder pass.
        feats = torch.cat(
            [feats] + [self.augment(feats, feats_lengths) for _ in range(self.num_augmented)]
        )
        encoder_out, encoder_out_lens = self._encode_feats(feats, feats_lengths.repeat(copies))
        ys_in, ys_out = add_sos_eos(text, self.sos, self.eos, self.ignore_id)
        decoder_out, _ = self.decoder(
            encoder_out,
            encoder_out_lens,
            ys_in.repeat(copies, 1),
            (text_lengths + 1).repeat(copies),
        )
        logits = list(decoder_out.chunk(copies))
        ce = torch.stack([self.criterion_mt(x, ys_out) for x in logits])
        js = js_divergence(logits, ys_out != self.ignore_id)
        loss = ce.mean() + self.js_weight * js
        stats: dict[str, torch.Tensor] = dict(
            loss=loss.detach(),
            loss_ce=ce[0].detach(),
            loss_ce_augmented=ce[1:].mean().detach(),
            loss_js=js.detach(),
            acc=th_accuracy(
                logits[0].reshape(-1, self.vocab_size), ys_out, ignore_label=self.ignore_id
            ),
        )
        return force_gatherable((loss, stats, batch_size), loss.device)
