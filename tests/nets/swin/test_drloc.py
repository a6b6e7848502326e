"""The dense relative localization loss (Liu et al., 2021a) as yhlleo/VTs-Drloc trains it, and the NeurIPS form."""

import pytest
import torch

from espnet_ext.errors import ConfigError
from espnet_ext.nets.swin.classifier import SwinClassifier
from espnet_ext.nets.swin.drloc import DenseRelativeLocalization

FIRST = torch.tensor([[[3, 0], [1, 7]]])
SECOND = torch.tensor([[[1, 4], [1, 0]]])


def test_default_targets_are_absolute_offsets_in_grid_cells():
    # VTs-Drloc --use_abs, normalize=False: deltaxy = |pxs - pys|, neither signed nor divided by k.
    drloc = DenseRelativeLocalization(4, hidden=8, num_pairs=2)
    assert drloc.target == "abs_cells"
    expected = torch.tensor([[[2.0, 4.0], [0.0, 7.0]]])
    torch.testing.assert_close(drloc.targets(torch.zeros(1, 4, 8, 4), FIRST, SECOND), expected)


def test_neurips_targets_are_signed_offsets_normalised_by_the_grid():
    drloc = DenseRelativeLocalization(4, hidden=8, num_pairs=2, target="signed_normalised")
    expected = torch.tensor([[[2 / 4, -4 / 8], [0.0, 7 / 8]]])
    torch.testing.assert_close(drloc.targets(torch.zeros(1, 4, 8, 4), FIRST, SECOND), expected)
    with pytest.raises(ConfigError, match="abs_cells"):
        DenseRelativeLocalization(4, target="signed")


def test_loss_is_zero_for_a_perfect_predictor():
    # features = one-hot of (row, column); a linear predictor reads the offset off exactly
    rows, cols = 3, 4
    grid = torch.zeros(2, rows, cols, rows + cols)
    for r in range(rows):
        for c in range(cols):
            grid[:, r, c, r] = 1
            grid[:, r, c, rows + c] = 1
    drloc = DenseRelativeLocalization(
        rows + cols, hidden=8, num_pairs=16, target="signed_normalised"
    )
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
    # The same linear read-out, scaled to cells, fits |Δ| only where Δ >= 0: the abs target is not signed.
    drloc_abs = DenseRelativeLocalization(rows + cols, hidden=8, num_pairs=16)
    drloc_abs.mlp = perfect
    with torch.no_grad():
        perfect.weight[0] *= rows
        perfect.weight[1] *= cols
    assert drloc_abs(grid).item() > 0.1


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
        drloc_features="post_norm",
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


TINY = dict(
    num_classes=5,
    img_size=16,
    patch_size=2,
    embed_dim=8,
    depths=(1, 1),
    num_heads=(1, 2),
    window_size=4,
)


def vts_drloc_lambda(init_weight, epoch, warmup_epochs=20, total_epoch=300):
    """VTs-Drloc main.py ``_weight_decay`` restated: λ of 0-based epoch ``epoch``."""
    if epoch <= warmup_epochs:
        return min(init_weight / warmup_epochs * epoch, init_weight)
    return init_weight * (1.0 - (epoch - warmup_epochs) / (total_epoch - warmup_epochs))


def test_lambda_schedule_is_vts_drloc_per_epoch_warm_up_and_decay():
    model = SwinClassifier(
        **TINY,
        drloc_weight=0.5,
        drloc_hidden=8,
        drloc_warmup_epochs=20,
        drloc_decay_epochs=300,
        drloc_batches_per_epoch=3,
    )
    for epoch in (0, 1, 10, 19, 20, 21, 50, 99, 100):
        for batch in (0, 2):  # constant within an epoch
            model.drloc_batches.fill_(3 * epoch + batch)
            got = model.current_drloc_weight().item()
            assert got == pytest.approx(vts_drloc_lambda(0.5, epoch), abs=1e-6)
    # The values the authors' Swin-T log prints ("weights: drloc ...", logs/...-drloc.txt).
    printed = {0: 0.0, 1: 0.025, 20: 0.5, 21: 0.4982, 40: 0.4643, 100: 0.3571}
    for epoch, value in printed.items():
        model.drloc_batches.fill_(3 * epoch)
        assert model.current_drloc_weight().item() == pytest.approx(value, abs=5e-5)


def test_scheduled_lambda_counts_training_batches_only_and_is_checkpointed():
    torch.manual_seed(0)
    model = SwinClassifier(
        **TINY,
        drloc_weight=0.5,
        drloc_hidden=8,
        drloc_pairs=4,
        drloc_warmup_epochs=2,
        drloc_batches_per_epoch=1,
    ).train()
    images, labels = torch.rand(2, 16, 16, 3), torch.tensor([[1], [3]])
    seen = []
    for _ in range(3):
        loss, stats, _ = model(images, labels)
        seen.append(stats["drloc_weight"].item())
        torch.testing.assert_close(
            loss, stats["loss_ce"] + stats["drloc_weight"] * stats["loss_drloc"]
        )
    assert seen == [0.0, 0.25, 0.5]  # epochs 0, 1, 2 of a 2-epoch warm-up, no decay
    assert int(model.drloc_batches) == 3 and "drloc_batches" in model.state_dict()
    model.eval()
    model(images, labels)
    assert int(model.drloc_batches) == 3  # validation does not advance the schedule


def test_schedule_needs_batches_per_epoch_and_a_decay_after_the_warm_up():
    with pytest.raises(ConfigError, match="drloc_batches_per_epoch"):
        SwinClassifier(**TINY, drloc_weight=0.5, drloc_warmup_epochs=20)
    with pytest.raises(ConfigError, match="drloc_decay_epochs"):
        SwinClassifier(
            **TINY, drloc_weight=0.5, drloc_warmup_epochs=20, drloc_decay_epochs=20,
            drloc_batches_per_epoch=5,
        )  # fmt: skip
    with pytest.raises(ConfigError, match="drloc_features"):
        SwinClassifier(**TINY, drloc_weight=0.5, drloc_features="final")
    constant = SwinClassifier(**TINY, drloc_weight=0.5)
    assert constant.current_drloc_weight() == 0.5 and "drloc_batches" not in constant.state_dict()


@pytest.mark.parametrize("features", ["pre_norm", "post_norm"])
def test_drloc_sees_the_last_stage_before_or_after_the_final_layer_norm(features):
    torch.manual_seed(0)
    model = SwinClassifier(**TINY, drloc_weight=0.5, drloc_hidden=8, drloc_features=features).eval()
    with torch.no_grad():
        model.backbone.norm.weight.mul_(3.0).add_(0.5)  # make the final LayerNorm visible
    images, labels = torch.rand(2, 16, 16, 3), torch.tensor([[1], [3]])
    seen = []
    model.drloc.register_forward_hook(lambda module, args, out: seen.append(args[0]))
    model(images, labels)
    stage = model.backbone.stage_output(images.permute(0, 3, 1, 2))
    expected = stage if features == "pre_norm" else model.backbone.norm(stage)
    torch.testing.assert_close(seen[0], expected)
    assert not torch.allclose(stage, model.backbone.norm(stage))
