"""The dense relative localization loss (Liu et al., 2021a)."""

import torch

from espnet_ext.nets.swin.classifier import SwinClassifier
from espnet_ext.nets.swin.drloc import DenseRelativeLocalization


def test_targets_are_offsets_normalised_by_the_grid():
    drloc = DenseRelativeLocalization(4, hidden=8, num_pairs=2)
    grid = torch.zeros(1, 4, 8, 4)
    first = torch.tensor([[[3, 0], [1, 7]]])
    second = torch.tensor([[[1, 4], [1, 0]]])
    expected = torch.tensor([[[2 / 4, -4 / 8], [0.0, 7 / 8]]])
    torch.testing.assert_close(drloc.targets(grid, first, second), expected)


def test_loss_is_zero_for_a_perfect_predictor():
    # features = one-hot of (row, column); a linear predictor reads the offset off exactly
    rows, cols = 3, 4
    grid = torch.zeros(2, rows, cols, rows + cols)
    for r in range(rows):
        for c in range(cols):
            grid[:, r, c, r] = 1
            grid[:, r, c, rows + c] = 1
    drloc = DenseRelativeLocalization(rows + cols, hidden=8, num_pairs=16)
    perfect = torch.nn.Linear(2 * (rows + cols), 2)
    with torch.no_grad():
        perfect.weight.zero_()
        perfect.bias.zero_()
        index = torch.arange(rows, dtype=torch.float) / rows
        perfect.weight[0, :rows] = index
        perfect.weight[0, rows + cols : 2 * rows + cols] = -index
        column = torch.arange(cols, dtype=torch.float) / cols
        perfect.weight[1, rows : rows + cols] = column
        perfect.weight[1, 2 * rows + cols :] = -column
    drloc.mlp = perfect
    assert drloc(grid).item() < 1e-6
    assert DenseRelativeLocalization(rows + cols, hidden=8)(grid).item() > 0.05


def test_sampled_positions_cover_the_grid():
    torch.manual_seed(0)
    first, second = DenseRelativeLocalization(4, num_pairs=500).sample_positions(
        torch.zeros(2, 3, 5, 4)
    )
    assert first.shape == (2, 500, 2)
    assert set(first[..., 0].unique().tolist()) == {0, 1, 2}
    assert set(second[..., 1].unique().tolist()) == set(range(5))


def test_gradient_reaches_the_backbone_and_weight_scales_the_loss():
    torch.manual_seed(0)
    config = dict(
        num_classes=5,
        img_size=16,
        patch_size=2,
        embed_dim=8,
        depths=(1, 1),
        num_heads=(1, 2),
        window_size=4,
        drloc_weight=0.5,
        drloc_hidden=16,
        drloc_pairs=8,
    )
    model = SwinClassifier(**config).train()
    images, labels = torch.rand(2, 16, 16, 3), torch.tensor([[1], [3]])
    loss, stats, _ = model(images, labels)
    torch.testing.assert_close(loss, stats["loss_ce"] + 0.5 * stats["loss_drloc"])
    model.zero_grad()
    stats_loss = model.drloc(model.backbone.feature_map(images.permute(0, 3, 1, 2)))
    stats_loss.backward()
    assert model.backbone.patch_embed.proj.weight.grad.abs().sum() > 0
    assert model.head.weight.grad is None  # drloc alone does not touch the classifier head
