"""Dense relative localization loss L_drloc (Liu et al., 2021a, "Efficient Training of Visual Transformers
with Small Datasets"), the auxiliary loss of Table 4's "+ L_drloc" rows.

For each image, ``num_pairs`` pairs of positions (i, j) are drawn uniformly from the final k x k feature
grid; a small MLP (2C -> 512 -> 512 -> 2, ReLU) sees the two embeddings side by side and predicts their
relative offset, L_drloc = mean |MLP([e_i; e_j]) - t_ij|. The target t_ij is one of

    "abs_cells"          t_ij = (|r_i - r_j|, |c_i - c_j|)                 (grid cells)
    "signed_normalised"  t_ij = ((r_i - r_j) / k_rows, (c_i - c_j) / k_cols)

"abs_cells" is what the code the relaxed-attention paper adopts trains with (A.3.4: yhlleo/VTs-Drloc,
train.sh ``--use_abs``, drloc/aux_modules.py ``DenseRelativeLoc.forward`` with ``normalize=False``: the
absolute offset, unnormalised); "signed_normalised" is the NeurIPS paper's normalised offset.
The transformer has to encode where a token sits to make this predictable, which helps most when the
data set is small. The total loss is L_ce + λ · L_drloc (λ and its schedule: ``SwinClassifier``).
"""

from __future__ import annotations

import torch

from espnet_ext.errors import ConfigError

TARGETS = ("abs_cells", "signed_normalised")


class DenseRelativeLocalization(torch.nn.Module):
    def __init__(self, dim: int, hidden: int = 512, num_pairs: int = 64, target: str = "abs_cells"):
        super().__init__()
        if target not in TARGETS:
            raise ConfigError(f"drloc target must be one of {TARGETS}, not {target!r}")
        self.num_pairs = num_pairs
        self.target = target
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(2 * dim, hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(hidden, hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(hidden, 2),
        )

    def extra_repr(self) -> str:
        return f"num_pairs={self.num_pairs}, target={self.target}"

    def sample_positions(self, feature_map: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Two (B, num_pairs, 2) integer (row, column) tensors, uniform over the grid."""
        b, rows, cols, _ = feature_map.shape
        draw = torch.rand(2, b, self.num_pairs, 2, device=feature_map.device)
        # scaled by Python numbers: a tensor of the grid size would be a blocking copy to the device
        scaled = torch.stack([draw[..., 0] * rows, draw[..., 1] * cols], dim=-1)
        first, second = scaled.long().unbind(0)
        return first, second

    def predict(self, feature_map, first, second) -> torch.Tensor:
        """Predicted offsets (B, P, 2) of the pairs ``first``/``second`` (B, P, 2)."""
        batch = torch.arange(feature_map.size(0), device=feature_map.device)[:, None]
        pair = torch.cat(
            [feature_map[batch, p[..., 0], p[..., 1]] for p in (first, second)], dim=-1
        )
        return self.mlp(pair)

    def targets(self, feature_map, first, second) -> torch.Tensor:
        offset = (first - second).to(feature_map.dtype)
        if self.target == "abs_cells":
            return offset.abs()
        rows, cols = feature_map.shape[1:3]
        return torch.stack([offset[..., 0] / rows, offset[..., 1] / cols], dim=-1)

    def forward(self, feature_map: torch.Tensor) -> torch.Tensor:
        """L_drloc of a (B, k_rows, k_cols, C) feature map, fresh random pairs."""
        first, second = self.sample_positions(feature_map)
        prediction = self.predict(feature_map, first, second)
        return torch.nn.functional.l1_loss(prediction, self.targets(feature_map, first, second))
