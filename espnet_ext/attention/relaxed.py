"""Relaxed attention (Lohrenz et al., "Relaxed attention for transformer models", eq. 1).

    G̃ = (1 - γ) · G + γ / T

G are the attention weights of one query over the keys, T the number of keys that query may see (its
unmasked keys: it differs per utterance of a padded batch, and per query under a causal mask). Masked keys
keep weight 0, so every row of G̃ still sums to 1. Attention dropout acts on G̃, as in the paper (A.6).

Relaxation applies in training only (the paper's default) or in training and inference ("matched
inference"). With dropout off -- always at inference -- relaxed attention is linear in G:

    G̃ V = (1 - γ) · softmax(E) V + γ · mean_{unmasked t} V_t

so the first term runs in PyTorch's fused ``scaled_dot_product_attention`` and the second is one masked
mean, and the T x T weight matrix is never materialised.

``RelaxedMultiHeadedAttention`` is ESPnet's ``MultiHeadedAttention`` with the weights changed in one
place; with γ = 0 and softmax weights it *is* ESPnet's module (its own forward runs), so stock ESPnet
checkpoints load and behave identically. ``smooth_focus=True`` replaces the softmax by Chorowski et al.'s
sigmoid-renormalised weights (``espnet_ext.attention.smooth_focus``), the paper's reference method.
"""

from __future__ import annotations

import math

import torch
from espnet.nets.pytorch_backend.transformer.attention import MultiHeadedAttention

from espnet_ext.attention.gamma import check_gamma
from espnet_ext.attention.mask_cache import PerMask, additive_mask
from espnet_ext.attention.smooth_focus import smooth_focus_weights
from espnet_ext.errors import ConfigError


def unmasked_keys(mask: torch.Tensor) -> torch.Tensor:
    """T per query: ``mask`` (B, 1|L, T) with 1 = may attend -> float counts (B, 1, 1|L, 1), at least 1."""
    return mask.sum(dim=-1, keepdim=True).unsqueeze(1).clamp(min=1).to(torch.get_default_dtype())


def relax_weights(weights: torch.Tensor, gamma: float, mask: torch.Tensor | None) -> torch.Tensor:
    """Eq. (1) on attention weights ``weights`` (B, H, L, T); ``mask`` (B, 1|L, T) or None (all keys)."""
    if mask is None:
        return (1.0 - gamma) * weights + gamma / weights.size(-1)
    keep = mask.unsqueeze(1).to(weights.dtype)  # (B, 1, 1|L, T)
    uniform = keep / unmasked_keys(mask).to(weights.dtype)
    return (1.0 - gamma) * weights + gamma * uniform


def masked_mean_values(value: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Mean of ``value`` (B, H, T, d) over each query's unmasked keys -> (B, H, 1|L, d)."""
    if mask is None:
        return value.mean(dim=-2, keepdim=True)
    keep = mask.unsqueeze(1).to(value.dtype)  # (B, 1, 1|L, T)
    return torch.matmul(keep, value) / unmasked_keys(mask).to(value.dtype)


def fused_mask_terms(mask: torch.Tensor, dtype: torch.dtype):
    """What the fused path derives from ``mask`` (B, 1|L, T): the kernel's additive mask (B, 1, 1|L, T), 0
    or -inf in ``dtype`` (a boolean one the kernel would convert in every layer), the uniform weights 1/T
    over each query's unmasked keys (B, 1, 1|L, T) in ``dtype`` (so the masked mean of V is one product),
    and the queries with no visible key (B, 1, 1|L, 1)."""
    keep = mask.unsqueeze(1).bool()
    return (
        additive_mask(keep, dtype),
        keep.to(dtype) / unmasked_keys(mask).to(dtype),
        ~keep.any(dim=-1, keepdim=True),
    )


FUSED_MASK_TERMS = PerMask()  # per padding mask: computed once per forward, not per layer


class RelaxedMultiHeadedAttention(MultiHeadedAttention):
    """ESPnet multi-head attention with relaxed (eq. 1) and/or smooth-focus (eq. 4) attention weights.

    Args (beyond ESPnet's): ``gamma`` relaxation coefficient in [0, 1]; ``matched_inference`` relax at
    inference too; ``smooth_focus`` sigmoid instead of exp in the softmax; ``fused`` use the
    scaled-dot-product kernel whenever attention dropout is inactive (same result to float rounding).
    """

    def __init__(
        self,
        n_head: int,
        n_feat: int,
        dropout_rate: float,
        gamma: float = 0.0,
        matched_inference: bool = False,
        smooth_focus: bool = False,
        fused: bool = True,
        **espnet_kwargs,
    ):
        super().__init__(n_head, n_feat, dropout_rate, **espnet_kwargs)
        self.configure(
            gamma=gamma, matched_inference=matched_inference, smooth_focus=smooth_focus, fused=fused
        )

    @classmethod
    def from_attention(
        cls, attention: MultiHeadedAttention, **config
    ) -> RelaxedMultiHeadedAttention:
        """The same module (same parameter tensors, same state-dict keys) with relaxed weights.

        No new parameters are created, so building a relaxed model consumes exactly the random numbers the
        plain one does: the same seed gives the same initial weights.
        """
        if type(attention) is not MultiHeadedAttention:
            raise ConfigError(
                f"relaxed attention replaces ESPnet's MultiHeadedAttention, not {type(attention).__name__} "
                "(relative-position attention computes its scores differently)"
            )
        relaxed = cls.__new__(cls)
        relaxed.__dict__.update(
            attention.__dict__
        )  # torch.nn.Module state: parameters, submodules, hooks
        relaxed.configure(**config)
        return relaxed

    def configure(
        self,
        gamma: float = 0.0,
        matched_inference: bool = False,
        smooth_focus: bool = False,
        fused: bool = True,
    ) -> None:
        self.gamma = check_gamma(gamma)
        self.matched_inference = bool(matched_inference)
        self.smooth_focus = bool(smooth_focus)
        self.fused = bool(fused)
        if self.use_flash_attn and (self.gamma > 0 or self.smooth_focus):
            self.use_flash_attn = False  # flash-attn has no hook for changed weights
            # ESPnet builds a flash module with nn.Identity dropout (the kernel drops internally): the
            # weights path needs the real dropout back, or attention dropout silently disappears.
            if isinstance(self.dropout, torch.nn.Identity):
                self.dropout = torch.nn.Dropout(p=self.dropout_rate)

    def extra_repr(self) -> str:
        return (
            f"gamma={self.gamma}, matched_inference={self.matched_inference}, "
            f"smooth_focus={self.smooth_focus}, fused={self.fused}"
        )

    @property
    def weightless_reason(self) -> str | None:
        """Why an evaluation forward keeps no weights in ``attn`` (ESPnet's attention plots read them)."""
        if self.gamma > 0 and self.matched_inference and self.fused and not self.smooth_focus:
            return "relaxed matched inference through the fused path keeps no weights"
        return None

    @property
    def relaxing(self) -> bool:
        """Whether eq. (1) applies in the current mode (train, or eval with matched inference)."""
        return self.gamma > 0 and (self.training or self.matched_inference)

    def forward(self, query, key, value, mask, expand_kv: bool = False):
        if not self.relaxing and not self.smooth_focus:
            return super().forward(query, key, value, mask, expand_kv)  # exactly ESPnet's attention
        q, k, v = self.forward_qkv(query, key, value, expand_kv)
        dropout_active = self.training and self.dropout_rate > 0
        if self.fused and not self.smooth_focus and not dropout_active:
            return self._fused_relaxed(q, k, v, mask)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_k)
        return self.forward_attention(v, scores, mask)

    def forward_attention(self, value, scores, mask):
        """ESPnet's contract: weights from ``scores``, dropout, weighted sum of ``value``, output projection."""
        if self.smooth_focus:
            weights = smooth_focus_weights(scores, mask)
        elif mask is not None:
            masked = mask.unsqueeze(1).eq(0)
            weights = torch.softmax(
                scores.masked_fill(masked, torch.finfo(scores.dtype).min), dim=-1
            )
            weights = weights.masked_fill(masked, 0.0)
        else:
            weights = torch.softmax(scores, dim=-1)
        if self.relaxing:
            weights = relax_weights(weights, self.gamma, mask)
        self.attn = weights
        context = torch.matmul(self.dropout(weights), value)  # (B, H, L, d_k)
        return self.linear_out(self._merge_heads(context))

    def _fused_relaxed(self, q, k, v, mask):
        if mask is None:
            context = torch.nn.functional.scaled_dot_product_attention(q, k, v)
            context = torch.lerp(context, masked_mean_values(v, None), self.gamma)
        else:
            attn_mask, uniform, empty = FUSED_MASK_TERMS.get(
                mask, v.dtype, lambda: fused_mask_terms(mask, v.dtype)
            )
            context = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
            # (1 - γ)·context + γ·mean; a query with no visible key gets NaN from the kernel and a zero
            # mean, and ESPnet gives it zero weights.
            context = torch.lerp(context, torch.matmul(uniform, v), self.gamma).masked_fill(
                empty, 0.0
            )
        self.attn = None  # weights were never materialised
        return self.linear_out(self._merge_heads(context))

    def _merge_heads(self, context: torch.Tensor) -> torch.Tensor:
        batch, heads, length, d_k = context.shape
        return context.transpose(1, 2).reshape(batch, length, heads * d_k)
