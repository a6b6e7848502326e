"""The Transformer LM with shared embedding builds through ESPnet2's LM task and scores for beam search."""

import pytest
import torch

from espnet_ext.errors import ConfigError

LM_YAML = """\
lm: transformer_tied
lm_conf: {pos_enc: sinusoidal, embed_unit: 16, att_unit: 16, head: 2, unit: 32, layer: 6, dropout_rate: 0.0}
"""


@pytest.fixture()
def lm_args(tmp_path):
    (tmp_path / "tokens.txt").write_text(
        "\n".join(["<blank>", "<unk>", "a", "b", "<sos/eos>"]) + "\n"
    )
    (tmp_path / "lm.yaml").write_text(LM_YAML)
    return [
        "--config",
        str(tmp_path / "lm.yaml"),
        "--token_list",
        str(tmp_path / "tokens.txt"),
        "--token_type",
        "word",
    ]


def test_embedding_is_shared_and_the_lm_trains(lm_args):
    from espnet_ext.nets.tied_transformer_lm import TiedTransformerLM
    from espnet_ext.registry import build_model

    model = build_model("lm", lm_args)
    lm = model.lm
    assert isinstance(lm, TiedTransformerLM)
    assert lm.decoder.weight is lm.embed.weight
    assert len(lm.encoder.encoders) == 6
    # One parameter fewer matrix than the untied ESPnet LM of the same size.
    names = [n for n, _ in model.named_parameters()]
    assert not any(n.endswith("lm.decoder.weight") for n in names)
    loss, stats, _ = model(
        text=torch.tensor([[2, 3, 2], [3, 2, 0]]), text_lengths=torch.tensor([3, 2])
    )
    loss.backward()
    assert lm.embed.weight.grad is not None and torch.isfinite(loss)


def test_batch_score_is_causal(lm_args):
    from espnet_ext.registry import build_model

    lm = build_model("lm", lm_args).lm.eval()
    ys = torch.tensor([[4, 2, 3], [4, 2, 2]])  # same prefix "<sos> a", different last token
    with torch.no_grad():
        scores, _ = lm.batch_score(ys[:, :2], [None, None], torch.zeros(2, 1))
        full, _ = lm(ys, None)
    torch.testing.assert_close(scores[0], scores[1])  # prefix-only: the unseen tokens do not matter
    torch.testing.assert_close(scores[0], full[0, 1].log_softmax(-1), atol=1e-5, rtol=1e-5)


def test_untieable_sizes_are_refused(lm_args, tmp_path):
    from espnet_ext.registry import build_model

    (tmp_path / "lm.yaml").write_text(LM_YAML.replace("att_unit: 16", "att_unit: 32"))
    with pytest.raises(ConfigError, match="embed_unit == att_unit"):
        build_model("lm", lm_args)
