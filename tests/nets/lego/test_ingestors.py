"""WEmb (eqs. 20-21) and BeamConv (eqs. 22-26) ingestors."""

import pytest
import torch
from espnet_averaging import espnet_average

from espnet_ext.errors import ConfigError
from espnet_ext.nets.lego.ingestors import BeamConvIngestor, WEmbIngestor, top_p_indices
from espnet_ext.nets.lego.layers import length_mask, sinusoidal_positions

TINY = dict(num_blocks=1, attention_heads=2, linear_units=16, dropout_rate=0.0)


def test_wemb_at_rf1_is_the_softmax_weighted_embedding_sum():
    torch.manual_seed(0)
    ing = WEmbIngestor(vocab_size=5, dim=8, receptive_field=1, **TINY).eval()
    logits = torch.randn(2, 4, 5)
    probs = logits.softmax(-1)
    valid = length_mask(torch.tensor([4, 4]), 4)
    w_emb = ing.weighted_embedding.weight[:, :, 0].T  # (|V|, d)
    expected = torch.einsum("bkv,vd->bkd", probs, w_emb)
    assert torch.allclose(ing.embed(probs.log(), valid), expected, atol=1e-6)
    out, _ = ing(logits.log_softmax(-1), torch.tensor([4, 4]))
    # Eq. (21) on h + PE(h):
    assert torch.allclose(out, ing.encoder(expected + sinusoidal_positions(4, 8), valid), atol=1e-5)


def test_wemb_wider_receptive_field_mixes_neighbours_but_not_padding():
    torch.manual_seed(0)
    ing = WEmbIngestor(vocab_size=3, dim=4, receptive_field=3, **TINY)
    probs = torch.rand(1, 4, 3)
    valid = length_mask(torch.tensor([3]), 4)
    got = ing.embed(probs.log(), valid)
    w = ing.weighted_embedding.weight  # (d, |V|, 3): taps for k-1, k, k+1
    at_2 = w[:, :, 0] @ probs[0, 1] + w[:, :, 1] @ probs[0, 2]  # position 3 is padding: no tap
    assert torch.allclose(got[0, 2], at_2, atol=1e-6)
    with pytest.raises(ConfigError, match="receptive_field"):
        WEmbIngestor(3, 4, receptive_field=2)


@pytest.mark.parametrize("receptive_field", [1, 5])
def test_wemb_content_starts_at_the_scale_of_the_positions(receptive_field):
    """W_Emb starts as an embedding table (unit variance over the RF taps): a confident token's expected
    embedding is as large as the sinusoidal positions added to it (eq. 20), not ~10x smaller."""
    torch.manual_seed(0)
    ing = WEmbIngestor(vocab_size=100, dim=144, receptive_field=receptive_field, **TINY)
    tokens = torch.randint(100, (1, 50))
    one_hot = torch.nn.functional.one_hot(tokens, 100).float()
    content = ing.embed((one_hot + 1e-9).log(), length_mask(torch.tensor([50]), 50))[0, 2:-2]
    positions = sinusoidal_positions(50, 144)
    ratio = float(content.pow(2).mean().sqrt() / positions.pow(2).mean().sqrt())
    assert 1.0 < ratio < 2.0, ratio


def test_wemb_passes_gradient_to_the_previous_module():
    ing = WEmbIngestor(vocab_size=5, dim=8, **TINY)
    logits = torch.randn(2, 3, 5, requires_grad=True)
    out, _ = ing(logits.log_softmax(-1), torch.tensor([3, 2]))
    out.sum().backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0


def test_beamconv_reads_only_top_p_indices_and_no_gradient_crosses_it():
    torch.manual_seed(0)
    ing = BeamConvIngestor(vocab_size=6, dim=8, beam_size=2, embed_dim=4, **TINY).eval()
    logits = torch.randn(2, 3, 6, requires_grad=True)
    lengths = torch.tensor([3, 3])
    assert (
        top_p_indices(logits, 2).tolist() == logits.argsort(-1, descending=True)[..., :2].tolist()
    )
    out, _ = ing(logits.log_softmax(-1), lengths)
    out.sum().backward()
    assert logits.grad is None  # the integer bottleneck of eq. (22)
    assert ing.token_embedding.weight.grad.abs().sum() > 0  # the ingestor itself still learns
    # Same ranking, other probabilities: same output.
    same_rank, _ = ing((logits.detach() * 3.0).log_softmax(-1), lengths)
    assert torch.allclose(same_rank, out, atol=1e-6)


def test_beamconv_refuses_weights_trained_with_another_beam_size():
    trained = BeamConvIngestor(vocab_size=6, dim=8, beam_size=3, embed_dim=4, **TINY)
    changed = BeamConvIngestor(vocab_size=6, dim=8, beam_size=2, embed_dim=4, **TINY)
    with pytest.raises(ConfigError, match="trained with beam size 3.*beam size 2"):
        changed.load_state_dict(trained.state_dict())
    BeamConvIngestor(6, 8, beam_size=3, embed_dim=4, **TINY).load_state_dict(trained.state_dict())
    with pytest.raises(ConfigError, match="beam_size"):
        BeamConvIngestor(vocab_size=6, dim=8, beam_size=7)


def test_beamconv_model_averaged_by_espnet_loads(tmp_path):
    states = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        states.append(BeamConvIngestor(6, 8, beam_size=3, embed_dim=4, **TINY).state_dict())
    averaged = espnet_average(states, tmp_path)
    BeamConvIngestor(6, 8, beam_size=3, embed_dim=4, **TINY).load_state_dict(averaged)


def test_an_ingestor_refuses_a_distribution_over_another_vocabulary():
    ing = WEmbIngestor(vocab_size=5, dim=8, **TINY)
    with pytest.raises(ConfigError, match="5 tokens.*emits 6"):
        ing(torch.randn(1, 2, 6).log_softmax(-1), torch.tensor([2]))


def test_wemb_with_a_shared_table_is_the_expected_embedding_of_that_table():
    torch.manual_seed(0)
    table = torch.nn.Embedding(5, 8)
    ing = WEmbIngestor(vocab_size=5, dim=8, **TINY).eval()
    ing.share_embedding(table)
    probs = torch.randn(1, 3, 5).softmax(-1)
    valid = length_mask(torch.tensor([2]), 3)
    got = ing.embed(probs.log(), valid)
    assert torch.allclose(got[0, :2], probs[0, :2] @ table.weight, atol=1e-6)
    assert (got[0, 2] == 0).all()  # padding
    assert "weighted_embedding.weight" not in dict(ing.named_parameters())
    with pytest.raises(ConfigError, match="receptive field 1"):
        WEmbIngestor(5, 8, receptive_field=3).share_embedding(table)
    with pytest.raises(ConfigError, match=r"\(5, 8\).*\(6, 8\)"):
        WEmbIngestor(6, 8).share_embedding(table)
