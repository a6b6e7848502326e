"""LegoNN encoder modules (§III-B1) and their chain (§III-A2).

One module: an input layer (features, or an ingestor of the previous module's distributions) -> the
modality encoder (pre-LN Transformer blocks, eqs. 12-14) -> optionally the OLC (eqs. 15-19) -> the CTC
interface (eq. 6). A chain of modules is what ESPnet2 sees as the encoder: its output is the last module's
distribution, so ``output_size()`` is the size of that interface vocabulary and every module's output is
kept for its CTC loss (eq. 11).
"""

from __future__ import annotations

from pathlib import Path

import torch
from espnet.nets.pytorch_backend.transformer.embedding import PositionalEncoding
from espnet.nets.pytorch_backend.transformer.subsampling import Conv2dSubsampling
from espnet2.asr.encoder.abs_encoder import AbsEncoder

from espnet_ext.errors import ConfigError, InputError
from espnet_ext.nets.cnn_subsampling import Conv2dSubsampling4Layer
from espnet_ext.nets.lego.ingestors import INGESTORS, build_ingestor
from espnet_ext.nets.lego.interface import CTCInterface
from espnet_ext.nets.lego.layers import TransformerStack, length_mask, sinusoidal_positions
from espnet_ext.nets.lego.olc import OutputLengthController

FEATURE_INPUTS = ("none", "linear", "conv2d", "cnn")


def load_token_list(token_list: str | list[str], key: str) -> list[str]:
    """A token list given inline or as a file with one token per line."""
    if isinstance(token_list, (list, tuple)):
        tokens = list(token_list)
    else:
        path = Path(token_list)
        if not path.is_file():
            raise ConfigError(f"token list file {path} does not exist", key=key)
        tokens = path.read_text(encoding="utf-8").split("\n")
        tokens = [t.rstrip("\r") for t in tokens if t.strip()]
    if not tokens:
        raise ConfigError("the interface token list is empty", key=key)
    if tokens[0] != "<blank>":
        raise InputError(
            f"an interface vocabulary starts with <blank> (the CTC blank, id 0), not {tokens[0]!r}",
            key=key,
        )
    return tokens


class PositionedLinear(torch.nn.Module):
    """Features -> d, plus sinusoidal positions (the modality encoder has no other position signal)."""

    def __init__(self, input_size: int, dim: int):
        super().__init__()
        self.linear = torch.nn.Linear(input_size, dim)

    def forward(self, xs, lengths):
        h = self.linear(xs)
        return h + sinusoidal_positions(h.size(1), h.size(2), h.device), lengths


class Subsampled(torch.nn.Module):
    """ESPnet's 4x Conv2d subsampling for speech features, returning lengths instead of masks."""

    def __init__(self, input_size: int, dim: int, dropout_rate: float):
        super().__init__()
        self.conv = Conv2dSubsampling(input_size, dim, dropout_rate, PositionalEncoding(dim, 0.0))

    def forward(self, xs, lengths):
        h, _ = self.conv(xs, None)
        # Two kernel-3 stride-2 convolutions. Not ESPnet's subsampled mask, which counts one frame
        # more for some padded utterances (its length would depend on the batch).
        return h, ((lengths - 1) // 2 - 1) // 2


class CNNSubsampled(torch.nn.Module):
    """The VGG-style 3x3 CNN of ``espnet_ext.nets.cnn_subsampling`` (channels and strides as options):
    with few channels far cheaper than ESPnet's conv2d, whose 3x3 convolutions have d channels."""

    def __init__(self, input_size: int, dim: int, dropout_rate: float, channels, strides):
        super().__init__()
        self.conv = Conv2dSubsampling4Layer(input_size, dim, dropout_rate, channels, strides)

    def forward(self, xs, lengths):
        h, mask = self.conv(xs, length_mask(lengths, xs.size(1)))
        return h, mask[:, 0].sum(dim=-1)


class Identity(torch.nn.Module):
    def forward(self, xs, lengths):
        return xs, lengths


def build_input_layer(
    kind: str, input_size: int, dim: int, dropout_rate: float, ingestor: dict, cnn: dict
):
    if kind in INGESTORS:
        return build_ingestor(kind, input_size, dim, **ingestor)
    if kind == "none":
        if input_size != dim:
            raise ConfigError(
                f"input_layer none needs input_size == output_size, got {input_size} != {dim}",
                key="input_layer",
            )
        return Identity()
    if kind == "linear":
        return PositionedLinear(input_size, dim)
    if kind == "conv2d":
        return Subsampled(input_size, dim, dropout_rate)
    if kind == "cnn":
        return CNNSubsampled(input_size, dim, dropout_rate, **cnn)
    raise ConfigError(
        f"unknown input layer {kind!r}; one of {[*FEATURE_INPUTS, *INGESTORS]}", key="input_layer"
    )


class LegoEncoderModule(torch.nn.Module):
    """One LegoNN encoder module, ending in a distribution over its interface vocabulary."""

    def __init__(
        self,
        input_size: int,
        token_list: str | list[str],
        input_layer: str = "none",
        ingestor: dict | None = None,
        output_size: int = 256,
        attention_heads: int = 4,
        linear_units: int = 1024,
        num_blocks: int = 6,
        dropout_rate: float = 0.1,
        attention_dropout_rate: float = 0.0,
        olc: dict | None = None,
        conv_channels: list[int] = (64, 64, 128, 128),
        conv_strides: list[int] = (1, 2, 1, 2),
    ):
        super().__init__()
        self.token_list = load_token_list(token_list, "token_list")
        self.input_kind = input_layer
        self.input_layer = build_input_layer(
            input_layer,
            input_size,
            output_size,
            dropout_rate,
            ingestor or {},
            dict(channels=conv_channels, strides=conv_strides),
        )
        self.modality_encoder = TransformerStack(
            output_size,
            num_blocks,
            attention_heads,
            linear_units,
            dropout_rate,
            attention_dropout_rate,
        )
        self.olc = None
        if olc is not None:
            olc_conf = dict(
                attention_heads=attention_heads,
                linear_units=linear_units,
                dropout_rate=dropout_rate,
                attention_dropout_rate=attention_dropout_rate,
            )
            olc_conf.update(olc)
            self.olc = OutputLengthController(output_size, **olc_conf)
        self.interface = CTCInterface(output_size, len(self.token_list))

    @property
    def vocab_size(self) -> int:
        return len(self.token_list)

    def forward(self, xs: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T, input_size) -> log-probabilities (B, K, |V_CTC|) and K (B,)."""
        h, lengths = self.input_layer(xs, lengths)
        h = self.modality_encoder(h, length_mask(lengths, h.size(1)))
        if self.olc is not None:
            h, lengths = self.olc(h, lengths)
        return self.interface(h), lengths


class LegoNNEncoder(AbsEncoder):
    """M-1 encoder modules in a chain; ``modules`` lists each one's ``LegoEncoderModule`` arguments."""

    def __init__(self, input_size: int, modules: list[dict]):
        super().__init__()
        if not modules:
            raise ConfigError(
                "a LegoNN encoder needs at least one module", key="encoder_conf.modules"
            )
        chain = []
        size = input_size
        for i, conf in enumerate(modules):
            kind = conf.get("input_layer", "none")
            if (i == 0) == (kind in INGESTORS):
                raise ConfigError(
                    "the first module reads features (input_layer none/linear/conv2d/cnn), every later "
                    f"one ingests distributions (wemb/beamconv); module {i} has {kind!r}",
                    key=f"encoder_conf.modules[{i}].input_layer",
                )
            chain.append(LegoEncoderModule(size, **conf))
            size = chain[-1].vocab_size
        self.encoder_modules = torch.nn.ModuleList(chain)

    def output_size(self) -> int:
        return self.encoder_modules[-1].vocab_size

    @property
    def token_lists(self) -> list[list[str]]:
        return [m.token_list for m in self.encoder_modules]

    def forward(self, xs_pad, ilens, prev_states=None):
        """-> last module's log-probabilities, its lengths, and [(log_probs, lengths)] of every module."""
        outputs = []
        h, lengths = xs_pad, ilens
        for module in self.encoder_modules:
            h, lengths = module(h, lengths)
            outputs.append((h, lengths))
        return h, lengths, outputs
