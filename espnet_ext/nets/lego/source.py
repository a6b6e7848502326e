"""Source sentences -> token ids the way an ESPnet2 MT model was trained to read them."""

from __future__ import annotations

from collections.abc import Callable

import torch


def source_encoder(train_args) -> Callable[[str], torch.Tensor]:
    """The model's own source tokenizer and token list (``src_token_type``, ``src_bpemodel``)."""
    from espnet2.text.build_tokenizer import build_tokenizer
    from espnet2.text.token_id_converter import TokenIDConverter

    tokenizer = build_tokenizer(train_args.src_token_type, train_args.src_bpemodel)
    converter = TokenIDConverter(train_args.src_token_list)
    return lambda text: torch.tensor(converter.tokens2ids(tokenizer.text2tokens(text)))
