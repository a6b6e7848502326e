"""Cutoff augmentation for machine translation (Shen et al., 2020), as used by the relaxed-attention paper (§4.3).

The paper's A.3.3 takes everything but the model from Shen et al.'s released fairseq recipe
(dinghanshen/Cutoff commit 4978563 -> stevezheng23/fairseq_extension, examples/translation/augmentation and
fairseq/criterions/label_smoothed_cross_entropy_with_regularization.py). Its token cutoff replaces each token
independently, with probability ``token_cutoff_rate`` (0.05), by ``<unk>``, in the source *and* in the
decoder input (positions keep their positional encoding); ``feature_cutoff_rate`` erases random embedding
dimensions of an embedded input (``feature_cutoff``, the paper's other cutoff). Each batch is run once as is
and ``num_augmented`` times masked; the loss is the reference criterion's

    L = ( sum_i CE_i + consistency_weight * 1/(N+1) sum_i sum_t KL(m_t || p_i,t) ) / ((N+1) * ntokens),
    m = softmax(mean_i logits_i),

with CE_i the summed (label-smoothed) cross entropy of copy i and p_i its distribution, padded positions left
out. With the reference's one augmented copy (N = 1) the divergence term is (KL(m||p) + KL(m||q)) / 2 and
the denominator its ``sample_size``, 2 ntokens; ``consistency_weight`` 5 is its ``--regularization_weight``.

At inference (``eval()``) the model is ESPnet's ``ESPnetMTModel`` unchanged.
"""

from __future__ import annotations

import torch
from espnet.nets.pytorch_backend.nets_utils import th_accuracy
from espnet.nets.pytorch_backend.transformer.add_sos_eos import add_sos_eos
from espnet2.mt.espnet_model import ESPnetMTModel
from espnet2.torch_utils.device_funcs import force_gatherable

from espnet_ext.errors import ConfigError
from espnet_ext.nets.padding import padding_mask


def check_rate(name: str, rate: float) -> float:
    if not 0.0 <= rate < 1.0:
        raise ConfigError(f"{name} must be in [0, 1): a rate of {rate} would erase the whole input")
    return rate


def bernoulli_unk(
    tokens: torch.Tensor, maskable: torch.Tensor, rate: float, unk_id: int
) -> torch.Tensor:
    """Replace each ``maskable`` entry of ``tokens`` (B, T) by ``unk_id`` independently with prob. ``rate``."""
    if rate == 0.0:
        return tokens
    drop = torch.rand(tokens.shape, device=tokens.device) < rate
    return tokens.masked_fill(drop & maskable, unk_id)


def feature_cutoff(feats: torch.Tensor, rate: float) -> torch.Tensor:
    """Zero ``floor(rate * D)`` random embedding dimensions of each sequence (the same ones at every position)."""
    if rate == 0.0:
        return feats
    b, _, d = feats.shape
    ranks = torch.rand(b, d, device=feats.device).argsort(dim=1).argsort(dim=1)
    cut = ranks < int(rate * d)
    return feats.masked_fill(cut[:, None, :], 0.0)


def consistency_kl(logits: list[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
    """Summed over ``mask`` (B, L), averaged over copies: mean_i KL(m || p_i), m = softmax(mean logits).

    Every copy gets the divergence, and its gradient, as in the reference's
    ``compute_regularization_loss`` ((KL(m||p) + KL(m||q)) / 2 for two copies); m is not detached there.
    """
    log_m = torch.stack(logits).mean(0).log_softmax(dim=-1)
    m = log_m.exp()
    kl = torch.stack([(m * (log_m - x.log_softmax(dim=-1))).sum(-1) for x in logits]).mean(0)
    return kl.masked_select(mask).sum()


def unk_id_of(token_list, name: str) -> int:
    if "<unk>" not in token_list:
        raise ConfigError(f"cutoff replaces tokens by <unk>, but {name} has no <unk> entry")
    return list(token_list).index("<unk>")


class CutoffMTModel(ESPnetMTModel):
    def __init__(
        self,
        *args,
        token_cutoff_rate: float = 0.05,
        feature_cutoff_rate: float = 0.0,
        num_augmented: int = 1,
        consistency_weight: float = 5.0,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.token_cutoff_rate = check_rate("token_cutoff_rate", token_cutoff_rate)
        self.feature_cutoff_rate = check_rate("feature_cutoff_rate", feature_cutoff_rate)
        if num_augmented < 0:
            raise ConfigError(f"model_conf.num_augmented must be >= 0, not {num_augmented}")
        if consistency_weight < 0:
            raise ConfigError(
                f"model_conf.consistency_weight must be >= 0, not {consistency_weight}"
            )
        self.num_augmented = num_augmented
        self.consistency_weight = consistency_weight
        self.unk_id = unk_id_of(self.token_list, "token_list")
        src_list = kwargs.get("src_token_list") or (args[2] if len(args) > 2 else None)
        self.src_unk_id = unk_id_of(src_list, "src_token_list") if src_list else self.unk_id

    def _encode_feats(
        self, feats: torch.Tensor, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.preencoder is not None:
            feats, lengths = self.preencoder(feats, lengths)
        out, out_lens, _ = self.encoder(feats, lengths)
        if self.postencoder is not None:
            out, out_lens = self.postencoder(out, out_lens)
        return out, out_lens

    def augmented_source(
        self, src_text: torch.Tensor, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Source ids (B, T) with Bernoulli <unk>, then features; embedded ones get feature cutoff."""
        valid = ~padding_mask(lengths, src_text.size(1), src_text.device)
        masked = bernoulli_unk(src_text, valid, self.token_cutoff_rate, self.src_unk_id)
        feats, feats_lengths = self._extract_feats(masked, lengths)
        if feats.dim() == 3:
            feats = feature_cutoff(feats, self.feature_cutoff_rate)
        return feats, feats_lengths

    def augment_target(self, ys_in: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Decoder input (B, L) = <sos> + target: every target token may become <unk>, <sos> stays."""
        maskable = ~padding_mask(lengths + 1, ys_in.size(1), ys_in.device)
        maskable[:, 0] = False
        return bernoulli_unk(ys_in, maskable, self.token_cutoff_rate, self.unk_id)

    def summed_ce(self, logits: torch.Tensor, ys_out: torch.Tensor) -> torch.Tensor:
        """ESPnet's label-smoothed CE as a sum over target tokens (undo its batch/token normalisation)."""
        ntokens = (ys_out != self.ignore_id).sum()
        denom = ntokens if self.criterion_mt.normalize_length else ys_out.size(0)
        return self.criterion_mt(logits, ys_out) * denom

    def forward(self, text, text_lengths, src_text, src_text_lengths, **kwargs):
        if not self.training or self.num_augmented == 0:
            return super().forward(text, text_lengths, src_text, src_text_lengths, **kwargs)
        batch_size = src_text.shape[0]
        copies = self.num_augmented + 1
        text = text[:, : text_lengths.max()]
        src_text = src_text[:, : src_text_lengths.max()]
        feats, feats_lengths = self._extract_feats(src_text, src_text_lengths)
        ys_in, ys_out = add_sos_eos(text, self.sos, self.eos, self.ignore_id)
        augmented = range(self.num_augmented)
        # All copies in one batch: one encoder and one decoder pass.
        feats = torch.cat(
            [feats] + [self.augmented_source(src_text, src_text_lengths)[0] for _ in augmented]
        )
        ys_in = torch.cat([ys_in] + [self.augment_target(ys_in, text_lengths) for _ in augmented])
        encoder_out, encoder_out_lens = self._encode_feats(feats, feats_lengths.repeat(copies))
        decoder_out, _ = self.decoder(
            encoder_out, encoder_out_lens, ys_in, (text_lengths + 1).repeat(copies)
        )
        logits = list(decoder_out.chunk(copies))
        target = ys_out != self.ignore_id
        ntokens = target.sum()
        ce = torch.stack([self.summed_ce(x, ys_out) for x in logits])
        kl = consistency_kl(logits, target)
        loss = (ce.sum() + self.consistency_weight * kl) / (copies * ntokens)
        stats: dict[str, torch.Tensor] = dict(
            loss=loss.detach(),
            loss_ce=(ce[0] / ntokens).detach(),
            loss_ce_augmented=(ce[1:].mean() / ntokens).detach(),
            loss_kl=(kl / ntokens).detach(),
            acc=th_accuracy(
                logits[0].reshape(-1, self.vocab_size), ys_out, ignore_label=self.ignore_id
            ),
        )
        return force_gatherable((loss, stats, batch_size), loss.device)
