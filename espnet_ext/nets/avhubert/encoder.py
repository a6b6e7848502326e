"""AV-HuBERT's Transformer encoder (fairseq's wav2vec 2.0 encoder) as an ESPnet2 encoder, video only.

The visual front-end (3D conv + ResNet-18, ``espnet_ext.nets.baselines.visual_frontend``) gives one
feature per frame; then, as in AV-HuBERT's ``extract_finetune`` with the audio stream absent:

    v = W_v f                                     video projection (feature_extractor_video.proj)
    x = W_post LayerNorm([0; v])                  "concat" fusion: zero audio half (or "add": LN(v))
    x = x + GELU(WeightNormConv1d(x))             convolutional relative positional embedding
    x = LayerNorm(x)                              (post-LN only; pre-LN normalises after the last layer)
    x = Layer_1 ... Layer_N (x)                   each dropped with probability p (LayerDrop) in training

A layer is fairseq's ``TransformerSentenceEncoderLayer``: self-attention and a GELU feed-forward net,
each with a residual connection, layer norm before (``layer_norm_first``) or after each block, and
dropout on the residual branch (``dropout_rate``), after the activation (``activation_dropout_rate``)
and on the attention weights (``attention_dropout_rate``).

The self-attention is ESPnet's ``MultiHeadedAttention`` (same projections and scaling as fairseq's), so
``attention_sites: {self_attn: {gamma: ...}}`` makes it relaxed (``espnet_ext.attention.sites``) and
``--matched_inference`` applies at decoding like for every other relaxed encoder. Registered in ESPnet's
ASR encoder table (which the lip-reading task uses) as ``relaxed_avhubert``, beside ESPnet's own
``avhubert`` (a wrapper of the fairseq model that needs fairseq installed); without attention sites it is
the plain AV-HuBERT encoder.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from espnet.nets.pytorch_backend.transformer.attention import MultiHeadedAttention
from espnet2.asr.encoder.abs_encoder import AbsEncoder

from espnet_ext.attention.sites import check_site_config, configure_attention_sites
from espnet_ext.errors import ConfigError
from espnet_ext.nets.compiled_layers import compile_layers_of
from espnet_ext.nets.padding import padding_mask

# The paper's two sizes (AV-HuBERT BASE and LARGE): layers, model dim, heads, FFN dim, pre-LN.
SIZES = {
    "base": dict(num_blocks=12, output_size=768, attention_heads=12, linear_units=3072,
                 layer_norm_first=False),
    "large": dict(num_blocks=24, output_size=1024, attention_heads=16, linear_units=4096,
                  layer_norm_first=True),
}  # fmt: skip
FUSIONS = ("concat", "add")


class ConvPositionalEmbedding(torch.nn.Module):
    """wav2vec 2.0's relative positional embedding: GELU(conv(x)), a grouped 1-D convolution over time.

    The kernel is weight-normalised over every dimension but the kernel position (``dim=2``):
    ``w[:, :, k] = g_k · v[:, :, k] / ||v[:, :, k]||``. An even kernel with padding K/2 gives one
    frame too many; the last is dropped ("SamePad"), so output length = input length.
    """

    def __init__(self, dim: int, kernel_size: int = 128, groups: int = 16):
        super().__init__()
        if dim % groups:
            raise ConfigError(f"{dim} is not divisible by {groups} groups", key="conv_pos_groups")
        self.kernel_size, self.groups = kernel_size, groups
        std = math.sqrt(4.0 / (kernel_size * dim))  # fairseq's initialisation
        v = torch.randn(dim, dim // groups, kernel_size) * std
        self.weight_v = torch.nn.Parameter(v)
        self.weight_g = torch.nn.Parameter(v.norm(dim=(0, 1), keepdim=True))  # (1, 1, K)
        self.bias = torch.nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, T, D)."""
        weight = self.weight_g * self.weight_v / self.weight_v.norm(dim=(0, 1), keepdim=True)
        y = F.conv1d(x.transpose(1, 2), weight, self.bias, padding=self.kernel_size // 2,
                     groups=self.groups)  # fmt: skip
        if self.kernel_size % 2 == 0:
            y = y[:, :, :-1]
        return F.gelu(y).transpose(1, 2)


class AVHubertEncoderLayer(torch.nn.Module):
    """fairseq's TransformerSentenceEncoderLayer: (pre- or post-LN) self-attention + GELU FFN."""

    def __init__(self, dim: int, heads: int, ffn_dim: int, dropout: float, activation_dropout: float,
                 attention_dropout: float, layer_norm_first: bool, use_sdpa: bool = False):  # fmt: skip
        super().__init__()
        self.self_attn = MultiHeadedAttention(heads, dim, attention_dropout, use_sdpa=use_sdpa)
        self.self_attn_layer_norm = torch.nn.LayerNorm(dim)
        self.fc1 = torch.nn.Linear(dim, ffn_dim)
        self.fc2 = torch.nn.Linear(ffn_dim, dim)
        self.final_layer_norm = torch.nn.LayerNorm(dim)
        self.dropout = torch.nn.Dropout(dropout)
        self.activation_dropout = torch.nn.Dropout(activation_dropout)
        self.layer_norm_first = layer_norm_first

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (B, T, D), mask (B, 1, T) with 1 = real frame."""
        residual = x
        if self.layer_norm_first:
            x = self.self_attn_layer_norm(x)
        x = residual + self.dropout(self.self_attn(x, x, x, mask))
        if not self.layer_norm_first:
            x = self.self_attn_layer_norm(x)
        residual = x
        if self.layer_norm_first:
            x = self.final_layer_norm(x)
        x = self.fc2(self.activation_dropout(F.gelu(self.fc1(x))))
        x = residual + self.dropout(x)
        if not self.layer_norm_first:
            x = self.final_layer_norm(x)
        return x


class AVHubertEncoder(AbsEncoder):
    """Video features ``(B, T, input_size)`` -> ``(B, T, output_size)``; see the module docstring.

    ``size: base|large`` fills the architecture (``SIZES``); explicit options override it. Defaults
    follow AV-HuBERT's fine-tuning configs: dropout 0.1 (residual), 0.1 (activation), 0.0
    (attention), LayerDrop 0.1, positional convolution 128 wide in 16 groups. ``compile_layers: true``
    compiles each layer with ``torch.compile`` (``espnet_ext.nets.compiled_layers``). ``use_sdpa: true``:
    ESPnet's own option of its MultiHeadedAttention, the attention through PyTorch's fused
    ``scaled_dot_product_attention`` (no weights kept: ``num_att_plot: 0``; a relaxed site computes
    its own weights while it relaxes). One layer's forward and backward then launches about 25 fewer
    operators (the weights' matmuls, masks, softmax, dropout and the copies around them).
    """

    def __init__(
        self,
        input_size: int,
        size: str | None = None,
        output_size: int | None = None,
        attention_heads: int | None = None,
        linear_units: int | None = None,
        num_blocks: int | None = None,
        layer_norm_first: bool | None = None,
        dropout_rate: float = 0.1,
        activation_dropout_rate: float = 0.1,
        attention_dropout_rate: float = 0.0,
        input_dropout_rate: float = 0.0,
        layerdrop: float = 0.1,
        conv_pos: int = 128,
        conv_pos_groups: int = 16,
        modality_fuse: str = "concat",
        attention_sites: Mapping | None = None,
        compile_layers: bool = False,
        compile_backend: str = "inductor",
        use_sdpa: bool = False,
    ):
        super().__init__()
        if size is not None and size not in SIZES:
            raise ConfigError(f"unknown size '{size}' (known: {', '.join(SIZES)})", key="size")
        given = dict(output_size=output_size, attention_heads=attention_heads,
                     linear_units=linear_units, num_blocks=num_blocks,
                     layer_norm_first=layer_norm_first)  # fmt: skip
        arch = {
            "layer_norm_first": False,  # fairseq's default
            **SIZES.get(size, {}),
            **{k: v for k, v in given.items() if v is not None},
        }
        missing = sorted(set(given) - set(arch))
        if missing:
            raise ConfigError(
                f"set size: base|large or give {', '.join(missing)}", key="encoder_conf"
            )
        if modality_fuse not in FUSIONS:
            raise ConfigError(f"'{modality_fuse}' is not one of {FUSIONS}", key="modality_fuse")
        if not 0.0 <= layerdrop <= 1.0:
            raise ConfigError(f"must be in [0, 1], got {layerdrop}", key="layerdrop")
        sites = check_site_config(attention_sites, ("self_attn",), "encoder relaxed_avhubert")
        dim = arch["output_size"]
        self._output_size = dim
        self.layer_norm_first = bool(arch["layer_norm_first"])
        self.layerdrop = layerdrop
        self.video_proj = torch.nn.Linear(input_size, dim)
        fused = 2 * dim if modality_fuse == "concat" else dim
        self.modality_fuse = modality_fuse
        self.fuse_norm = torch.nn.LayerNorm(fused)
        self.post_proj = torch.nn.Linear(fused, dim) if fused != dim else None
        self.input_dropout = torch.nn.Dropout(input_dropout_rate)
        self.pos_conv = ConvPositionalEmbedding(dim, conv_pos, conv_pos_groups)
        self.dropout = torch.nn.Dropout(dropout_rate)
        self.layers = torch.nn.ModuleList(
            AVHubertEncoderLayer(dim, arch["attention_heads"], arch["linear_units"], dropout_rate,
                                 activation_dropout_rate, attention_dropout_rate,
                                 self.layer_norm_first, use_sdpa)
            for _ in range(arch["num_blocks"])
        )  # fmt: skip
        self.layer_norm = torch.nn.LayerNorm(dim)
        self._init_bert_params()
        configure_attention_sites(self.layers, sites)
        if compile_layers:
            compile_layers_of(self, self.layers, compile_backend, "encoder_conf")

    def _init_bert_params(self) -> None:
        """fairseq's init_bert_params on the linear layers: N(0, 0.02) weights, zero biases."""
        for module in self.modules():
            if isinstance(module, torch.nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                torch.nn.init.zeros_(module.bias)

    def output_size(self) -> int:
        return self._output_size

    def forward(
        self, xs_pad: torch.Tensor, ilens: torch.Tensor, prev_states: torch.Tensor = None
    ) -> tuple[torch.Tensor, torch.Tensor, None]:
        padding = padding_mask(ilens, xs_pad.size(1), xs_pad.device)  # (B, T) True = pad
        x = self.video_proj(xs_pad)
        if self.modality_fuse == "concat":  # the absent audio stream's half is zeros
            x = torch.cat([torch.zeros_like(x), x], dim=-1)
        x = self.fuse_norm(x)
        if self.post_proj is not None:
            x = self.post_proj(x)
        x = self.input_dropout(x).masked_fill(padding[:, :, None], 0.0)
        x = x + self.pos_conv(x)
        if not self.layer_norm_first:
            x = self.layer_norm(x)
        x = self.dropout(x)
        mask = ~padding[:, None, :]
        for layer in self.layers:
            # a host-side draw: the generator is the CPU's, nothing is read back from a GPU
            if self.training and self.layerdrop > 0 and torch.rand(()).item() < self.layerdrop:
                continue  # LayerDrop (Fan et al. 2020): the layer is skipped for this batch
            x = layer(x, mask)
        if self.layer_norm_first:
            x = self.layer_norm(x)
        return x.masked_fill(padding[:, :, None], 0.0), ilens, None
