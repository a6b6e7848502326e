"""The Swin classifier's losses and reported accuracies."""

import torch
import torch.nn.functional as F

from espnet_ext.nets.swin.classifier import SwinClassifier, topk_correct

TINY = dict(img_size=16, patch_size=2, embed_dim=8, depths=(1, 1), num_heads=(1, 2), window_size=4)


def test_topk_correct_by_hand():
    logits = torch.tensor([[0.1, 0.9, 0.5], [0.8, 0.1, 0.3], [0.2, 0.3, 0.1]])
    label = torch.tensor([2, 2, 2])
    assert topk_correct(logits, label, 1).item() == 0.0
    assert abs(topk_correct(logits, label, 2).item() - 2 / 3) < 1e-6
    assert topk_correct(logits, label, 5).item() == 1.0  # k beyond the class count: all


def test_label_smoothed_cross_entropy_and_stats():
    torch.manual_seed(0)
    model = SwinClassifier(num_classes=7, label_smoothing=0.1, **TINY).eval()
    images, labels = torch.rand(3, 16, 16, 3), torch.tensor([[1], [6], [0]])
    loss, stats, weight = model(images, labels)
    logits = model.classify(images)
    expected = F.cross_entropy(logits, labels.view(-1), label_smoothing=0.1)
    torch.testing.assert_close(loss.reshape(()), expected)
    assert weight.item() == 3 and "loss_drloc" not in stats
    assert stats["acc"].item() == topk_correct(logits, labels.view(-1), 1).item()
    assert stats["acc_top5"].item() == topk_correct(logits, labels.view(-1), 5).item()


def test_mixup_on_an_odd_batch_keeps_the_last_image_unmixed():
    torch.manual_seed(0)
    model = SwinClassifier(num_classes=5, mixup_alpha=0.8, cutmix_alpha=1.0, **TINY).train()
    images, labels = torch.rand(3, 16, 16, 3), torch.tensor([1, 3, 4])
    mixed, targets = model._mixed(images.permute(0, 3, 1, 2), labels)
    assert mixed.shape == (3, 3, 16, 16)
    torch.testing.assert_close(targets.sum(-1), torch.ones(3))
    smoothed = torch.full((5,), 0.1 / 5)
    smoothed[4] += 0.9
    torch.testing.assert_close(targets[2], smoothed)  # the odd one out: its smoothed label
    torch.testing.assert_close(mixed[2], images[2].permute(2, 0, 1))
    assert not torch.equal(mixed[:2], images[:2].permute(0, 3, 1, 2))  # the pair was mixed
    loss, _, _ = model(images, labels[:, None])
    assert torch.isfinite(loss)
