"""Swin image classifier for ``ImageClassificationTask`` (``--model swin``): the paper's §4.4 models.

    logits = Linear(mean over tokens of LayerNorm(Swin(image)))
    loss   = CE(logits, y; label smoothing 0.1 | Mixup/CutMix soft targets) + λ_drloc · L_drloc

Relaxed self-attention (eq. 3), fuzzy relaxation and smooth focus are options of every window attention
(``gamma``, ``fuzzy_std``, ``matched_inference``, ``smooth_focus``); ``drop_path_rate`` is stochastic depth
(0 for the "- stochastic depth" rows); ``drloc_weight`` > 0 adds the dense relative localization loss.

L_drloc as the code the paper adopts (A.3.4: yhlleo/VTs-Drloc, train.sh ``--use_drloc --use_abs``, λ 0.5):
``drloc_target`` "abs_cells" (|Δ| in grid cells; "signed_normalised" is the NeurIPS paper's Δ/k),
``drloc_features`` "pre_norm" (models/swin.py feeds the last stage's output, before the final LayerNorm,
to the drloc head; "post_norm" feeds the classifier's normalised map). λ follows main.py's
``_weight_decay`` per epoch e (counted from 0): λ·e/W for e <= W, then λ·(1 - (e - W)/(T - W)), with
W = ``drloc_warmup_epochs`` (their ``--ssl_warmup_epochs`` 20) and T = ``drloc_decay_epochs`` (their
``--total_epochs``, 300, while their loop stops after epoch 100); it needs ``drloc_batches_per_epoch``
(ESPnet does not tell a model the epoch: training batches are counted in a checkpointed buffer, without
reading anything back to the host). Without it λ is constant.

Weight decay as the Swin recipe (optimizer.py ``set_weight_decay``): every 1-D parameter (norms, biases)
and every ``relative_position_bias_table`` is marked ``_no_weight_decay``, which ESPnet's
``--exclude_weight_decay true`` (espnet2.optimizers.optim_groups) puts in a zero-decay group.
Mixup/CutMix (the Swin recipe's batch augmentation) use timm's ``Mixup`` in training when an alpha is > 0;
an odd batch is mixed on its first B-1 images (timm mixes pairs) and the last keeps its smoothed label.
Reported: ``loss``, ``loss_ce``, ``loss_drloc``, ``acc`` (top-1) and ``acc_top5`` on the true labels.
``compile_layers: true`` compiles each stage of blocks with ``torch.compile`` (``compile_backend``, default
inductor; ``espnet_ext.nets.compiled_layers``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from espnet2.torch_utils.device_funcs import force_gatherable
from espnet2.train.abs_espnet_model import AbsESPnetModel

from espnet_ext.errors import ConfigError
from espnet_ext.nets.baselines.convnet_classifier import images_to_nchw
from espnet_ext.nets.compiled_layers import compile_layers_of
from espnet_ext.nets.swin.backbone import SwinTransformer
from espnet_ext.nets.swin.drloc import DenseRelativeLocalization


def topk_correct(logits: torch.Tensor, label: torch.Tensor, k: int) -> torch.Tensor:
    """Fraction of rows whose label is among the k largest logits."""
    top = logits.topk(min(k, logits.size(-1)), dim=-1).indices
    return (top == label[:, None]).any(-1).float().mean()


class SwinClassifier(AbsESPnetModel):
    def __init__(
        self,
        num_classes: int,
        in_channels: int = 3,
        img_size: int = 224,
        patch_size: int = 4,
        embed_dim: int = 96,
        depths: Sequence[int] = (2, 2, 6, 2),
        num_heads: Sequence[int] = (3, 6, 12, 24),
        window_size: int = 7,
        mlp_ratio: float = 4.0,
        drop_path_rate: float = 0.2,
        gamma: float = 0.0,
        fuzzy_std: float = 0.0,
        matched_inference: bool = False,
        smooth_focus: bool = False,
        drloc_weight: float = 0.0,
        drloc_pairs: int = 64,
        drloc_hidden: int = 512,
        drloc_target: str = "abs_cells",
        drloc_features: str = "pre_norm",
        drloc_warmup_epochs: int = 0,
        drloc_decay_epochs: int | None = None,
        drloc_batches_per_epoch: int | None = None,
        label_smoothing: float = 0.1,
        mixup_alpha: float = 0.0,
        cutmix_alpha: float = 0.0,
        compile_layers: bool = False,
        compile_backend: str = "inductor",
    ):
        super().__init__()
        self.num_classes = num_classes
        self.in_channels = in_channels
        self.label_smoothing = label_smoothing
        self.backbone = SwinTransformer(
            img_size=img_size,
            patch_size=patch_size,
            in_channels=in_channels,
            embed_dim=embed_dim,
            depths=depths,
            num_heads=num_heads,
            window_size=window_size,
            mlp_ratio=mlp_ratio,
            drop_path_rate=drop_path_rate,
            attention_conf=dict(
                gamma=gamma,
                fuzzy_std=fuzzy_std,
                matched_inference=matched_inference,
                smooth_focus=smooth_focus,
            ),
        )
        if compile_layers:  # each stage of blocks; images of one size: static until a batch differs
            compile_layers_of(
                self, self.backbone.layers, compile_backend, "model_conf", dynamic=None
            )
        self.head = torch.nn.Linear(self.backbone.num_features, num_classes)
        torch.nn.init.trunc_normal_(self.head.weight, std=0.02)
        torch.nn.init.zeros_(self.head.bias)
        self.drloc_weight = float(drloc_weight)
        self.drloc = (
            DenseRelativeLocalization(
                self.backbone.num_features, drloc_hidden, drloc_pairs, target=drloc_target
            )
            if self.drloc_weight > 0
            else None
        )
        if drloc_features not in ("pre_norm", "post_norm"):
            raise ConfigError(
                f"drloc_features must be pre_norm or post_norm, not {drloc_features!r}",
                key="model_conf.drloc_features",
            )
        self.drloc_features = drloc_features
        self.drloc_schedule = check_drloc_schedule(
            drloc_warmup_epochs, drloc_decay_epochs, drloc_batches_per_epoch
        )
        if self.drloc is not None and self.drloc_schedule is not None:
            self.register_buffer("drloc_batches", torch.zeros((), dtype=torch.long))
        mark_swin_no_weight_decay(self)
        self.mixup = None
        if mixup_alpha > 0 or cutmix_alpha > 0:
            from timm.data import Mixup

            self.mixup = Mixup(
                mixup_alpha=mixup_alpha,
                cutmix_alpha=cutmix_alpha,
                label_smoothing=label_smoothing,
                num_classes=num_classes,
            )

    def classify(self, image: torch.Tensor) -> torch.Tensor:
        """Images (B, H, W, C) -> class logits (B, num_classes)."""
        return self.head(self.backbone(images_to_nchw(image, self.in_channels)))

    def _mixed(self, x: torch.Tensor, label: torch.Tensor):
        """Mixup/CutMix on the largest even prefix of the batch -> (images, soft targets)."""
        even = x.size(0) - x.size(0) % 2
        targets = F.one_hot(label, self.num_classes).to(x.dtype)
        targets = targets * (1 - self.label_smoothing) + self.label_smoothing / self.num_classes
        if even >= 2:
            mixed, mixed_targets = self.mixup(x[:even].clone(), label[:even])
            x = torch.cat([mixed, x[even:]])
            targets = torch.cat([mixed_targets.to(x.dtype), targets[even:]])
        return x, targets

    def forward(
        self, image: torch.Tensor, label: torch.Tensor, **kwargs
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
        loss, stats = self.losses(image, label)
        return force_gatherable((loss, stats, image.size(0)), loss.device)

    def losses(
        self, image: torch.Tensor, label: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(loss, stats) of a batch, all on the device (``forward`` adds ESPnet's batch weight)."""
        label = label.view(-1)
        x = images_to_nchw(image, self.in_channels)
        if self.training and self.mixup is not None:
            x, targets = self._mixed(x, label)
        else:
            targets = None
        stage_output = self.backbone.stage_output(x)
        feature_map = self.backbone.norm(stage_output)
        logits = self.head(feature_map.mean(dim=(1, 2)))
        if targets is None:
            loss_ce = F.cross_entropy(logits, label, label_smoothing=self.label_smoothing)
        else:
            loss_ce = torch.sum(-targets * F.log_softmax(logits, dim=-1), dim=-1).mean()
        loss = loss_ce
        stats = dict(loss_ce=loss_ce.detach())
        if self.drloc is not None:
            drloc_input = stage_output if self.drloc_features == "pre_norm" else feature_map
            loss_drloc = self.drloc(drloc_input)
            weight = self.current_drloc_weight()
            loss = loss + weight * loss_drloc
            stats["loss_drloc"] = loss_drloc.detach()
            if self.drloc_schedule is not None:
                stats["drloc_weight"] = weight.detach()
                if self.training:
                    self.drloc_batches += 1
        with torch.no_grad():
            stats.update(
                loss=loss.detach(),
                acc=topk_correct(logits, label, 1),
                acc_top5=topk_correct(logits, label, 5),
            )
        return loss, stats

    def current_drloc_weight(self) -> float | torch.Tensor:
        """λ of the current batch: constant, or VTs-Drloc's per-epoch schedule (a 0-dim device tensor)."""
        if self.drloc_schedule is None:
            return self.drloc_weight
        warmup, decay, per_epoch = self.drloc_schedule
        epoch = torch.div(self.drloc_batches, per_epoch, rounding_mode="floor").float()
        if warmup > 0:
            factor = (epoch / warmup).clamp(max=1.0)
        else:
            factor = torch.ones_like(epoch)
        if decay is not None:
            falling = (1.0 - (epoch - warmup) / (decay - warmup)).clamp(min=0.0)
            factor = torch.where(epoch <= warmup, factor, falling)
        return self.drloc_weight * factor

    def collect_feats(self, image: torch.Tensor, **kwargs) -> dict[str, torch.Tensor]:
        return {}  # nothing to normalise with corpus statistics (the image transform normalises)


def check_drloc_schedule(
    warmup_epochs: int, decay_epochs: int | None, batches_per_epoch: int | None
) -> tuple[int, int | None, int] | None:
    """(W, T, batches per epoch) of a scheduled λ, or None for a constant one; bad values refused."""
    if warmup_epochs < 0:
        raise ConfigError(
            f"must be >= 0, not {warmup_epochs}", key="model_conf.drloc_warmup_epochs"
        )
    if decay_epochs is not None and decay_epochs <= warmup_epochs:
        raise ConfigError(
            f"the epoch where λ reaches 0 ({decay_epochs}) must come after the warm-up "
            f"({warmup_epochs} epochs)",
            key="model_conf.drloc_decay_epochs",
        )
    scheduled = warmup_epochs > 0 or decay_epochs is not None
    if batches_per_epoch is None:
        if scheduled:
            raise ConfigError(
                "a λ schedule in epochs needs the number of training batches per epoch "
                "(or drloc_warmup_epochs: 0 and drloc_decay_epochs: null for a constant λ)",
                key="model_conf.drloc_batches_per_epoch",
            )
        return None
    if batches_per_epoch < 1:
        raise ConfigError(
            f"must be >= 1, not {batches_per_epoch}", key="model_conf.drloc_batches_per_epoch"
        )
    return warmup_epochs, decay_epochs, int(batches_per_epoch)


def mark_swin_no_weight_decay(model: torch.nn.Module) -> None:
    """The Swin recipe's zero-decay set: 1-D parameters (norms, biases) and relative-position tables."""
    for name, param in model.named_parameters():
        if param.ndim == 1 or name.endswith("relative_position_bias_table"):
            param._no_weight_decay = True
