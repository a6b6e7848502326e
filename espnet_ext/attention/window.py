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

The module is timm's ``WindowAttention`` (its parameters, relative-position index and initialisation;
timm's Swin blocks call it with their additive shift mask, 0 or -100) with eq. (3), fuzzy relaxation and
smooth focus in its forward; with γ = 0 and softmax weights it computes exactly timm's output.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from timm.models.swin_transformer import WindowAttention as TimmWindowAttention

from espnet_ext.attention.gamma import check_gamma
from espnet_ext.attention.mask_cache import aligned_empty
from espnet_ext.attention.relaxed import masked_mean_values, relax_weights
from espnet_ext.attention.smooth_focus import smooth_focus_weights
from espnet_ext.errors import ConfigError


def sample_fuzzy_gamma(gamma0: float, std: float, device=None) -> torch.Tensor:
    """One draw of γ ~ N(γ0, std²) clipped to [0, 1], as a 0-dim tensor (no host sync on GPUs)."""
    return torch.empty((), device=device).normal_(gamma0, std).clamp_(0.0, 1.0)


class WindowAttention(TimmWindowAttention):
    """Multi-head self-attention inside M x M windows with timm's learned relative position bias.

    Input (B·nW, M², C) window tokens; ``mask`` (nW, M², M²), Swin's additive shift mask (0 where query
    and key come from the same region, -100 elsewhere; timm's ``SwinTransformerBlock.attn_mask``), or
    None for unshifted windows.

    Args: ``gamma`` γ0 of eq. (3); ``fuzzy_std`` σ of fuzzy relaxation (0: fixed γ);
    ``matched_inference`` relax at inference too (γ = γ0); ``smooth_focus`` sigmoid instead of exp;
    ``fused`` PyTorch's scaled-dot-product kernel for the softmax part (same result to rounding).
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        window_size: int | tuple[int, int],
        gamma: float = 0.0,
        fuzzy_std: float = 0.0,
        matched_inference: bool = False,
        smooth_focus: bool = False,
        fused: bool = True,
    ):
        if dim % num_heads:
            raise ConfigError(f"embedding dim {dim} is not divisible by {num_heads} heads")
        super().__init__(dim, num_heads, window_size=window_size)
        self.gamma = check_gamma(gamma)
        if not fuzzy_std >= 0.0:  # also refuses NaN
            raise ConfigError(f"fuzzy_std: a standard deviation must be >= 0, got {fuzzy_std}")
        self.fuzzy_std = float(fuzzy_std)
        self.matched_inference = bool(matched_inference)
        self.smooth_focus = bool(smooth_focus)
        self.fused_attn = bool(fused)

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

    def _scores_bias(self, mask: torch.Tensor | None, dtype) -> torch.Tensor:
        """R_pos plus the shift mask as one additive term, (nW | 1, H, M², M²)."""
        bias = self._get_rel_pos_bias().to(dtype)
        return bias if mask is None else bias + mask.to(dtype).unsqueeze(1)

    def _bias_per_window(
        self, mask: torch.Tensor | None, dtype, batch_windows: int
    ) -> torch.Tensor:
        """``_scores_bias`` for the fused kernel: (1, H, M², M²) without a mask, else one (H, M², M²) per
        window of every image (B·nW, H, M², M²) in aligned rows (``aligned_empty``), as timm's
        ``WindowAttention`` gives it. PyTorch's fused kernels take 4-D inputs only: with the windows
        broadcast as a fifth dimension it runs its math path (scores, softmax and their backward as
        separate kernels), on GPUs as on CPUs."""
        bias = self._scores_bias(mask, dtype)
        if bias.size(0) == 1:
            return bias
        out = aligned_empty((batch_windows, *bias.shape[1:]), dtype, bias.device)
        out.unflatten(0, (-1, bias.size(0))).copy_(bias)  # broadcast over the images
        return out

    @staticmethod
    def _by_window(t: torch.Tensor, windows: int) -> torch.Tensor:
        """(B·nW, ...) -> (B, nW, ...), so that per-window terms (nW, ...) broadcast over images."""
        return t.view(-1, windows, *t.shape[1:])

    def _qkv(self, x: torch.Tensor):
        batch_windows, n, _ = x.shape
        qkv = self.qkv(x).view(batch_windows, n, 3, self.num_heads, -1)
        return qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B·nW, H, N, d)

    def weights(
        self, q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, gamma
    ) -> torch.Tensor:
        """G̃ (B·nW, H, M², M²): softmax or smooth-focus weights, then eq. (3)."""
        windows = 1 if mask is None else mask.size(0)
        scores = self._by_window((q * self.scale) @ k.transpose(-2, -1), windows)
        scores = (scores + self._scores_bias(mask, q.dtype)).flatten(0, 1)
        if self.smooth_focus:
            # smooth focus sums over the keys a query may see: the shift mask's regions as a hard mask
            region = None if mask is None else (mask == 0).repeat(q.size(0) // mask.size(0), 1, 1)
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
        if self.fused_attn and not self.smooth_focus:
            # G̃ V = (1 - γ) softmax(E) V + γ mean_t V_t: the weight matrix is never materialised.
            bias = self._bias_per_window(mask, q.dtype, q.size(0))
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=self.scale)
            if isinstance(gamma, torch.Tensor):  # fuzzy: lerp takes a tensor weight of its dtype
                gamma = gamma.to(context.dtype)
            if isinstance(gamma, torch.Tensor) or gamma > 0:
                context = torch.lerp(context, masked_mean_values(v, None), gamma)  # one kernel
        else:
            context = self.weights(q, k, mask, gamma) @ v
        batch_windows, heads, n, d = context.shape
        out = self.proj(context.transpose(1, 2).reshape(batch_windows, n, heads * d))
        return self.proj_drop(out)
