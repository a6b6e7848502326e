"""CRNN (Shi et al., 2015): CNN -> BiLSTM -> CTC, the baseline model of ``ImageToSequenceTask``.

Input images arrive width-first, ``(B, W, H[, C])`` with their widths as lengths (the task's
preprocessor transposes them, so ESPnet's collate pads the width). The CNN halves the height after
every block and the width after the blocks listed in ``width_pooling``; each remaining column is one
BiLSTM time step, scored by ESPnet's ``CTC`` (token 0 is the blank). Decoding is greedy: best token
per column, repeats merged, blanks dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

import editdistance
import torch
from espnet2.asr.ctc import CTC
from espnet2.torch_utils.device_funcs import force_gatherable
from espnet2.train.abs_espnet_model import AbsESPnetModel

from espnet_ext.errors import ConfigError


class CRNN(AbsESPnetModel):
    def __init__(
        self,
        vocab_size: int,
        token_list: Sequence[str] = (),
        in_channels: int = 1,
        image_height: int = 32,
        channels: Sequence[int] = (32, 64, 128),
        width_pooling: Sequence[bool] = (True, True, False),
        lstm_units: int = 128,
        lstm_layers: int = 2,
        dropout_rate: float = 0.1,
    ):
        super().__init__()
        if len(width_pooling) != len(channels):
            raise ConfigError(
                f"needs one entry per CNN block ({len(channels)} channels), got {len(width_pooling)}",
                key="width_pooling",
            )
        self.vocab_size = vocab_size
        self.token_list = list(token_list)
        self.in_channels = in_channels
        self.image_height = image_height
        self.width_pooling = list(width_pooling)
        layers = []
        previous, height = in_channels, image_height
        for width, pool_width in zip(channels, width_pooling):
            layers += [
                torch.nn.Conv2d(previous, width, 3, padding=1, bias=False),
                torch.nn.BatchNorm2d(width),
                torch.nn.ReLU(inplace=True),
                torch.nn.MaxPool2d((2, 2 if pool_width else 1)),
            ]
            previous, height = width, height // 2
        if height < 1:
            raise ConfigError(
                f"{image_height} is too small for {len(channels)} blocks halving the height",
                key="image_height",
            )
        self.cnn = torch.nn.Sequential(*layers)
        self.lstm = torch.nn.LSTM(
            previous * height,
            lstm_units,
            num_layers=lstm_layers,
            batch_first=True,
            bidirectional=True,
            dropout=dropout_rate if lstm_layers > 1 else 0.0,
        )
        self.dropout = torch.nn.Dropout(dropout_rate)
        self.ctc = CTC(odim=vocab_size, encoder_output_size=2 * lstm_units)

    def encode(
        self, image: torch.Tensor, image_lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Width-first images (B, W, H[, C]) -> column features (B, W', 2*lstm_units) and lengths W'."""
        x = image.unsqueeze(-1) if image.dim() == 3 else image
        if x.dim() != 4 or x.size(2) != self.image_height or x.size(3) != self.in_channels:
            raise ValueError(
                f"expected width-first images (B, W, {self.image_height}[, {self.in_channels}]), "
                f"got shape {tuple(image.shape)}"
            )
        x = self.cnn(x.permute(0, 3, 2, 1))  # (B, C, H, W)
        lengths = image_lengths
        for pool_width in self.width_pooling:
            if pool_width:
                lengths = lengths // 2
        lengths = lengths.clamp(min=1, max=x.size(-1))
        x = x.flatten(1, 2).transpose(1, 2)  # (B, W', C * H')
        packed = torch.nn.utils.rnn.pack_padded_sequence(
            x, lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        x, _ = self.lstm(packed)
        x, _ = torch.nn.utils.rnn.pad_packed_sequence(
            x, batch_first=True, total_length=lengths.max().item()
        )
        return self.dropout(x), lengths

    def greedy_decode(self, encoded: torch.Tensor, lengths: torch.Tensor) -> list[list[int]]:
        best = self.ctc.argmax(encoded)
        hypotheses = []
        for path, length in zip(best, lengths.tolist()):
            tokens = torch.unique_consecutive(path[:length])
            hypotheses.append([t for t in tokens.tolist() if t != 0])
        return hypotheses

    def recognize(self, image: torch.Tensor, image_lengths: torch.Tensor) -> list[list[int]]:
        return self.greedy_decode(*self.encode(image, image_lengths))

    def forward(
        self,
        image: torch.Tensor,
        image_lengths: torch.Tensor,
        text: torch.Tensor,
        text_lengths: torch.Tensor,
        **kwargs,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
        encoded, lengths = self.encode(image, image_lengths)
        loss = self.ctc(encoded, lengths, text, text_lengths)
        stats = dict(loss=loss.detach())
        if (
            not self.training
        ):  # greedy decoding scores for validation: token error rate, exact-match accuracy
            references = [ref[:n].tolist() for ref, n in zip(text, text_lengths.tolist())]
            hypotheses = self.greedy_decode(encoded, lengths)
            errors = sum(editdistance.eval(h, r) for h, r in zip(hypotheses, references))
            stats["cer"] = torch.tensor(errors / max(1, sum(len(r) for r in references)))
            stats["acc"] = torch.tensor(
                sum(h == r for h, r in zip(hypotheses, references)) / len(references)
            )
        return force_gatherable((loss, stats, image.size(0)), loss.device)

    def collect_feats(
        self, image: torch.Tensor, image_lengths: torch.Tensor, **kwargs
    ) -> dict[str, torch.Tensor]:
        return {}  # pixels are already in [0, 1]; nothing to normalise with corpus statistics
