"""The decoder's start per target language on ESPnet's own TransformerDecoder, and per-side task tags of
task-conditioned ST models (encoder: source languages, decoder: target languages)."""

import pytest
import torch
import yaml
from espnet2.asr.decoder.transformer_decoder import TransformerDecoder

from espnet_ext.errors import ConfigError, InputError
from espnet_ext.nets.target_language import TargetLanguageStart, attach_target_language_start
from espnet_ext.registry import install
from espnet_ext.tasks.st import STTask

install()  # registration, as in the entry points

VOCAB, SOS, D = 7, 6, 8


def decoder_with_start(num_languages=3):
    torch.manual_seed(0)
    decoder = TransformerDecoder(VOCAB, D, attention_heads=2, linear_units=16, num_blocks=1,
                                 dropout_rate=0.0, positional_dropout_rate=0.0,
                                 self_attention_dropout_rate=0.0, src_attention_dropout_rate=0.0)  # fmt: skip
    return decoder.eval(), attach_target_language_start(decoder, num_languages, SOS)


def test_only_the_start_symbol_is_replaced_by_its_rows_language():
    start = TargetLanguageStart(3, 4, sos=SOS)
    tokens = torch.tensor([[SOS, 2, SOS], [3, 2, 1]])  # row 1 does not start with <sos>
    embedded = torch.randn(2, 3, 4)
    start.set_language_id(torch.tensor([[2], [0]]))
    out = start.replace_start(tokens, embedded)
    assert torch.equal(out[0, 0], start.weight[2])
    assert torch.equal(out[0, 1:], embedded[0, 1:])  # a later <sos> (eos) keeps its embedding
    assert torch.equal(out[1], embedded[1])
    with pytest.raises(InputError, match="target language id 3 unknown"):
        start.set_language_id(torch.tensor([3]))
    start.set_language_id(None)
    with pytest.raises(InputError, match="needs a target language per utterance"):
        start.replace_start(tokens, embedded)


def test_teacher_forcing_and_step_by_step_decoding_agree_per_language():
    decoder, start = decoder_with_start()
    memory, memory_lens = torch.randn(2, 5, D), torch.tensor([5, 5])
    ys = torch.tensor([[SOS, 2, 3, 4], [SOS, 2, 3, 4]])
    start.set_language_id(torch.tensor([0, 1]))
    full, _ = decoder(memory, memory_lens, ys, torch.tensor([4, 4]))
    assert not torch.allclose(full[0], full[1], atol=1e-4)  # same input, other target language
    for row in (0, 1):  # ESPnet's beam search: one utterance, the prefix re-embedded at every step
        start.set_language_id(torch.tensor([row]))
        mask = torch.tril(torch.ones(1, 3, 3, dtype=torch.bool))
        logp, _ = decoder.forward_one_step(ys[row : row + 1, :3], mask, memory[row : row + 1])
        torch.testing.assert_close(logp[0], torch.log_softmax(full[row, 2], -1), atol=1e-5, rtol=0)


def test_gradient_reaches_only_the_used_languages_rows():
    decoder, start = decoder_with_start()
    start.set_language_id(torch.tensor([2, 2]))
    out, _ = decoder(torch.randn(2, 5, D), torch.tensor([5, 4]), torch.tensor([[SOS, 2], [SOS, 3]]),
                     torch.tensor([2, 2]))  # fmt: skip
    out.sum().backward()
    grad = start.weight.grad
    assert grad[2].abs().sum() > 0 and grad[:2].abs().sum() == 0


def build_st(tmp_path, model_conf, decoder="transformer", decoder_conf=None):
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("\n".join(["<blank>", "<unk>", "a", "b", "c", "<sos/eos>"]) + "\n")
    selection = dict(head_candidates=4, selection_strategy="group")
    config = {
        "model": "task_conditioned",
        "model_conf": model_conf,
        "frontend": None,
        "normalize": None,
        "encoder": "head_selection_transformer",
        "encoder_conf": dict(output_size=8, attention_heads=2, linear_units=16, num_blocks=1,
                             input_layer="linear", num_tasks=2, **selection),
        "decoder": decoder,
        "decoder_conf": dict(attention_heads=2, linear_units=16, num_blocks=1, **(decoder_conf or {})),
    }  # fmt: skip
    conf = tmp_path / "st.yaml"
    conf.write_text(yaml.safe_dump(config))
    args = ["--config", str(conf), "--token_list", str(tokens), "--src_token_list", str(tokens)]
    return STTask.build_model(STTask.get_parser().parse_args(args + ["--input_size", "4"]))


def test_st_model_with_source_language_encoder_and_target_language_decoder(tmp_path):
    conf = {"encoder_task_tags": ["es", "it"], "decoder_task_tags": ["en", "es", "it"],
            "target_languages": ["en", "es", "it"], "asr_weight": 0.0}  # fmt: skip
    model = build_st(
        tmp_path, conf, "head_selection_transformer",
        dict(num_tasks=3, head_candidates=4, selection_strategy="group"),
    )  # fmt: skip
    batch = dict(speech=torch.randn(2, 6, 4), speech_lengths=torch.tensor([6, 5]),
                 text=torch.tensor([[2, 3], [4, -1]]), text_lengths=torch.tensor([2, 1]))  # fmt: skip
    loss, stats, _ = model(**batch, encoder_task_id=torch.tensor([[1], [0]]),
                           decoder_task_id=torch.tensor([[0], [2]]),
                           target_language_id=torch.tensor([[0], [2]]))  # fmt: skip
    loss.backward()
    assert torch.isfinite(loss) and model.target_language_start.weight.grad[[0, 2]].abs().sum() > 0
    with pytest.raises(InputError, match="give target_language_id"):
        model(**batch, encoder_task_id=torch.tensor([1, 0]), decoder_task_id=torch.tensor([0, 2]))
    with pytest.raises(ConfigError, match=r"3 task tags, but encoder.encoders.0.self_attn"):
        build_st(tmp_path, dict(conf, encoder_task_tags=["es", "it", "pt"]))
    with pytest.raises(ConfigError, match="target languages repeat"):
        build_st(tmp_path, dict(conf, target_languages=["en", "en"]))
