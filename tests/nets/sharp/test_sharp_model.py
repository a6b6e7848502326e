"""The soft / hard / sharp recognisers: context shapes, losses, reference supervision, learning, ESPnet2 build."""

import numpy as np
import pytest
import torch

from espnet_ext.errors import ConfigError
from espnet_ext.nets.sharp.model import (
    HardAttentionRecognizer,
    SharpAttentionRecognizer,
    SoftAttentionRecognizer,
)

TOKENS = ["<blank>", "<unk>"] + list("0123456789") + ["<sos/eos>"]
TINY = dict(
    channels=(4, 8, 8, 16),
    lstm_units=8,
    attention_dim=8,
    decoder_units=8,
    embed_dim=4,
    max_length=5,
)


def batch():
    torch.manual_seed(0)
    text = torch.tensor([[3, 4, 5], [6, 7, -1]])
    return torch.rand(2, 100, 32), torch.tensor([100, 80]), text, torch.tensor([3, 2])


def build(cls, **kw):
    torch.manual_seed(0)
    return cls(len(TOKENS), TOKENS, **{**TINY, **kw})


@pytest.mark.parametrize("context, dim", [("pooling", 16), ("chain", 32), ("weighting", 16)])
def test_sharp_context_shapes(context, dim):
    model = build(SharpAttentionRecognizer, context=context)
    images = model.prepare_images(*batch()[:2])
    features = model.encode(images)
    alpha = torch.softmax(torch.randn(2, features.size(1)), -1)
    state = (torch.zeros(2, 8), torch.zeros(2, 8))
    weights = []
    if (
        context == "weighting"
    ):  # soft weights over {columns of Z_t, x_â}: one distribution per image
        model.weigh.register_forward_hook(lambda module, inputs, output: weights.append(output))
    context_vector, log_alpha, patch = model.step_context(
        images, features, alpha, state, greedy=False
    )
    assert (
        context_vector.shape == (2, dim)
        and log_alpha.shape == (2,)
        and patch.shape == (2, 1, 32, 24)
    )
    if context == "weighting":
        columns = model.patch_encoder(patch).size(1)
        assert weights[0].shape == (2, columns + 1)
        assert torch.allclose(weights[0].sum(-1), torch.ones(2)) and bool((weights[0] >= 0).all())


def test_two_stns_coarse_then_fine():
    model = build(SharpAttentionRecognizer, num_stn=2)
    assert [loc.mode for loc in model.localisers] == ["x_translation", "affine"]
    assert model.localisers[0].out_size == (64, 32)
    patch = model.sharpen(model.prepare_images(*batch()[:2]), torch.tensor([0, 23]))
    assert patch.shape == (2, 1, 32, 24)


@pytest.mark.parametrize(
    "cls", [SoftAttentionRecognizer, HardAttentionRecognizer, SharpAttentionRecognizer]
)
def test_each_model_learns_a_batch(cls):
    model = build(cls)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for _ in range(12):
        loss, stats, weight = model(*batch())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(stats["loss_ce"].item())
    assert losses[-1] < losses[0] and weight.item() == 2
    assert 0 <= stats["entropy"].item() <= np.log(24) + 1e-4
    model.eval()
    hypotheses = model.recognize(*batch()[:2])
    assert len(hypotheses) == 2 and all(len(h) <= 5 for h in hypotheses)


def test_hard_attention_reinforce_term_and_no_gradient_into_the_classifier():
    model = build(HardAttentionRecognizer)
    _, stats, _ = model(*batch())
    assert "loss_reinforce" in stats and stats["baseline"].item() < 0  # a mean log-likelihood
    # The REINFORCE surrogate alone reaches the attention but not the output layer.
    model.zero_grad()
    images = model.prepare_images(*batch()[:2])
    features = model.encode(images)
    targets = torch.tensor([[3, 4, 5, 12], [6, 7, 12, -1]])
    logits, _, log_alphas, _ = model.run_decoder(images, features, targets, 4, greedy=False)
    torch.stack(log_alphas, 1).sum().backward()
    assert model.output.weight.grad is None or model.output.weight.grad.abs().sum() == 0
    assert model.attend.score.weight.grad.abs().sum() > 0


def test_reference_supervision_pulls_patches_to_the_target_digit(tmp_path):
    references = np.random.default_rng(0).random((10, 32, 24)).astype(np.float32)
    np.save(tmp_path / "ref.npy", references)
    model = build(SharpAttentionRecognizer, reference_images=str(tmp_path / "ref.npy"))
    assert model.has_reference.sum() == 10 and torch.equal(
        model.references[TOKENS.index("7")], torch.from_numpy(references[7])
    )
    _, stats, _ = model(*batch())
    assert stats["loss_reference"].item() > 0
    np.save(tmp_path / "bad.npy", references[:, :16])
    with pytest.raises(ConfigError, match="do not match the patch size"):
        build(SharpAttentionRecognizer, reference_images=str(tmp_path / "bad.npy"))


def test_bad_options_and_long_labels_are_refused():
    with pytest.raises(ConfigError, match="belong to sharp attention"):
        build(SoftAttentionRecognizer, context="chain")
    with pytest.raises(ConfigError, match="unknown context"):
        build(SharpAttentionRecognizer, context="mean")
    model = build(SoftAttentionRecognizer)
    image, lengths, _, _ = batch()
    with pytest.raises(ValueError, match="more than max_length 5"):
        model(image, lengths, torch.full((2, 6), 3), torch.tensor([6, 6]))


def test_models_are_registered_in_the_image_to_sequence_task(tmp_path):
    from espnet_ext.tasks.image_to_sequence import ImageToSequenceTask

    (tmp_path / "tokens.txt").write_text("\n".join(TOKENS) + "\n")
    (tmp_path / "c.yaml").write_text(
        "model: sharp_attention\nmodel_conf: {channels: [4, 8, 8, 16], lstm_units: 8, "
        "attention_dim: 8, decoder_units: 8, context: chain, num_stn: 2}\n"
    )
    args = ImageToSequenceTask.get_parser().parse_args(
        [
            "--config",
            str(tmp_path / "c.yaml"),
            "--token_list",
            str(tmp_path / "tokens.txt"),
            "--token_type",
            "char",
        ]
    )
    model = ImageToSequenceTask.build_model(args)
    assert (
        isinstance(model, SharpAttentionRecognizer)
        and model.context == "chain"
        and len(model.localisers) == 2
    )
