"""The decoder's start symbol per target language, for one-to-many and many-to-many translation.

A multilingual ST/MT decoder must be told which language to write: es speech may go to en, fr, it or pt.
ESPnet1's multilingual ST (Inaguma et al., 2019, ``--replace-sos``) starts decoding from a target-language
token instead of <sos>; fairseq forces a ``<lang:xx>`` prefix. Here the decoder's input stays
``<sos> y_1 ... y_n`` (ESPnet's token lists, beam search and output stripping unchanged) and the embedding
of the position-0 <sos> is replaced by a learned vector of the utterance's target language:

    E'(y)_{b,0} = s_{l_b}   where y_{b,0} = <sos>,    E'(y)_{b,t} = E(y)_{b,t} otherwise,

s in R^{L x d} (L target languages), l_b the utterance's target-language id. The hook runs on the
decoder's token embedding, which ESPnet's decoders apply to the whole prefix at every decoding step, so
training (teacher forcing) and beam search (prefixes of one utterance) both see s_{l}.
"""

from __future__ import annotations

import torch
from torch import nn

from espnet_ext.errors import ConfigError, InputError


class TargetLanguageStart(nn.Module):
    """s (languages, d); ``language_id`` (B,) or one id, set per batch / utterance before the decoder runs."""

    def __init__(self, num_languages: int, size: int, sos: int):
        super().__init__()
        if num_languages < 1:
            raise ConfigError(
                f"needs >= 1 target language, got {num_languages}", key="target_languages"
            )
        self.weight = nn.Parameter(torch.randn(num_languages, size) * size**-0.5)
        self.sos = sos
        self.language_id: torch.Tensor | None = None

    def set_language_id(self, language_id: torch.Tensor | None) -> None:
        if language_id is not None:
            language_id = torch.as_tensor(language_id).reshape(-1).long()
            bad = language_id[(language_id < 0) | (language_id >= self.weight.size(0))]
            if bad.numel():
                raise InputError(
                    f"target language id {int(bad[0])} unknown (0..{self.weight.size(0) - 1})",
                    key="target_language_id",
                )
        self.language_id = language_id

    def replace_start(self, tokens: torch.Tensor, embedded: torch.Tensor) -> torch.Tensor:
        """tokens (B, L), their embeddings (B, L, d) -> the embeddings with <sos> at position 0 replaced."""
        if self.language_id is None:
            raise InputError(
                "the decoder needs a target language per utterance", key="target_language_id"
            )
        ids = self.language_id.to(tokens.device)
        if ids.numel() == 1:
            ids = ids.expand(tokens.size(0))
        elif ids.numel() != tokens.size(0):
            raise InputError(
                f"{ids.numel()} target languages for {tokens.size(0)} rows",
                key="target_language_id",
            )
        starts = tokens[:, :1] == self.sos  # (B, 1)
        first = torch.where(starts, self.weight[ids].to(embedded.dtype), embedded[:, 0])
        return torch.cat([first.unsqueeze(1), embedded[:, 1:]], dim=1)


def token_embedding(decoder: nn.Module) -> nn.Embedding:
    """The nn.Embedding of an ESPnet decoder (``decoder.embed`` is it or a Sequential starting with it)."""
    embed = getattr(decoder, "embed", None)
    first = embed[0] if isinstance(embed, nn.Sequential) else embed
    if not isinstance(first, nn.Embedding):
        raise ConfigError(
            f"{type(decoder).__name__} has no token embedding to start from a target language",
            key="model_conf.target_languages",
        )
    return first


def attach_target_language_start(
    decoder: nn.Module, num_languages: int, sos: int
) -> TargetLanguageStart:
    """A TargetLanguageStart hooked on ``decoder``'s token embedding (returned; register it on the model)."""
    embedding = token_embedding(decoder)
    start = TargetLanguageStart(num_languages, embedding.embedding_dim, sos)
    embedding.register_forward_hook(lambda module, args, out: start.replace_start(args[0], out))
    return start
