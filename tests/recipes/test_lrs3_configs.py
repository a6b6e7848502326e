"""The full-size lip-reading configs are the paper's models (A.3.2): sizes, dropouts, label smoothing, and the
total parameter counts it states (160 M base, 477 M large with 1,000 subword units); what A.3.2 leaves to
AV-HuBERT's fine-tuning recipes (facebookresearch/av_hubert avhubert/conf/finetune/base_vox_30h.yaml,
large_lrs3_433h.yaml, self_large_vox_30h.yaml) as those set it."""

from pathlib import Path

import pytest
import torch
import yaml

from espnet_ext.registry import build_model

CONF = Path(__file__).resolve().parents[2] / "egs" / "lrs3" / "vsr1" / "conf"


@pytest.mark.parametrize(
    "name,blocks,dim,heads,decoder_blocks,decoder_heads,freeze,paper_parameters",
    [
        ("train_vsr_base.yaml", 12, 768, 12, 6, 4, 24000, 160e6),
        ("train_vsr_large.yaml", 24, 1024, 16, 9, 8, 18000, 477e6),
        ("train_vsr_large_self.yaml", 24, 1024, 16, 9, 8, 80000, 477e6),
    ],
)
def test_paper_models(
    tmp_path, name, blocks, dim, heads, decoder_blocks, decoder_heads, freeze, paper_parameters
):
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(
        "\n".join(["<blank>", "<unk>", *(f"t{i}" for i in range(997)), "<sos/eos>"]) + "\n"
    )
    with torch.device("meta"):  # the architecture only
        model = build_model(
            "espnet_ext.tasks.lip_reading:LipReadingTask",
            ["--config", str(CONF / name), "--token_list", str(tokens)],
        )
    encoder, decoder = model.encoder, model.decoder
    assert (len(encoder.layers), encoder.output_size(), encoder.layers[0].self_attn.h) == (
        blocks, dim, heads)  # fmt: skip
    assert len(decoder.decoders) == decoder_blocks and decoder.decoders[0].size == dim
    # av_hubert: decoder_attention_heads 8 (large; base: hubert_asr.py's default 4), tied embeddings,
    # no embedding scale (no_scale_embedding), freeze_finetune_updates per config.
    assert decoder.decoders[0].self_attn.h == decoder.decoders[0].src_attn.h == decoder_heads
    assert decoder.output_layer.weight is decoder.embed[0].weight and decoder.embed[1].xscale == 1.0
    assert model.freeze_finetune_updates == freeze
    # image_aug: a random 88x88 crop + horizontal flip in training, the centre 88x88 otherwise
    assert (model.frontend.crop_size, model.frontend.augment) == (88, True)
    layer = encoder.layers[0]
    # av_hubert conf/finetune: dropout 0.0 (encoder residual), activation_dropout 0.1, attention_dropout 0.0
    assert (layer.dropout.p, layer.activation_dropout.p, layer.self_attn.dropout_rate) == (
        0.0, 0.1, 0.0)  # fmt: skip
    # decoder_dropout 0.1 and decoder_activation_dropout 0.1 (one rate in ESPnet's decoder), attention 0.0
    assert decoder.decoders[0].dropout.p == 0.1
    assert (
        decoder.decoders[0].self_attn.dropout_rate == decoder.decoders[0].src_attn.dropout_rate == 0
    )
    assert encoder.layerdrop > 0 and model.criterion_att.smoothing == 0.1
    total = sum(p.numel() for p in model.parameters())
    assert total == pytest.approx(paper_parameters, rel=0.04), total
    config = yaml.safe_load((CONF / name).read_text())
    assert (
        config["decoder_conf"]["use_flash_attn"] is False
    )  # attention dropout alike on every site
