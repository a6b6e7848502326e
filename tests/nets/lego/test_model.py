"""The LegoNN MT model: eq. (11) over several modules, interface targets, the CTC length check, and a
real ``mt_train`` run through ESPnet2's trainer."""

import pytest
import torch
from espnet2.train.reporter import Reporter
from tiny_lego import (
    FEATS,
    PHONE_VOCAB,
    TEXT_VOCAB,
    asr_experiment_config,
    build,
    decoder_conf,
    experiment_config,
    module_conf,
    random_batch,
    save_experiment,
)

from espnet_ext.errors import ConfigError, InputError
from espnet_ext.nets.lego.interface import ctc_loss

# on one worker with the other modules of its session fixture (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("trained_experiment")


def phone_targets(batch=3):
    lengths = torch.tensor([3, 2, 2][:batch])
    return torch.tensor([[2, 3, 4], [5, 6, -1], [7, 2, -1]][:batch]), lengths


def three_module_config(**model_conf):
    """Phoneme recogniser -> pronunciation model (WEmb RF 3) -> decoder, as the Europarl ASR of §V-C2."""
    modules = [
        module_conf(PHONE_VOCAB, olc_ratio=1.2),
        module_conf(TEXT_VOCAB, input_layer="wemb", olc_ratio=1.0),
    ]
    modules[1]["ingestor"]["receptive_field"] = 3
    return experiment_config(modules, interface_text_keys=["phn", "text"], **model_conf)


def test_loss_is_ce_plus_every_modules_ctc_in_its_own_vocabulary():
    model = build(three_module_config())
    src, src_lengths = random_batch()
    text, text_lengths = random_batch(seed=1)
    phn, phn_lengths = phone_targets()
    loss, stats, _ = model(text, text_lengths, src, src_lengths, phn=phn, phn_lengths=phn_lengths)
    assert loss.item() == pytest.approx(
        (stats["loss_ce"] + stats["loss_ctc_0"] + stats["loss_ctc_1"]).item(), rel=1e-6
    )
    # Module 0's CTC is eq. (7) over the phoneme interface, recomputed outside the model.
    (lp0, k0), _ = model.interfaces(src, src_lengths)
    assert lp0.size(-1) == len(PHONE_VOCAB) and k0.tolist() == [
        9,
        6,
        5,
    ]  # ceil(1.2 T), T = length + <eos>
    assert stats["loss_ctc_0"].item() == pytest.approx(
        ctc_loss(lp0, k0, phn, phn_lengths).item(), rel=1e-6
    )
    memory, _ = model.encode(src, src_lengths)
    assert memory.shape == (3, 9, 16)  # decoder memory: ingested distributions


def test_interface_targets_must_exist_and_match_their_vocabulary():
    with pytest.raises(ConfigError, match=r"interface_text_keys\[0\]"):
        build(experiment_config([module_conf(PHONE_VOCAB)]))  # phonemes cannot use 'text'
    model = build(three_module_config())
    src, src_lengths = random_batch()
    with pytest.raises(InputError, match="no 'phn'"):
        model(src, src_lengths, src, src_lengths)
    with pytest.raises(ConfigError, match="on_short_ctc"):
        build(three_module_config(on_short_ctc="skip"))


def test_an_olc_ratio_too_short_for_the_ctc_target_is_refused_or_counted():
    modules = [module_conf(TEXT_VOCAB, olc_ratio=0.5)]
    src, src_lengths = random_batch()
    refusing = build(experiment_config(modules))
    with pytest.raises(ConfigError, match=r"encoder_conf.modules\[0\].olc.*CTC length"):
        refusing(src, src_lengths, src, src_lengths)
    counting = build(experiment_config(modules, on_short_ctc="report"))
    loss, stats, _ = counting(src, src_lengths, src, src_lengths)
    assert stats["ctc_too_short_0"].item() == 3 and torch.isfinite(loss).all()


def test_beamconv_decoder_trains_only_its_side_of_the_bottleneck():
    model = build(experiment_config([module_conf(TEXT_VOCAB)], decoder_conf("beamconv"))).train()
    src, src_lengths = random_batch()
    # The decoder's CE alone: nothing reaches the encoder (its CTC loss is what trains it).
    loss_ce = model._calc_mt_att_loss(*model.encode(src, src_lengths), src, src_lengths)[0]
    loss_ce.backward()
    assert all(p.grad is None for p in model.encoder.parameters())
    assert model.decoder.ingestor.token_embedding.weight.grad.abs().sum() > 0
    model.zero_grad()
    model(src, src_lengths, src, src_lengths)[0].backward()  # eq. (11): CTC trains the encoder
    assert model.encoder.encoder_modules[0].interface.projection.weight.grad.abs().sum() > 0


def test_mt_train_trains_a_legonn_model_and_the_loss_decreases(trained_experiment):
    exp, _ = trained_experiment
    reporter = Reporter()
    checkpoint = torch.load(exp / "checkpoint.pth", map_location="cpu", weights_only=False)
    reporter.load_state_dict(checkpoint["reporter"])
    losses = [reporter.get_value("train", "loss", epoch) for epoch in (1, 2, 3)]
    assert losses[2] < losses[0], losses
    assert reporter.get_value("train", "ctc_too_short_0", 3) == 0
    ctc = [reporter.get_value("train", "loss_ctc_0", epoch) for epoch in (1, 3)]
    assert ctc[1] < ctc[0]


def asr_config(input_layer="conv2d", **model_conf):
    """Speech (4x subsampling) -> phonemes (OLC 1/1.2) -> words (WEmb RF 5, OLC 1/3.5), §V-C2."""
    modules = [
        module_conf(
            PHONE_VOCAB, input_layer, olc_ratio=1 / 1.2, conv_channels=[4, 4], conv_strides=[2, 2]
        ),
        module_conf(TEXT_VOCAB, input_layer="wemb", olc_ratio=1 / 3.5),
    ]
    modules[1]["ingestor"]["receptive_field"] = 5
    return asr_experiment_config(modules, interface_text_keys=["phn", "text"], **model_conf)


@pytest.mark.parametrize(
    "input_layer, phone_lengths, word_lengths",
    [
        # conv2d: T' = ((T - 1) // 2 - 1) // 2 = 19, 14; ceil(T' / 1.2) = 16, 12; ceil(k0 / 3.5) = 5, 4
        ("conv2d", [16, 12], [5, 4]),
        # two padded 3x3 stride-2 CNN layers: T' = ceil(ceil(T / 2) / 2) = 20, 15; ceil(T' / 1.2) = 17, 13
        ("cnn", [17, 13], [5, 4]),
    ],
)
def test_asr_model_sums_the_phoneme_and_word_interface_ctc_with_the_decoder_ce(
    input_layer, phone_lengths, word_lengths
):
    model = build(asr_config(input_layer))
    speech = torch.randn(2, 80, FEATS)
    speech_lengths = torch.tensor([80, 60])
    text, text_lengths = torch.tensor([[2, 3, 4], [5, 6, -1]]), torch.tensor([3, 2])
    phn, phn_lengths = phone_targets(batch=2)
    loss, stats, _ = model(
        speech, speech_lengths, text, text_lengths, phn=phn, phn_lengths=phn_lengths
    )
    assert loss.item() == pytest.approx(
        (stats["loss_ce"] + stats["loss_ctc_0"] + stats["loss_ctc_1"]).item(), rel=1e-6
    )
    (_, k0), (_, k1) = model.interfaces(speech, speech_lengths)
    assert k0.tolist() == phone_lengths and k1.tolist() == word_lengths
    with pytest.raises(ConfigError, match="ctc_weight"):
        build(asr_config(ctc_weight=0.3))


def test_decoder_can_share_its_token_table_with_the_wemb_ingestor():
    shared = decoder_conf()
    shared["share_ingestor_embedding"] = True
    model = build(experiment_config([module_conf(TEXT_VOCAB)], shared)).train()
    plain = build(experiment_config([module_conf(TEXT_VOCAB)]))
    n = sum(p.numel() for p in model.parameters())
    assert sum(p.numel() for p in plain.parameters()) - n == len(TEXT_VOCAB) * 16
    assert model.decoder.ingestor.shared_embedding is model.decoder.embed[0]
    src, src_lengths = random_batch()
    model(src, src_lengths, src, src_lengths)[0].backward()
    assert model.decoder.embed[0].weight.grad.abs().sum() > 0
    with pytest.raises(ConfigError, match="share_ingestor_embedding"):
        build(
            experiment_config(
                [module_conf(TEXT_VOCAB)],
                dict(decoder_conf("beamconv"), share_ingestor_embedding=True),
            )
        )


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_legonn_translates_on_cuda_as_on_the_cpu(tmp_path):
    """``--gpu_inference true``'s path for LegoNN (our mt_inference class, ESPnet's ``--ngpu 1``): the
    ingestor, the OLC and the beam search on the GPU give the CPU's translations."""
    from espnet_ext.bin.mt_inference import Text2Text

    config, model_file, _ = save_experiment(
        tmp_path / "exp", experiment_config([module_conf(TEXT_VOCAB)]), seed=3
    )
    sources = [["w1", "w2", "w3"], ["w4", "w5", "w6", "w7", "w8"], ["w9"]]
    translations = {}
    for device in ("cpu", "cuda"):
        translate = Text2Text(
            mt_train_config=config,
            mt_model_file=model_file,
            beam_size=2,
            ctc_weight=0.0,
            device=device,
        )
        translations[device] = [
            translate(torch.tensor([TEXT_VOCAB.index(w) for w in words]))[0][0] for words in sources
        ]
    assert translations["cuda"] == translations["cpu"]
