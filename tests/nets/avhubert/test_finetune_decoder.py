"""AV-HuBERT's fine-tuning decoder embedding (avhubert/hubert_asr.py AVHubertSeq2SeqConfig, conf/finetune/
*.yaml: share_decoder_input_output_embed true, no_scale_embedding true): one table for input and output,
N(0, d^-1/2) initialised, added unscaled to the positional encoding."""

import math

import pytest
import torch
from test_freeze_finetune import BATCH, tiny_model

from espnet_ext.errors import ConfigError


def test_shared_table_is_the_output_projection_and_fairseq_initialised(tmp_path):
    model = tiny_model(tmp_path, share_decoder_input_output_embed=True)
    table, output = model.decoder.embed[0], model.decoder.output_layer
    assert output.weight is table.weight
    assert (
        sum(p.numel() for p in model.parameters())
        == sum(p.numel() for p in tiny_model(tmp_path).parameters()) - table.weight.numel()
    )
    dim = table.embedding_dim
    std = table.weight.std().item()
    assert abs(std - dim**-0.5) < 0.3 * dim**-0.5 and torch.all(output.bias == 0)
    # The logits are the decoder state times the embedding table.
    hidden = torch.randn(3, dim)
    torch.testing.assert_close(output(hidden), hidden @ table.weight.T)
    # Both uses train the one table; a state dict round trip keeps them one.
    loss, _, _ = model(**BATCH)
    loss.backward()
    assert table.weight.grad is not None
    again = tiny_model(tmp_path, share_decoder_input_output_embed=True)
    again.load_state_dict(model.state_dict())
    assert again.decoder.output_layer.weight is again.decoder.embed[0].weight
    torch.testing.assert_close(again.decoder.embed[0].weight, table.weight)


@pytest.mark.parametrize("scale", [True, False])
def test_embedding_scale(tmp_path, scale):
    model = tiny_model(tmp_path, scale_decoder_embedding=scale).eval()
    table, positions = model.decoder.embed
    tokens = torch.tensor([[2, 3, 4]])
    x = table(tokens)
    pe = positions(torch.zeros_like(x))  # the positional encoding alone
    factor = math.sqrt(table.embedding_dim) if scale else 1.0
    torch.testing.assert_close(model.decoder.embed(tokens), x * factor + pe)


def test_other_decoders_are_refused(tmp_path):
    model = tiny_model(tmp_path)
    model.decoder.embed = torch.nn.Linear(2, 2)
    with pytest.raises(ConfigError, match="share_decoder_input_output_embed"):
        model._fairseq_decoder_embedding(True, True)
