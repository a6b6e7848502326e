"""Lip-reading baseline parts: a 3D-conv + ResNet-18 visual frontend and ESPnet's ASR model reading video.

``Conv3dResNetFrontend`` wraps ESPnet's ``ResEncoder`` (AV-HuBERT's visual stem: one 5x7x7 3D
convolution over time and space, then a 2D ResNet-18 applied to every frame): grey mouth crops ``(B,
T, H, W)`` in [0, 1] (88x88 in LRS3) become one feature vector per frame, ``(B, T, D)``. For CPU
budgets it can be made lighter: ``resnet_stages`` keeps only the first ResNet stages (64, 128, 256,
512 channels), ``frame_pool`` average-pools the frames spatially first, ``output_size`` projects.
``crop_size`` crops the frames to that square first: the centre one, and with ``augment`` in training
AV-HuBERT's ``image_aug`` (avhubert/hubert_dataset.py and utils.py: ``RandomCrop`` then
``HorizontalFlip(0.5)``, applied to the training split only): one random offset per utterance and a
mirror image of the whole utterance with probability 1/2 (e.g. 88x88 out of the 96x96 ROIs its
``align_mouth.py`` stores). ``channels_last: true`` keeps the convolutions' weights, and so their
activations, in PyTorch's channels-last layouts (NDHWC for the 3D stem, NHWC for the ResNet): the
layout of cuDNN's tensor-core kernels, which would otherwise transpose NCHW activations around each
convolution under AMP (PyTorch's performance guide; not yet measured here). The parameters keep their
names and values; a state dict loads into them unchanged.

``ESPnetVSRModel`` is ESPnet's ``ESPnetASRModel`` (encoder, decoder, CTC, losses, the interface
ESPnet's beam search scores) whose input is named ``video``. ``freeze_finetune_updates: N`` (model_conf)
is AV-HuBERT's fine-tuning freeze (facebookresearch/av_hubert avhubert/hubert_asr.py,
``AVHubertSeq2Seq.forward``): for the first N optimizer updates the pre-trained part (front-end and
encoder) runs under ``torch.no_grad()``, still in training mode (dropout, LayerDrop, batch-norm
statistics as in fairseq), so only the decoder learns; from update N on everything does.

AV-HuBERT's fine-tuning decoder (``AVHubertSeq2SeqConfig``; its conf/finetune/*.yaml) shares the input
embedding with the output projection (``share_decoder_input_output_embed: true``), initialises that
table N(0, d^-1/2) with a zero padding row, and adds the positional encoding to the unscaled embedding
(``no_scale_embedding: true``); model_conf ``share_decoder_input_output_embed`` and
``scale_decoder_embedding: false`` do the same with ESPnet's Transformer decoder (its output bias stays,
zero-initialised).
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from espnet2.asr.encoder.avhubert_encoder import ResEncoder
from espnet2.asr.espnet_model import ESPnetASRModel
from espnet2.asr.frontend.abs_frontend import AbsFrontend

from espnet_ext.errors import ConfigError
from espnet_ext.nets.padding import padding_mask

# Mean and standard deviation of LRS3 grey mouth crops in [0, 1] (the AV-HuBERT preprocessing).
LRS3_PIXEL_MEAN = 0.421
LRS3_PIXEL_STD = 0.165


class Conv3dResNetFrontend(AbsFrontend):
    def __init__(
        self,
        relu_type: str = "prelu",
        resnet_stages: int = 4,
        frame_pool: int = 1,
        output_size: int | None = None,
        pixel_mean: float = LRS3_PIXEL_MEAN,
        pixel_std: float = LRS3_PIXEL_STD,
        weights: str | None = None,
        crop_size: int | None = None,
        augment: bool = False,
        channels_last: bool = False,
    ):
        super().__init__()
        if not 1 <= resnet_stages <= 4:
            raise ConfigError(f"must be 1..4, got {resnet_stages}", key="resnet_stages")
        if crop_size is not None and crop_size < 1:
            raise ConfigError(f"must be a positive size, got {crop_size}", key="crop_size")
        if augment and crop_size is None:
            raise ConfigError("augment crops at random: set crop_size too", key="augment")
        self.crop_size, self.augment = crop_size, augment
        self.res_encoder = ResEncoder(relu_type=relu_type, weights=weights)
        for stage in range(
            resnet_stages + 1, 5
        ):  # drop the widest stages: fewer, narrower features
            setattr(self.res_encoder.trunk, f"layer{stage}", torch.nn.Identity())
        if channels_last:  # Module.to converts the 4-D (or 5-D) weights; biases and norms stay 1-D
            self.res_encoder.frontend3D.to(memory_format=torch.channels_last_3d)
            self.res_encoder.trunk.to(memory_format=torch.channels_last)
        features = 64 * 2 ** (resnet_stages - 1)
        self.projection = None if output_size is None else torch.nn.Linear(features, output_size)
        self.frame_pool = frame_pool
        self.pixel_mean = pixel_mean
        self.pixel_std = pixel_std
        self._output_size = features if output_size is None else output_size

    def output_size(self) -> int:
        return self._output_size

    def crop(self, video: torch.Tensor) -> torch.Tensor:
        """(B, T, H, W) -> (B, T, crop_size, crop_size): centre crop, or (training with ``augment``) a
        random crop and horizontal flip per utterance."""
        size = self.crop_size
        height, width = video.shape[-2:]
        if height < size or width < size:
            raise ValueError(f"frames of {height}x{width} are smaller than crop_size {size}")
        if not (self.training and self.augment):
            top, left = (height - size) // 2, (width - size) // 2  # AV-HuBERT's CenterCrop
            return video[..., top : top + size, left : left + size]
        out = []
        for utterance in video:
            top = int(torch.randint(0, height - size + 1, ()))
            left = int(torch.randint(0, width - size + 1, ()))
            patch = utterance[..., top : top + size, left : left + size]
            out.append(patch.flip(-1) if torch.rand(()) < 0.5 else patch)
        return torch.stack(out)

    def forward(
        self, input: torch.Tensor, input_lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if input.dim() != 4:
            raise ValueError(f"expected grey video (B, T, H, W), got shape {tuple(input.shape)}")
        padding = padding_mask(input_lengths, input.size(1), input.device)  # (B, T)
        if self.crop_size is not None:
            input = self.crop(input)
        x = (input - self.pixel_mean) / self.pixel_std
        # Padded frames must be zeros after normalisation, like the 3D conv's own zero padding in
        # time: then an utterance gives the same features alone or in a padded batch.
        x = x.masked_fill(padding[:, :, None, None], 0.0)
        if self.frame_pool > 1:
            x = F.avg_pool2d(x, self.frame_pool)  # pools H, W of every frame
        x = self.res_encoder(x.unsqueeze(1)).transpose(
            1, 2
        )  # (B, 1, T, H, W) -> (B, D, T) -> (B, T, D)
        if self.projection is not None:
            x = self.projection(x)
        return x.masked_fill(padding[:, :, None], 0.0), input_lengths


class ESPnetVSRModel(ESPnetASRModel):
    """ESPnet's ASR model trained on ``video`` (the frontend turns frames into features).

    ``freeze_finetune_updates``: see the module docstring. ESPnet's trainer tells a model nothing
    about its updates, so the model counts its training-mode forward passes (one per mini-batch;
    ``accum_grad`` of them make an update, the task passes the trainer's ``--accum_grad``) in a buffer
    that is saved with the model: a resumed run goes on counting. The buffer exists only when
    freezing is on, so other models' state dicts stay as they were. Parameters without a gradient are
    left alone by the optimizer (torch's Adam skips them, as fairseq's did); under DDP set
    ``unused_parameters: true`` (fairseq's ``find_unused_parameters``).
    """

    def __init__(
        self,
        *args,
        freeze_finetune_updates: int = 0,
        accum_grad: int = 1,
        share_decoder_input_output_embed: bool = False,
        scale_decoder_embedding: bool = True,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        if share_decoder_input_output_embed or not scale_decoder_embedding:
            self._fairseq_decoder_embedding(
                share_decoder_input_output_embed, scale_decoder_embedding
            )
        if not isinstance(freeze_finetune_updates, int) or freeze_finetune_updates < 0:
            raise ConfigError(
                f"must be a number of updates >= 0, got {freeze_finetune_updates!r}",
                key="model_conf.freeze_finetune_updates",
            )
        if not isinstance(accum_grad, int) or accum_grad < 1:
            raise ConfigError(f"must be >= 1, got {accum_grad!r}", key="accum_grad")
        self.freeze_finetune_updates = freeze_finetune_updates
        self.accum_grad = accum_grad
        self._freeze_now = False
        # the buffer's value on the host: read once (after construction or a load), then counted beside it,
        # so that no training batch waits for the device to tell whether the encoder is frozen
        self._batches_seen: int | None = None
        if freeze_finetune_updates:
            self.register_buffer("finetune_batches", torch.zeros((), dtype=torch.long))

    def _fairseq_decoder_embedding(self, share: bool, scale: bool) -> None:
        embed = getattr(self.decoder, "embed", None)
        table = embed[0] if isinstance(embed, torch.nn.Sequential) else None
        positions = embed[-1] if isinstance(embed, torch.nn.Sequential) else None
        output = getattr(self.decoder, "output_layer", None)
        if not isinstance(table, torch.nn.Embedding) or not hasattr(positions, "xscale"):
            raise ConfigError(
                "needs a decoder with an embedding table and positional encoding "
                f"(ESPnet's Transformer decoder), not {type(self.decoder).__name__}",
                key="model_conf.share_decoder_input_output_embed",
            )
        if not scale:
            positions.xscale = 1.0  # PositionalEncoding: x * xscale + PE
        if share:
            if not isinstance(output, torch.nn.Linear) or output.weight.shape != table.weight.shape:
                raise ConfigError(
                    "the decoder's output layer must be (vocabulary x attention dim) like its "
                    "embedding table",
                    key="model_conf.share_decoder_input_output_embed",
                )
            dim = table.embedding_dim
            torch.nn.init.normal_(table.weight, mean=0.0, std=dim**-0.5)  # fairseq's Embedding()
            if table.padding_idx is not None:
                torch.nn.init.zeros_(table.weight[table.padding_idx])
            torch.nn.init.zeros_(output.bias)
            output.weight = table.weight

    def finetune_updates(self) -> int:
        """Optimizer updates completed so far (counted since training began)."""
        if not self.freeze_finetune_updates:
            return 0
        if self._batches_seen is None:
            self._batches_seen = int(self.finetune_batches)
        return self._batches_seen // self.accum_grad

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._batches_seen = None  # a resumed or initialised count: read again

    def encoder_frozen(self) -> bool:
        """Whether the next training batch leaves the front-end and encoder unchanged (fairseq:
        ``freeze_finetune_updates > num_updates``)."""
        return self.finetune_updates() < self.freeze_finetune_updates

    def forward(
        self,
        video: torch.Tensor,
        video_lengths: torch.Tensor,
        text: torch.Tensor,
        text_lengths: torch.Tensor,
        **kwargs,
    ):
        if self.training and self.freeze_finetune_updates and getattr(self, "_is_replica", False):
            # DataParallel replicas drop in-place buffer updates: the count would never move.
            raise ConfigError(
                "counts updates in the model: train with DDP (--multiprocessing_distributed true, "
                "as the recipes' launcher does for several GPUs), not DataParallel",
                key="model_conf.freeze_finetune_updates",
            )
        self._freeze_now = self.training and self.encoder_frozen()
        if self.training and self.freeze_finetune_updates:
            self.finetune_batches += 1
            self._batches_seen += 1  # read from the buffer by encoder_frozen() the first time
        try:
            return super().forward(video, video_lengths, text, text_lengths, **kwargs)
        finally:
            self._freeze_now = False

    def encode(self, speech: torch.Tensor, speech_lengths: torch.Tensor):
        with torch.no_grad() if self._freeze_now else contextlib.nullcontext():
            return super().encode(speech, speech_lengths)

    def collect_feats(
        self, video: torch.Tensor, video_lengths: torch.Tensor, **kwargs
    ) -> dict[str, torch.Tensor]:
        # The frontend is trained with the model, so its outputs have no fixed corpus statistics to
        # collect.
        return {}
