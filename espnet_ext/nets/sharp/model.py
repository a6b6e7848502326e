"""Attention-based image-to-sequence recognisers of the sharp-attention paper, as ESPnet2 models of
``ImageToSequenceTask`` (models ``soft_attention``, ``hard_attention``, ``sharp_attention``).

Image (grey, resized to 100 x 32) -> VGG backbone (24 columns) -> 2-layer BiLSTM = X -> LSTM decoder with
additive attention (eq. 7) and a context module (context.py: soft, hard, sharp with pooling / chain /
weighting); h_0 = f_i(mean X), a fully connected layer (eq. 6; the LSTM's cell state, which the paper does
not define, starts at zero), y_0 = 0, an end-of-sequence token ends the output.

Output layer (eq. 8): p(y_t) = softmax(f_e(y_{t-1}, h_t)), a fully connected layer over [embedding of
y_{t-1}; h_t] (``output_layer: token_state``, the default); ``output_layer: state_context`` uses [h_t; c_t].

Training: cross entropy for the prediction; for hard/sharp attention â is sampled from α_t and REINFORCE
with the moving-average baseline (weight λ_r) learns the choice (eq. 9); no entropy bonus; optional
reference supervision for sharp attention (§4.1): L2 between the patch and the reference image of the target
token. Validation and decoding take the argmax region, so validation scores are deterministic.

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

from espnet_ext.errors import ConfigError, InputError
from espnet_ext.nets.sharp.attention import (
    AdditiveAttention,
    MovingAverageBaseline,
    attention_entropy,
    reinforce_surrogate,
)
from espnet_ext.nets.sharp.backbone import VGGBackbone
from espnet_ext.nets.sharp.context import HardContext, SharpContext, SoftContext
from espnet_ext.nets.sharp.sharpener import IMAGE_SIZE, Sharpener

OUTPUT_LAYERS = ("token_state", "state_context")
SHARP_ONLY = ("context", "num_stn", "reference_images", "region")


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
        output_layer: str = "token_state",
        context: str | None = None,
        num_stn: int | None = None,
        region: str | None = None,
        region_scale: float = 1.8,
        patch_size: Sequence[int] = (24, 32),
        coarse_patch_size: Sequence[int] = (64, 32),
        stn_channels: int = 16,
        reference_images: str | None = None,
        reference_weight: float = 1.0,
    ):
        super().__init__()
        given = dict(
            context=context, num_stn=num_stn, reference_images=reference_images, region=region
        )
        if self.attention != "sharp" and any(given[key] is not None for key in SHARP_ONLY):
            key = next(key for key in SHARP_ONLY if given[key] is not None)
            raise ConfigError(
                f"belongs to sharp attention, not {self.attention}", key=f"model_conf.{key}"
            )
        if output_layer not in OUTPUT_LAYERS:
            raise ConfigError(
                f"unknown '{output_layer}' ({', '.join(OUTPUT_LAYERS)})",
                key="model_conf.output_layer",
            )
        self.vocab_size, self.token_list = vocab_size, list(token_list)
        self.eos = vocab_size - 1
        self.max_length, self.lambda_r, self.num_samples = max_length, lambda_r, num_samples
        self.output_layer = output_layer

        self.backbone = VGGBackbone(1, channels)
        self.lstm = torch.nn.LSTM(
            channels[-1], lstm_units, num_layers=2, batch_first=True, bidirectional=True
        )
        feature_dim = 2 * lstm_units
        self.init_state = torch.nn.Linear(feature_dim, decoder_units)  # f_i of eq. (6)
        self.attend = AdditiveAttention(feature_dim, decoder_units, attention_dim)
        self.embed = torch.nn.Embedding(vocab_size, embed_dim)
        if self.attention == "soft":
            self.context_module = SoftContext(feature_dim)
        elif self.attention == "hard":
            self.context_module = HardContext(feature_dim)
        else:
            self.context = context or "pooling"
            sharpener = Sharpener(
                channels,
                region or "field",
                region_scale,
                num_stn or 1,
                patch_size,
                coarse_patch_size,
                stn_channels,
            )
            self.context_module = SharpContext(
                sharpener, self.context, feature_dim, decoder_units, attention_dim
            )
            self.reference_weight = reference_weight
            self._load_references(reference_images, tuple(patch_size))
        context_dim = self.context_module.dim
        self.decoder = torch.nn.LSTMCell(embed_dim + context_dim, decoder_units)
        self.output = torch.nn.Linear(
            decoder_units + (embed_dim if output_layer == "token_state" else context_dim),
            vocab_size,
        )
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
                    f"{path}: images {images.shape} do not match the patch size {patch_size}",
                    key="model_conf.reference_images",
                )
            for token, symbol in enumerate(self.token_list):
                if symbol.isdigit() and len(symbol) == 1 and int(symbol) < len(images):
                    references[token] = torch.from_numpy(images[int(symbol)])
                    has_reference[token] = True
            if not has_reference.any():
                raise ConfigError(
                    f"{path}: no token of the token list has a reference image (expected digits 0-9)",
                    key="model_conf.reference_images",
                )
        self.register_buffer("references", references, persistent=False)
        self.register_buffer("has_reference", has_reference, persistent=False)

    @staticmethod
    def prepare_images(
        image: torch.Tensor, image_lengths: torch.Tensor, size: tuple[int, int] = IMAGE_SIZE
    ) -> torch.Tensor:
        """Width-first (B, W, H[, C]) in [0, 1] -> grey (B, 1, h, w) for ``size`` = (w, h), each image
        resized from its own width."""
        if image.dim() == 4:
            image = image.mean(-1)  # colour -> grey
        images = []
        for picture, width in zip(image, image_lengths.tolist()):
            picture = picture[:width].t()[None, None]  # (1, 1, H, W)
            if picture.shape[-2:] != (size[1], size[0]):
                picture = F.interpolate(
                    picture, size=(size[1], size[0]), mode="bilinear", align_corners=False
                )
            images.append(picture)
        return torch.cat(images)

    def region_image(self, image: torch.Tensor, image_lengths: torch.Tensor, images: torch.Tensor):
        """The image the sharpener cuts regions from (rendered at its own width), None without one."""
        if not self.context_module.needs_region_image:
            return None
        size = self.context_module.sharpener.image_size
        return images if size == IMAGE_SIZE else self.prepare_images(image, image_lengths, size)

    def encode(self, images: torch.Tensor) -> torch.Tensor:
        features, _ = self.lstm(self.backbone(images))
        return features  # X: (B, M, 2 * lstm_units)

    # ---- decoding ---------------------------------------------------------------------------------------
    def run_decoder(
        self, region_image, features, targets: torch.Tensor | None, steps: int, greedy: bool
    ):
        """Teacher-forced (``targets``) or free-running decoding; per-step logits, α, log α(â), patches."""
        batch = features.size(0)
        h = self.init_state(features.mean(1))  # h_0 = f_i(mean X), eq. (6)
        c = torch.zeros_like(h)
        keys = self.attend.keys(features)
        previous = features.new_zeros(batch, self.embed.embedding_dim)  # y_0 = 0
        logits, alphas, log_alphas, patches = [], [], [], []
        for t in range(steps):
            alpha = self.attend(keys, h)
            step = self.context_module(alpha, features, region_image, h, greedy)
            h, c = self.decoder(torch.cat([previous, step.context], -1), (h, c))
            # eq. (8): f_e(y_{t-1}, h_t), or the [h_t; c_t] alternative
            second = previous if self.output_layer == "token_state" else step.context
            step_logits = self.output(torch.cat([h, second], -1))
            logits.append(step_logits)
            alphas.append(alpha)
            log_alphas.append(step.log_alpha)
            patches.append(step.patch)
            token = targets[:, t] if targets is not None else step_logits.argmax(-1)
            previous = self.embed(token.clamp(min=0))
        return logits, alphas, log_alphas, patches

    def reinforce_loss(self, log_p, log_alphas, step_mask):
        """REINFORCE term of eq. (9) with the moving-average baseline updated on this batch."""
        baseline = self.baseline.update((log_p.sum() / step_mask.sum()).detach())
        return reinforce_surrogate(torch.stack(log_alphas, 1), log_p, baseline, step_mask), baseline

    def reference_loss(self, patches: list[torch.Tensor], targets, step_mask) -> torch.Tensor:
        """Mean L2 (per pixel) between each step's patch and the reference image of its target token."""
        patch_stack = torch.stack(patches, 1).squeeze(2)  # (B, N, h, w)
        tokens = targets.clamp(min=0)
        supervised = step_mask & self.has_reference[tokens]
        error = ((patch_stack - self.references[tokens]) ** 2).mean((-1, -2))
        return (error * supervised).sum() / supervised.sum().clamp(min=1)

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
            raise InputError(
                f"a transcription has {int(text_lengths.max())} tokens, more than max_length "
                f"{self.max_length}"
            )
        images = self.prepare_images(image, image_lengths)
        features = self.encode(images)
        region_image = self.region_image(image, image_lengths, images)
        steps = int(text_lengths.max()) + 1
        targets = text.new_full((text.size(0), steps), -1)
        targets[:, : text.size(1)] = text[:, :steps]
        targets[torch.arange(text.size(0)), text_lengths] = self.eos
        step_mask = targets >= 0
        # Sampled regions in training only: validation takes the argmax, as decoding does.
        logits, alphas, log_alphas, patches = self.run_decoder(
            region_image, features, targets, steps, greedy=not self.training
        )
        logits = torch.stack(logits, 1)
        log_p = (
            torch.log_softmax(logits, -1).gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        )
        log_p = log_p * step_mask
        loss_ce = -log_p.sum() / targets.size(0)
        loss, stats = loss_ce, {}
        if self.attention != "soft" and self.training:  # the choice is learnt from sampled regions
            loss_reinforce, baseline = self.reinforce_loss(log_p, log_alphas, step_mask)
            loss = loss + self.lambda_r * loss_reinforce
            stats.update(loss_reinforce=loss_reinforce.detach(), baseline=baseline.detach())
        if self.attention == "sharp" and bool(self.has_reference.any()):
            loss_reference = self.reference_loss(patches, targets, step_mask)
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
            self.region_image(image, image_lengths, images),
            features,
            None,
            self.max_length + 1,
            greedy=True,
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
