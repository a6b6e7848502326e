"""(Shifted) window self-attention of the Swin transformer, with relaxed and fuzzy relaxed weights
(Lohrenz et al., relaxed-attention paper, §3 and A.2, eq. 3).

    G̃ = (1 - γ) · G + γ / M²                                                           (3)

G (M² x M²) are the attention weights of one head inside one M x M window, G = softmax(E) with
E = Q Kᵀ / √d + R_pos (+ the shifted-window mask). Eq. (1)'s key count T is the constant window size M²,
so this is ``relaxed.relax_weights`` without a key mask and the same linear form at inference.

Shifted windows: after the cyclic shift a window can hold tokens from up to four image regions that are
not neighbours; Swin keeps a query from attending across regions by adding -100 to those scores, so G
gives them (almost exactly) zero weight. Eq. (3) spreads γ over *all* M² positions of the window, as the
paper writes it: a masked position gets weight γ / M² (only the relaxation term), an unmasked one
(1 - γ) G + γ / M², and every row still sums to 1. The uniform part thus reaches the whole window,
including the wrapped-around tokens the mask hides from the softmax.

Fuzzy relaxation: in training γ ~ N(γ0, σ²) is drawn anew on every forward call of the module (each
layer draws its own), clipped to [0, 1]; at inference γ = γ0 (with ``matched_inference``) or 0.
Relaxation applies in training only unless ``matched_inference``; ``smooth_focus`` replaces the
softmax by the sigmoid-normalised weights of ``smooth_focus`` (the reference method).

With γ = 0 and softmax weights the module computes exactly Swin's window attention (timm's
``WindowAttention`` with the same weights gives the same output).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from espnet_ext.attention.gamma import check_gamma
from espnet_ext.attention.relaxed import masked_mean_values, relax_weights
from espnet_ext.attention.smooth_focus import smooth_focus_weights
from espnet_ext.errors import ConfigError

# Swin's additive score for a query/key pair from different regions of a shifted window.
SHIFT_MASK_SCORE = -100.0


def relative_position_index(window: int) -> torch.Tensor:
    """(M², M²) index into the (2M-1)² bias table: row i, column j -> offset of token i from token j."""
    coords = torch.stack(
        torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")
    ).flatten(1)  # (2, M²): (row, column) of each token
    offset = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (window - 1)
    return offset[..., 0] * (2 * window - 1) + offset[..., 1]


def sample_fuzzy_gamma(gamma0: float, std: float, device=None) -> torch.Tensor:
    """One draw of γ ~ N(γ0, std²) clipped to [0, 1], as a 0-dim tensor (no host sync on GPUs)."""
    return torch.empty((), device=device).normal_(gamma0, std).clamp_(0.0, 1.0)


class WindowAttention(torch.nn.Module):
    """Multi-head self-attention inside windows, with a learned relative position bias.

    Input (B·nW, M², C) window tokens; ``mask`` (nW, M², M²) bool, True = same region (may attend),
    or None for unshifted windows. Parameter names follow the Swin reference (qkv, proj,
    relative_position_bias_table).

    Args: ``gamma`` γ0 of eq. (3); ``fuzzy_std`` σ of fuzzy relaxation (0: fixed γ);
    ``matched_inference`` relax at inference too (γ = γ0); ``smooth_focus`` sigmoid instead of exp;
    ``fused`` PyTorch's scaled-dot-product kernel for the softmax part (same result to rounding).
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        window_size: int,
        gamma: float = 0.0,
        fuzzy_std: float = 0.0,
        matched_inference: bool = False,
        smooth_focus: bool = False,
        fused: bool = True,
    ):
        super().__init__()
        if dim % num_heads:
            raise ConfigError(f"embedding dim {dim} is not divisible by {num_heads} heads")
        self.num_heads = num_heads
        self.window_size = window_size
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.relative_position_bias_table = torch.nn.Parameter(
            torch.zeros((2 * window_size - 1) ** 2, num_heads)
        )
        torch.nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        self.register_buffer(
            "relative_position_index", relative_position_index(window_size), persistent=False
        )
        self.gamma = check_gamma(gamma)
        if not fuzzy_std >= 0.0:  # also refuses NaN
            raise ConfigError(f"fuzzy_std: a standard deviation must be >= 0, got {fuzzy_std}")
        self.fuzzy_std = float(fuzzy_std)
        self.matched_inference = bool(matched_inference)
        self.smooth_focus = bool(smooth_focus)
        self.fused = bool(fused)

    def extra_repr(self) -> str:
        return (
            f"heads={self.num_heads}, window={self.window_size}, gamma={self.gamma}, "
            f"fuzzy_std={self.fuzzy_std}, matched_inference={self.matched_inference}, "
            f"smooth_focus={self.smooth_focus}"
        )

    def current_gamma(self, device=None) -> float | torch.Tensor:
        """γ of this forward call: a fuzzy draw in training, γ0 when relaxing at inference, else 0."""
        if self.training:
            if self.fuzzy_std > 0:
                return sample_fuzzy_gamma(self.gamma, self.fuzzy_std, device)
            return self.gamma
        return self.gamma if self.matched_inference else 0.0

    def position_bias(self) -> torch.Tensor:
        """R_pos (H, M², M²)."""
        n = self.window_size**2
        bias = self.relative_position_bias_table[self.relative_position_index.view(-1)]
        return bias.view(n, n, -1).permute(2, 0, 1)

    def _scores_bias(self, mask: torch.Tensor | None, dtype) -> torch.Tensor:
        """R_pos plus the shift mask's -100 as one additive term, (nW | 1, H, M², M²)."""
        bias = self.position_bias().unsqueeze(0).to(dtype)
        if mask is None:
            return bias
        shift = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
        return bias + shift.masked_fill(~mask, SHIFT_MASK_SCORE).unsqueeze(1)

    @staticmethod
    def _by_window(t: torch.Tensor, windows: int) -> torch.Tensor:
        """(B·nW, ...) -> (B, nW, ...), so that per-window terms (nW, ...) broadcast over images."""
        return t.view(-1, windows, *t.shape[1:])

    def _qkv(self, x: torch.Tensor):
        batch_windows, n, dim = x.shape
        qkv = self.qkv(x).view(batch_windows, n, 3, self.num_heads, dim // self.num_heads)
        return qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B·nW, H, N, d)

    def weights(
        self, q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, gamma
    ) -> torch.Tensor:
        """G̃ (B·nW, H, M², M²): softmax or smooth-focus weights, then eq. (3)."""
        windows = 1 if mask is None else mask.size(0)
        scores = self._by_window((q * self.scale) @ k.transpose(-2, -1), windows)
        scores = (scores + self._scores_bias(mask, q.dtype)).flatten(0, 1)
        if self.smooth_focus:
            # smooth focus sums over the keys a query may see: the region mask as a hard mask
            region = None if mask is None else mask.repeat(q.size(0) // mask.size(0), 1, 1)
            weights = smooth_focus_weights(scores, region)
        else:
            weights = torch.softmax(scores, dim=-1)
        if isinstance(gamma, torch.Tensor) or gamma > 0:
            weights = relax_weights(weights, gamma, None)  # T = M² for every query: eq. (3)
        return weights

    def attention_weights(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """G̃ of the current mode for window tokens ``x`` (analysis and tests; forward never builds it
        when it can avoid it)."""
        q, k, _ = self._qkv(x)
        return self.weights(q, k, mask, self.current_gamma(x.device))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        q, k, v = self._qkv(x)
        gamma = self.current_gamma(x.device)
        if self.fused and not self.smooth_focus:
            # G̃ V = (1 - γ) softmax(E) V + γ mean_t V_t: the weight matrix is never materialised.
            windows = 1 if mask is None else mask.size(0)
            q, k, v = (self._by_window(t, windows) for t in (q, k, v))
            bias = self._scores_bias(mask, q.dtype)
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=self.scale)
            context, v = context.flatten(0, 1), v.flatten(0, 1)
            if isinstance(gamma, torch.Tensor) or gamma > 0:
                context = (1.0 - gamma) * context + gamma * masked_mean_values(v, None)
        else:
            context = self.weights(q, k, mask, gamma) @ v
        batch_windows, heads, n, d = context.shape
        return self.proj(context.transpose(1, 2).reshape(batch_windows, n, heads * d))
