"""The Swin classifier's losses, reported accuracies and weight-decay groups."""

import argparse
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml
from compiled_check import eager_and_compiled, graph_breaks, graphs, same_step

from espnet_ext.errors import ConfigError
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


REAL_CONFIG = Path(__file__).resolve().parents[3] / "egs/cifar100/cls1/conf/train_swin_t.yaml"


def swin_recipe_no_decay(model):
    """microsoft/Swin-Transformer (and VTs-Drloc) optimizer.py ``set_weight_decay`` restated: no decay for
    1-D parameters, biases and ``no_weight_decay_keywords`` (relative_position_bias_table)."""
    return {
        name
        for name, p in model.named_parameters()
        if len(p.shape) == 1 or name.endswith(".bias") or "relative_position_bias_table" in name
    }


def test_real_config_weight_decay_groups_are_the_swin_recipes():
    from espnet_ext.tasks.image_classification import ImageClassificationTask

    config = yaml.safe_load(REAL_CONFIG.read_text())
    assert config["exclude_weight_decay"] is True
    model = SwinClassifier(num_classes=5, drloc_weight=0.5, drloc_hidden=8, **TINY)
    args = argparse.Namespace(
        optim=config["optim"],
        optim_conf=config["optim_conf"],
        sharded_ddp=False,
        exclude_weight_decay=config["exclude_weight_decay"],
        exclude_weight_decay_conf=config.get("exclude_weight_decay_conf", {}),
    )
    (optim,) = ImageClassificationTask.build_optimizers(args, model=model)
    names = {id(p): n for n, p in model.named_parameters()}
    decay = {}
    for group in optim.param_groups:
        for p in group["params"]:
            decay[names[id(p)]] = group["weight_decay"]
    assert set(decay) == set(names.values())  # every parameter in exactly one group
    zero = {n for n, wd in decay.items() if wd == 0.0}
    assert zero == swin_recipe_no_decay(model)
    assert {decay[n] for n in set(decay) - zero} == {config["optim_conf"]["weight_decay"]}
    tables = [n for n in zero if n.endswith("relative_position_bias_table")]
    assert tables and all(model.get_parameter(n).ndim == 2 for n in tables)  # not caught as 1-D


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_compiled_stages_equal_the_eager_model_relaxed_and_fuzzy(device):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    # every stage one graph, no break (windows shifted in the second block of each); the same seed draws
    # the same fuzzy γ and stochastic depth eagerly and traced (aot_eager keeps PyTorch's generator)
    options = dict(
        TINY, depths=(2, 2), gamma=0.1, fuzzy_std=0.05, drop_path_rate=0.1, drloc_weight=0.5
    )
    options.update(drloc_pairs=8, drloc_hidden=16)
    eager, compiled = eager_and_compiled(
        lambda **extra: SwinClassifier(num_classes=7, **options, **extra).train(), device
    )
    images = torch.rand(4, 16, 16, 3, device=device)
    labels = torch.tensor([1, 6, 0, 3], device=device)
    for batch in (4, 3, 4):  # the last, smaller batch of an epoch, then the next epoch's
        same_step(eager, compiled, lambda model, x, y: model.losses(x, y)[0], images[:batch],
                  labels[:batch], seed=1)  # fmt: skip
    assert graph_breaks() == {} and graphs() == 4  # per stage: static, then the batch symbolic
    with pytest.raises(ConfigError, match="model_conf.compile_layers"):  # a DataParallel replica
        compiled._replicate_for_data_parallel()(images, labels)
