"""The modular plug (§IV-B3): encoder modules trained with CTC alone (``model: legonn_ctc``), exported,
and composed with the decoder of another experiment."""

import pytest
import torch
from espnet2.tasks.mt import MTTask
from tiny_lego import (
    FEATS,
    PHONE_VOCAB,
    TEXT_VOCAB,
    asr_experiment_config,
    build,
    experiment_config,
    module_conf,
    random_batch,
    save_experiment,
)

from espnet_ext.analysis.lego_swap import swapped_legonn
from espnet_ext.errors import ConfigError
from espnet_ext.nets.lego.interface import ctc_loss
from espnet_ext.nets.lego.inventory import compose, export_modules, load_artefact


def ctc_only(config):
    config.update(model="legonn_ctc", decoder="legonn_none", decoder_conf={})
    return config


def two_module_mt():
    modules = [
        module_conf(PHONE_VOCAB, olc_ratio=1.2),
        module_conf(TEXT_VOCAB, input_layer="wemb", olc_ratio=1.0),
    ]
    return ctc_only(experiment_config(modules, interface_text_keys=["phn", "text"]))


def phone_targets():
    return torch.tensor([[2, 3, 4], [5, 6, -1], [7, 2, -1]]), torch.tensor([3, 2, 2])


def test_mt_loss_is_the_sum_of_the_modules_ctc_and_nothing_else():
    model = build(two_module_mt())  # eval: no dropout, so the forward pass can be recomputed below
    assert model.decoder is None and not any(k.startswith("decoder.") for k in model.state_dict())
    src, src_lengths = random_batch()
    text, text_lengths = random_batch(seed=1)
    phn, phn_lengths = phone_targets()
    loss, stats, _ = model(text, text_lengths, src, src_lengths, phn=phn, phn_lengths=phn_lengths)
    assert "loss_ce" not in stats and "acc" not in stats
    (lp0, k0), (lp1, k1) = model.interfaces(src, src_lengths)
    expected = ctc_loss(lp0, k0, phn, phn_lengths) + ctc_loss(
        lp1, k1, text[:, : text_lengths.max()], text_lengths
    )
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert stats["loss"].item() == pytest.approx(
        (stats["loss_ctc_0"] + stats["loss_ctc_1"]).item(), rel=1e-6
    )
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())  # every weight is a module's


def one_hot_path(words: list[str], length: int) -> torch.Tensor:
    """Log-probabilities (1, length, V) whose argmax per frame is ``words`` ("_" the blank), then blanks."""
    ids = [0 if w == "_" else TEXT_VOCAB.index(w) for w in words] + [0] * (length - len(words))
    return torch.log_softmax(
        10 * torch.nn.functional.one_hot(torch.tensor([ids]), len(TEXT_VOCAB)).float(), -1
    )


def test_mt_validation_bleu_is_the_greedy_ctc_paths_whole():
    """window10.valid.bleu.max (§V) needs a validation BLEU: the last module's greedy path, repeats merged,
    blanks dropped, never cut at the reference's length (as ESPnet's teacher-forced BLEU would)."""
    model = build(two_module_mt())
    ref = ["w1", "w1", "w2", "w3", "w4"]
    text = torch.tensor([[TEXT_VOCAB.index(w) for w in ref] + [-1]])
    exact = one_hot_path(["w1", "w1", "_", "w1", "w2", "w3", "w3", "w4"], 10)
    assert model.validation_bleu(
        exact, torch.tensor([10]), text, torch.tensor([5])
    ) == pytest.approx(100)
    longer = one_hot_path(["w1", "_", "w1", "w2", "w3", "w4", "w5", "w6"], 10)
    bleu = model.validation_bleu(longer, torch.tensor([10]), text, torch.tensor([5]))
    # hypothesis w1 w1 w2 w3 w4 w5 w6: n-gram precisions 5/7, 4/6, 3/5, 2/4, no brevity penalty
    assert bleu == pytest.approx(100 * (5 / 7 * 4 / 6 * 3 / 5 * 2 / 4) ** 0.25, rel=1e-6)
    # frames past an utterance's length are not read
    assert model.validation_bleu(
        longer, torch.tensor([6]), text, torch.tensor([5])
    ) == pytest.approx(100)
    src, src_lengths = random_batch()
    batch_text, text_lengths = random_batch(seed=1)
    phn, phn_lengths = phone_targets()
    _, stats, _ = model(
        batch_text, text_lengths, src, src_lengths, phn=phn, phn_lengths=phn_lengths
    )
    assert 0 <= stats["bleu"] <= 100
    _, stats, _ = model.train()(
        batch_text, text_lengths, src, src_lengths, phn=phn, phn_lengths=phn_lengths
    )
    assert stats["bleu"] is None  # in training, as ESPnet's MT models


def test_asr_encoder_only_has_no_espnet_ctc_head_and_trains_on_ctc():
    config = asr_experiment_config([module_conf(TEXT_VOCAB, input_layer="linear")])
    model = build(ctc_only(config) | {"decoder": None}).train()
    assert model.ctc is None and model.decoder is None
    speech = torch.randn(2, 12, FEATS)
    lengths = torch.tensor([12, 9])
    text, text_lengths = random_batch(batch=2)
    loss, stats, _ = model(speech, lengths, text, text_lengths)
    assert loss.item() == pytest.approx(stats["loss_ctc_0"].item())
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_a_decoder_or_espnet_ctc_weight_is_refused():
    with pytest.raises(ConfigError, match="decoder: legonn_none"):
        build(two_module_mt() | {"decoder": "legonn", "decoder_conf": {}})
    config = asr_experiment_config([module_conf(TEXT_VOCAB, input_layer="linear")])
    config = ctc_only(config) | {"decoder": None}
    config["model_conf"]["ctc_weight"] = 0.3
    with pytest.raises(ConfigError, match="ctc_weight"):
        build(config)
    with pytest.raises(ConfigError, match="no decoder"):
        build(two_module_mt()).encode(*random_batch())


def test_encoder_trained_alone_plugs_into_another_experiments_decoder(tmp_path):
    """Table III: the Ro-En encoder-only module + the De-En model's decoder, decoded with no training."""
    from espnet2.bin.mt_inference import Text2Text

    enc_cfg, enc_file, encoder_only = save_experiment(tmp_path / "roen", two_module_mt(), seed=1)
    enc_parts = export_modules(enc_cfg, enc_file, tmp_path / "m_roen")
    assert [p.name for p in enc_parts] == ["encoder0.pt", "encoder1.pt"]
    assert {load_artefact(p)["kind"] for p in enc_parts} == {"encoder"}
    full = experiment_config([module_conf(TEXT_VOCAB)])
    dec_cfg, dec_file, deen = save_experiment(tmp_path / "deen", full, seed=2)
    dec_part = export_modules(dec_cfg, dec_file, tmp_path / "m_deen")[-1]
    config, model_file = compose([*enc_parts, dec_part], tmp_path / "composed")
    composed, _ = MTTask.build_model_from_file(config, model_file, "cpu")
    state = composed.state_dict()
    for key, value in encoder_only.state_dict().items():  # every encoder-only weight, unchanged
        assert torch.equal(state[key], value), key
    for key, value in deen.state_dict().items():
        if key.startswith("decoder."):
            assert torch.equal(state[key], value), key
    hyps = Text2Text(
        mt_train_config=config,
        mt_model_file=model_file,
        beam_size=2,
        maxlenratio=2.0,
        ctc_weight=0.0,
    )(torch.tensor([2, 3, 4]))
    assert hyps and isinstance(hyps[0][0], str)
    # The swap matrix: the encoder-only experiment's encoder feeds other decoders, it has none to give.
    enc = ("roen", str(enc_cfg), str(enc_file))
    dec = ("deen", str(dec_cfg), str(dec_file))
    assert swapped_legonn(enc, dec, tmp_path / "swap")[0].is_file()
    with pytest.raises(ConfigError, match="encoder-only"):
        swapped_legonn(dec, enc, tmp_path / "swap")


def test_encoder_only_model_decodes_greedily_with_lego_ctc_decode(tmp_path):
    """Table VII's encoder-only rows: each module's CTC best path, no decoder."""
    from espnet_ext.bin import lego_ctc_decode

    config, model_file, model = save_experiment(tmp_path / "x", two_module_mt(), seed=5)
    (tmp_path / "src").write_text("u1 w1 w2 w3\n", encoding="utf-8")
    out = tmp_path / "ctc.txt"
    args = ["--mt_train_config", str(config), "--mt_model_file", str(model_file)]
    args += ["--src_text", str(tmp_path / "src"), "--output", str(out), "--module", "0"]
    assert lego_ctc_decode.main(args) == 0
    src = torch.tensor([[TEXT_VOCAB.index(w) for w in ("w1", "w2", "w3")]])
    log_probs, _ = model.interfaces(src, torch.tensor([3]))[0]
    path = [i for i in torch.unique_consecutive(log_probs[0].argmax(-1)).tolist() if i != 0]
    assert out.read_text().split() == ["u1", *(PHONE_VOCAB[i] for i in path)]
    # --key_file: the pipelines' shards (utils/pipeline.sh decode_set) decode only their utterances
    (tmp_path / "src").write_text("u0 w4\nu1 w1 w2 w3\nu2 w5 w6\n", encoding="utf-8")
    (tmp_path / "keys.scp").write_text("u1 w1 w2 w3\n", encoding="utf-8")
    assert lego_ctc_decode.main([*args, "--key_file", str(tmp_path / "keys.scp")]) == 0
    assert out.read_text().split() == ["u1", *(PHONE_VOCAB[i] for i in path)]
