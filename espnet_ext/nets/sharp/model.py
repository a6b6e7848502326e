"""Attention-based image-to-sequence recognisers of the sharp-attention paper, as ESPnet2 models of
``ImageToSequenceTask`` (models ``soft_attention``, ``hard_attention``, ``sharp_attention``).

Image (grey, resized to 100 x 32) -> VGG backbone (24 columns) -> 2-layer BiLSTM = X -> LSTM decoder with
additive attention; h_0 from the mean of X (eq. 6), y_0 = 0, an end-of-sequence token ends the output.

- soft (eq. 3): c_t = Σ α_ti x_i;
- hard (eqs. 4, 9): c_t = x_â, â sampled from α_t in training (argmax at inference); cross entropy for the
  prediction, REINFORCE with the moving-average baseline (weight λ_r) for the choice; no entropy bonus;
- sharp (§2.3-2.5): the region â (receptive field of column â, narrowed by ``region_scale`` as the paper's
  width upsampling) goes through the sharpener -- one or two STN localisers and an encoder (the backbone's
  architecture) on the patch, giving Z_t -- and c_t is ``pooling`` (mean of Z_t), ``chain`` ([mean Z_t;
  x_â]) or ``weighting`` (additive attention from h_{t-1} over {columns of Z_t, x_â}). Optional reference
  supervision (§4.1): L2 between the patch and the reference image of the target token.

Reward of eq. (9): the per-step log-likelihood log p(y_t | y_<t, R, â_t). The p(â) factor written in eq. (9)
is realised by drawing â from α (Monte Carlo over the samples), which is the usual score-function estimator.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from espnet2.torch_utils.device_funcs import force_gatherable
from espnet2.train.abs_espnet_model import AbsESPnetModel

from espnet_ext.errors import ConfigError
from espnet_ext.nets.sharp.attention import (
    AdditiveAttention,
    MovingAverageBaseline,
    attention_entropy,
    reinforce_surrogate,
    sample_regions,
)
from espnet_ext.nets.sharp.backbone import VGGBackbone, receptive_fields, width_layers
from espnet_ext.nets.sharp.stn import Localiser, box_affine

IMAGE_SIZE = (100, 32)  # (width, height) every image is resized to


class AttentionRecognizer(AbsESPnetModel):
    attention = "soft"

    def __init__(
        self,
        vocab_size: int,
        token_list: Sequence[str] = (),
        channels: Sequence[int] = (64, 128, 256, 512),
        lstm_units: int = 256,
        attention_dim: int = 256,
        decoder_units: int = 256,
        embed_dim: int = 64,
        max_length: int = 13,
        lambda_r: float = 1.0,
        num_samples: int = 1,
        context: str = "pooling",
        num_stn: int = 1,
        region_scale: float = 1.8,
        patch_size: Sequence[int] = (24, 32),
        coarse_patch_size: Sequence[int] = (64, 32),
        stn_channels: int = 16,
        reference_images: str | None = None,
        reference_weight: float = 1.0,
    ):
        super().__init__()
        if self.attention != "sharp" and (reference_images or context != "pooling" or num_stn != 1):
            raise ConfigError(
                f"context/num_stn/reference_images belong to sharp attention, not {self.attention}"
            )
        if context not in ("pooling", "chain", "weighting"):
            raise ConfigError(f"unknown context '{context}' (pooling, chain, weighting)")
        if num_stn not in (1, 2):
            raise ConfigError(f"num_stn must be 1 or 2, got {num_stn}")
        self.vocab_size, self.token_list = vocab_size, list(token_list)
        self.eos = vocab_size - 1
        self.max_length, self.lambda_r, self.num_samples = max_length, lambda_r, num_samples
        self.context, self.region_scale = context, region_scale

        self.backbone = VGGBackbone(1, channels)
        self.lstm = torch.nn.LSTM(
            channels[-1], lstm_units, num_layers=2, batch_first=True, bidirectional=True
        )
        feature_dim = 2 * lstm_units
        self.init_state = torch.nn.Linear(feature_dim, 2 * decoder_units)
        self.attend = AdditiveAttention(feature_dim, decoder_units, attention_dim)
        self.embed = torch.nn.Embedding(vocab_size, embed_dim)
        context_dim = feature_dim
        if self.attention == "sharp":
            self.localisers = torch.nn.ModuleList(
                [Localiser(tuple(coarse_patch_size), mode="x_translation", channels=stn_channels)]
                * (num_stn == 2)
                + [Localiser(tuple(patch_size), mode="affine", channels=stn_channels)]
            )
            self.patch_encoder = VGGBackbone(1, channels)
            patch_dim = channels[-1]
            if context == "pooling":
                context_dim = patch_dim
            elif context == "chain":
                context_dim = patch_dim + feature_dim
            else:
                self.patch_projection = torch.nn.Linear(patch_dim, feature_dim)
                self.weigh = AdditiveAttention(feature_dim, decoder_units, attention_dim)
            layers = width_layers(self.backbone)
            columns = IMAGE_SIZE[0] // 4 - 1
            fields = torch.tensor(receptive_fields(layers, columns))
            # Region i: its receptive field's centre; its width shrunk by region_scale (the paper upsamples
            # regions along the width, i.e. the same window on a region_scale-times wider image).
            self.register_buffer(
                "region_centre", (fields.mean(-1) / IMAGE_SIZE[0]) * 2 - 1, persistent=False
            )
            self.region_half_width = float(
                (fields[0, 1] - fields[0, 0]) / region_scale / IMAGE_SIZE[0]
            )
            self.reference_weight = reference_weight
            self._load_references(reference_images, tuple(patch_size))
        self.decoder = torch.nn.LSTMCell(embed_dim + context_dim, decoder_units)
        self.output = torch.nn.Linear(decoder_units + context_dim, vocab_size)
        if self.attention != "soft":
            self.baseline = MovingAverageBaseline()

    # ---- inputs -------------------------------------------------------------------------------------------
    def _load_references(self, path: str | None, patch_size: tuple[int, int]) -> None:
        references = torch.zeros(self.vocab_size, patch_size[1], patch_size[0])
        has_reference = torch.zeros(self.vocab_size, dtype=torch.bool)
        if path:
            images = np.load(Path(path))
            if images.shape[1:] != (patch_size[1], patch_size[0]):
                raise ConfigError(
                    f"reference images {images.shape} do not match the patch size {patch_size}"
                )
            for token, symbol in enumerate(self.token_list):
                if symbol.isdigit() and len(symbol) == 1 and int(symbol) < len(images):
                    references[token] = torch.from_numpy(images[int(symbol)])
                    has_reference[token] = True
            if not has_reference.any():
                raise ConfigError(
                    "no token of the token list has a reference image (expected digits 0-9)"
                )
        self.register_buffer("references", references, persistent=False)
        self.register_buffer("has_reference", has_reference, persistent=False)

    @staticmethod
    def prepare_images(image: torch.Tensor, image_lengths: torch.Tensor) -> torch.Tensor:
        """Width-first (B, W, H[, C]) in [0, 1] -> grey (B, 1, 32, 100), each image resized from its own width."""
        if image.dim() == 4:
            image = image.mean(-1)  # colour -> grey
        images = []
        for picture, width in zip(image, image_lengths.tolist()):
            picture = picture[:width].t()[None, None]  # (1, 1, H, W)
            if picture.shape[-2:] != (IMAGE_SIZE[1], IMAGE_SIZE[0]):
                picture = F.interpolate(
                    picture,
                    size=(IMAGE_SIZE[1], IMAGE_SIZE[0]),
                    mode="bilinear",
                    align_corners=False,
                )
            images.append(picture)
        return torch.cat(images)

    def encode(self, images: torch.Tensor) -> torch.Tensor:
        features, _ = self.lstm(self.backbone(images))
        return features  # X: (B, M, 2 * lstm_units)

    # ---- one decoding step ----------------------------------------------------------------------------------
    def sharpen(self, images: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """Patch (B, 1, h, w) the sharpener makes of region ``index`` (B,)."""
        centre = self.region_centre[index]
        region = box_affine(centre, torch.full_like(centre, self.region_half_width))
        patch = None
        for (
            localiser
        ) in self.localisers:  # coarse to fine: each works on the previous one's output window
            patch, region = localiser(images, region)
        return patch

    def step_context(self, images, features, alpha, state, greedy):
        """(context c_t, log α of the chosen region or None, patch or None)."""
        if self.attention == "soft":
            return torch.bmm(alpha.unsqueeze(1), features).squeeze(1), None, None
        index, log_alpha = sample_regions(alpha, greedy)
        chosen = features[torch.arange(features.size(0)), index]
        if self.attention == "hard":
            return chosen, log_alpha, None
        patch = self.sharpen(images, index)
        columns = self.patch_encoder(patch)  # Z_t: (B, M', c4)
        if self.context == "pooling":
            return columns.mean(1), log_alpha, patch
        if self.context == "chain":
            return torch.cat([columns.mean(1), chosen], -1), log_alpha, patch
        items = torch.cat([self.patch_projection(columns), chosen.unsqueeze(1)], 1)
        weights = self.weigh(self.weigh.keys(items), state[0])
        return torch.bmm(weights.unsqueeze(1), items).squeeze(1), log_alpha, patch

    def run_decoder(self, images, features, targets: torch.Tensor | None, steps: int, greedy: bool):
        """Teacher-forced (``targets``) or free-running decoding; per-step logits, α, log α(â), patches."""
        batch = features.size(0)
        h, c = torch.tanh(self.init_state(features.mean(1))).chunk(2, -1)
        keys = self.attend.keys(features)
        previous = features.new_zeros(batch, self.embed.embedding_dim)  # y_0 = 0
        logits, alphas, log_alphas, patches = [], [], [], []
        for t in range(steps):
            alpha = self.attend(keys, h)
            context, log_alpha, patch = self.step_context(images, features, alpha, (h, c), greedy)
            h, c = self.decoder(torch.cat([previous, context], -1), (h, c))
            step_logits = self.output(torch.cat([h, context], -1))
            (
                logits.append(step_logits),
                alphas.append(alpha),
                log_alphas.append(log_alpha),
                patches.append(patch),
            )
            token = targets[:, t] if targets is not None else step_logits.argmax(-1)
            previous = self.embed(token.clamp(min=0))
        return logits, alphas, log_alphas, patches

    # ---- ESPnet2 interface ----------------------------------------------------------------------------------
    def forward(
        self,
        image: torch.Tensor,
        image_lengths: torch.Tensor,
        text: torch.Tensor,
        text_lengths: torch.Tensor,
        **kwargs,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
        batch = image.size(0)
        if (
            self.training and self.num_samples > 1 and self.attention != "soft"
        ):  # S samples per image
            image, image_lengths = (
                image.repeat_interleave(self.num_samples, 0),
                image_lengths.repeat_interleave(self.num_samples, 0),
            )
            text, text_lengths = (
                text.repeat_interleave(self.num_samples, 0),
                text_lengths.repeat_interleave(self.num_samples, 0),
            )
        if int(text_lengths.max()) > self.max_length:
            raise ValueError(
                f"a transcription has {int(text_lengths.max())} tokens, more than max_length "
                f"{self.max_length}"
            )
        images = self.prepare_images(image, image_lengths)
        features = self.encode(images)
        steps = int(text_lengths.max()) + 1
        targets = text.new_full((text.size(0), steps), -1)
        targets[:, : text.size(1)] = text[:, :steps]
        targets[torch.arange(text.size(0)), text_lengths] = self.eos
        step_mask = targets >= 0
        logits, alphas, log_alphas, patches = self.run_decoder(
            images, features, targets, steps, greedy=False
        )
        logits = torch.stack(logits, 1)
        log_p = (
            torch.log_softmax(logits, -1).gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        )
        log_p = log_p * step_mask
        loss_ce = -log_p.sum() / targets.size(0)
        loss = loss_ce
        stats = {}
        if (
            self.attention != "soft" and self.training
        ):  # the choice is learnt from sampled regions only
            mean_log_p = log_p.sum() / step_mask.sum()
            baseline = self.baseline.update(mean_log_p.detach())
            loss_reinforce = reinforce_surrogate(
                torch.stack(log_alphas, 1), log_p, baseline, step_mask
            )
            loss = loss + self.lambda_r * loss_reinforce
            stats.update(loss_reinforce=loss_reinforce.detach(), baseline=baseline.detach())
        if self.attention == "sharp" and bool(self.has_reference.any()):
            patch_stack = torch.stack(patches, 1).squeeze(2)  # (B, N, h, w)
            tokens = targets.clamp(min=0)
            supervised = step_mask & self.has_reference[tokens]
            error = ((patch_stack - self.references[tokens]) ** 2).mean((-1, -2))
            loss_reference = (error * supervised).sum() / supervised.sum().clamp(min=1)
            loss = loss + self.reference_weight * loss_reference
            stats["loss_reference"] = loss_reference.detach()
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"non-finite loss ({loss.item()}) in {self.attention} attention: "
                f"cross entropy {loss_ce.item()}"
            )
        correct = (logits.argmax(-1) == targets) & step_mask
        stats.update(
            loss=loss.detach(),
            loss_ce=loss_ce.detach(),
            acc=(correct.sum() / step_mask.sum()).detach(),
            entropy=attention_entropy(torch.stack(alphas, 1), step_mask.float()).mean().detach(),
        )
        if not self.training:
            hypotheses = self.recognize(image, image_lengths)
            references = [ref[:n].tolist() for ref, n in zip(text, text_lengths.tolist())]
            stats["seq_acc"] = torch.tensor(
                sum(h == r for h, r in zip(hypotheses, references)) / len(references)
            )
        return force_gatherable((loss, stats, batch), loss.device)

    @torch.no_grad()
    def recognize(
        self, image: torch.Tensor, image_lengths: torch.Tensor, return_steps: bool = False
    ):
        """Greedy decoding (argmax region for hard/sharp) until end-of-sequence or max_length tokens.

        With ``return_steps``, also per image a list of steps: (token, α, patch or None) for visualisation.
        """
        images = self.prepare_images(image, image_lengths)
        features = self.encode(images)
        logits, alphas, _, patches = self.run_decoder(
            images, features, None, self.max_length + 1, greedy=True
        )
        tokens = torch.stack(logits, 1).argmax(-1)
        hypotheses, details = [], []
        for b, row in enumerate(tokens.tolist()):
            length = row.index(self.eos) if self.eos in row else self.max_length
            hypotheses.append(row[:length])
            details.append(
                [
                    (row[t], alphas[t][b], None if patches[t] is None else patches[t][b, 0])
                    for t in range(min(length + 1, len(row)))
                ]
            )
        return (hypotheses, details, images) if return_steps else hypotheses

    def collect_feats(
        self, image: torch.Tensor, image_lengths: torch.Tensor, **kwargs
    ) -> dict[str, torch.Tensor]:
        return {}


class SoftAttentionRecognizer(AttentionRecognizer):
    attention = "soft"


class HardAttentionRecognizer(AttentionRecognizer):
    attention = "hard"


class SharpAttentionRecognizer(AttentionRecognizer):
    attention = "sharp"
