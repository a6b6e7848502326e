"""The soft / hard / sharp recognisers: context shapes, losses, reference supervision, learning, ESPnet2 build."""

import numpy as np
import pytest
import torch

from espnet_ext.errors import ConfigError, InputError
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


def step_inputs(model):
    image, lengths = batch()[:2]
    images = model.prepare_images(image, lengths)
    features = model.encode(images)
    alpha = torch.softmax(torch.randn(2, features.size(1)), -1)
    return model.region_image(image, lengths, images), features, alpha, torch.zeros(2, 8)


@pytest.mark.parametrize("context", ["pooling", "chain"])
def test_pooling_is_the_mean_of_z_and_chain_appends_the_chosen_column(context):
    model = build(SharpAttentionRecognizer, context=context).eval()
    region_image, features, alpha, h = step_inputs(model)
    encoded = []
    model.context_module.sharpener.encoder.register_forward_hook(lambda m, i, o: encoded.append(o))
    step = model.context_module(alpha, features, region_image, h, greedy=True)
    chosen = features[torch.arange(2), alpha.argmax(-1)]
    z_mean = encoded[0].mean(1)
    expected = z_mean if context == "pooling" else torch.cat([z_mean, chosen], -1)
    assert torch.allclose(step.context, expected)
    assert step.patch.shape == (2, 1, 32, 24)
    assert torch.allclose(step.log_alpha, alpha.max(-1).values.log())


def test_weighting_is_a_convex_combination_of_z_and_the_chosen_column():
    # 2 x lstm_units == encoder depth (16 = 16, as the paper's 512 = 512): no projection of Z.
    model = build(SharpAttentionRecognizer, context="weighting").eval()
    combine = model.context_module.combine
    assert combine.patch_projection is None
    assert not any("projection" in name for name, _ in model.named_parameters())
    region_image, features, alpha, h = step_inputs(model)
    weights, encoded = [], []
    combine.weigh.register_forward_hook(lambda m, i, o: weights.append(o))
    model.context_module.sharpener.encoder.register_forward_hook(lambda m, i, o: encoded.append(o))
    step = model.context_module(alpha, features, region_image, h, greedy=True)
    items = torch.cat([encoded[0], features[torch.arange(2), alpha.argmax(-1)].unsqueeze(1)], 1)
    assert torch.allclose(weights[0].sum(-1), torch.ones(2))
    assert torch.allclose(step.context, (weights[0].unsqueeze(-1) * items).sum(1), atol=1e-6)
    # A narrower encoder than X needs the projection.
    narrow = build(SharpAttentionRecognizer, context="weighting", lstm_units=4)
    assert narrow.context_module.combine.patch_projection is not None


def test_initial_state_and_output_layer_follow_eqs_6_and_8():
    model = build(SoftAttentionRecognizer).eval()
    image, lengths, _, _ = batch()
    features = model.encode(model.prepare_images(image, lengths))
    states = []
    model.decoder.register_forward_hook(lambda m, i, o: states.append(o[0]))
    targets = torch.tensor([[3, 4, 5, 12], [6, 7, 12, -1]])
    logits, alphas, _, _ = model.run_decoder(None, features, targets, 4, greedy=True)
    # h_0 = f_i(mean X): a linear layer, no squashing, and it gives the first step's α.
    h0 = features.mean(1) @ model.init_state.weight.t() + model.init_state.bias
    assert torch.allclose(alphas[0], model.attend(model.attend.keys(features), h0), atol=1e-6)
    # eq. (8): logits_t = f_e([h_t; embedding of y_{t-1}]) with y_0 = 0.
    previous = torch.cat([torch.zeros(2, 1, 4), model.embed(targets[:, :-1].clamp(min=0))], 1)
    for t in range(4):
        expected = model.output(torch.cat([states[t], previous[:, t]], -1))
        assert torch.allclose(logits[t], expected, atol=1e-6)
    assert model.output.in_features == 8 + 4
    other = build(SoftAttentionRecognizer, output_layer="state_context")
    assert other.output.in_features == 8 + 16
    with pytest.raises(ConfigError, match="model_conf.output_layer"):
        build(SoftAttentionRecognizer, output_layer="both")


def test_two_stns_coarse_then_fine():
    model = build(SharpAttentionRecognizer, num_stn=2)
    localisers = model.context_module.sharpener.localisers
    assert [stn.mode for stn in localisers] == ["x_translation", "affine"]
    assert localisers[0].out_size == (64, 32)


@pytest.mark.parametrize("cls", [HardAttentionRecognizer, SharpAttentionRecognizer])
def test_validation_takes_the_argmax_region(cls):
    model = build(cls).eval()
    runs = []
    for seed in range(4):
        torch.manual_seed(seed)
        _, stats, _ = model(*batch())
        runs.append((stats["loss"].item(), stats["acc"].item()))
    assert len(set(runs)) == 1
    # ... the same choice as decoding: teacher-forced log-likelihood with argmax regions.
    assert "loss_reinforce" not in stats


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
    assert "loss_reinforce" in stats
    # The REINFORCE surrogate alone reaches the attention but not the output layer.
    model.zero_grad()
    features = model.encode(model.prepare_images(*batch()[:2]))
    targets = torch.tensor([[3, 4, 5, 12], [6, 7, 12, -1]])
    logits, _, log_alphas, _ = model.run_decoder(None, features, targets, 4, greedy=False)
    torch.stack(log_alphas, 1).sum().backward()
    assert model.output.weight.grad is None or model.output.weight.grad.abs().sum() == 0
    assert model.attend.score.weight.grad.abs().sum() > 0


def test_reference_supervision_pulls_patches_to_the_target_digit(tmp_path):
    # Reference of every digit: a bright 8-px bar in the middle of a 24x32 patch.
    references = np.zeros((10, 32, 24), dtype=np.float32)
    references[:, :, 8:16] = 1.0
    np.save(tmp_path / "ref.npy", references)
    model = build(SharpAttentionRecognizer, reference_images=str(tmp_path / "ref.npy"))
    assert model.has_reference.sum() == 10 and torch.equal(
        model.references[TOKENS.index("7")], torch.from_numpy(references[7])
    )
    # An image with one such bar away from the chosen regions' centres: only moving the patch matches it.
    image = torch.zeros(2, 100, 32)
    image[:, 50:60] = 1.0
    lengths = torch.tensor([100, 100])
    sharpener = model.context_module.sharpener
    region_image = model.region_image(image, lengths, model.prepare_images(image, lengths))
    index = torch.tensor([10, 15])  # centres 44 and 64 px: the bar lies off-centre in both
    targets, mask = torch.tensor([[5], [6]]), torch.ones(2, 1, dtype=torch.bool)

    def reference_loss():
        return model.reference_loss([sharpener(region_image, index)[0]], targets, mask)

    optimizer = torch.optim.Adam(sharpener.localisers.parameters(), lr=0.02)
    before = reference_loss().item()
    for _ in range(40):
        optimizer.zero_grad()
        reference_loss().backward()
        optimizer.step()
    after = reference_loss().item()
    assert after < 0.5 * before, (before, after)
    np.save(tmp_path / "bad.npy", references[:, :16])
    with pytest.raises(ConfigError, match="do not match the patch size"):
        build(SharpAttentionRecognizer, reference_images=str(tmp_path / "bad.npy"))


def test_bad_options_and_long_labels_are_refused():
    with pytest.raises(ConfigError, match="model_conf.context.*belongs to sharp attention"):
        build(SoftAttentionRecognizer, context="chain")
    with pytest.raises(ConfigError, match="model_conf.context.*unknown"):
        build(SharpAttentionRecognizer, context="mean")
    model = build(SoftAttentionRecognizer)
    image, lengths, _, _ = batch()
    with pytest.raises(InputError, match="more than max_length 5"):
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
        and len(model.context_module.sharpener.localisers) == 2
    )


def test_reinforce_loss_uses_the_batch_mean_log_likelihood_as_first_baseline():
    model = build(HardAttentionRecognizer)
    log_p = torch.tensor([[-1.0, -3.0], [-2.0, 0.0]])  # the second image has one valid step
    mask = torch.tensor([[True, True], [True, False]])
    log_alpha = [torch.tensor([-0.5, -0.7], requires_grad=True), torch.tensor([-0.2, -0.9])]
    loss, baseline = model.reinforce_loss(log_p, log_alpha, mask)
    assert baseline.item() == pytest.approx(-2.0)  # (-1 - 3 - 2) / 3 valid steps
    loss.backward()
    # ∂/∂ log α_1 = -(r - b) / B for each image at step 1: r = -1 and -2, b = -2, B = 2.
    assert torch.allclose(log_alpha[0].grad, torch.tensor([-0.5, 0.0]))
    _, second = model.reinforce_loss(log_p, log_alpha, mask)
    assert second.item() == pytest.approx(0.9 * -2.0 + 0.1 * -2.0)


def digit_columns(generator: torch.Generator, batch_size: int, projection: torch.Tensor):
    """Strips of 5 digits whose 24 feature columns each carry only the digit under it and its position:
    step t's digit is readable from the columns of digit t, so reading it needs the attention to find them
    (except the last, which h_0 = f_i(mean X), the strip's digit counts, and the four read give away)."""
    digits = torch.randint(0, 10, (batch_size, 5), generator=generator)
    under = digits[:, torch.arange(24) * 5 // 24]  # (B, 24): the digit under each column
    columns = torch.cat(
        [torch.nn.functional.one_hot(under, 10).float(), torch.eye(24).expand(batch_size, -1, -1)],
        -1,
    )
    return torch.tanh(columns @ projection), digits + TOKENS.index("0")


def test_hard_attention_learns_where_to_look_from_the_reinforce_term():
    """Eq. (9) end to end through forward(): the sampled choice gets no gradient from the cross entropy, so
    the REINFORCE term is what moves α to the columns of the target digit; without it (λ_r = 0) the
    attention's weights get exactly zero gradient."""
    generator = torch.Generator().manual_seed(0)
    projection = torch.randn(34, 32, generator=generator) / 3
    features = {}
    image, lengths, length = torch.zeros(32, 100, 32), torch.full((32,), 100), torch.full((32,), 5)
    # 800 updates: at 400, whether step 4 had found its digit yet depended on float rounding (thread
    # count, CPU); from 600 on, five data seeds all aligned steps 1-4.
    for lambda_r, steps in ((0.0, 5), (1.0, 800)):
        model = build(
            HardAttentionRecognizer,
            lstm_units=16,
            attention_dim=32,
            decoder_units=32,
            embed_dim=8,
            lambda_r=lambda_r,
        )
        model.encode = lambda images: features["X"]  # synthetic columns stand in for VGG + BiLSTM
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        for _ in range(steps):
            features["X"], text = digit_columns(generator, 32, projection)
            loss, _, _ = model(image, lengths, text, length)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if not lambda_r:
                assert all(not p.grad.any() for p in model.attend.parameters())
    model.eval()
    features["X"], text = digit_columns(generator, 200, projection)
    image, lengths, length = (
        torch.zeros(200, 100, 32),
        torch.full((200,), 100),
        torch.full((200,), 5),
    )
    _, stats, _ = model(image, lengths, text, length)
    _, details, _ = model.recognize(image, lengths, return_steps=True)
    chosen = torch.tensor(
        [[alpha.argmax().item() for _, alpha, _ in steps[:5]] for steps in details]
    )
    aligned = (chosen * 5 // 24 == torch.arange(5)).float().mean(0)[:4]
    assert aligned.min() > 0.8 and stats["acc"] > 0.9 and stats["entropy"] < 1.5, (aligned, stats)
