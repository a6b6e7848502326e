"""Module inventory: export -> compose -> load round trips, decoding and --init_param of a composed model,
and the refusals (interface vocabulary mismatch, artefact format version)."""

import re

import pytest
import torch
from espnet2.tasks.mt import MTTask
from espnet2.torch_utils.load_pretrained_model import load_pretrained_model
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

from espnet_ext.bin import lego_compose, lego_export
from espnet_ext.errors import ConfigError, InputError
from espnet_ext.nets.lego.inventory import VERSION, compose, export_modules, load_artefact

# on one worker with the other modules of its session fixture (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("trained_experiment")


def three_module_config():
    modules = [
        module_conf(PHONE_VOCAB, olc_ratio=1.2),
        module_conf(TEXT_VOCAB, input_layer="wemb", olc_ratio=1.0),
    ]
    return experiment_config(modules, interface_text_keys=["phn", "text"])


def one_module_config():
    return experiment_config([module_conf(TEXT_VOCAB)])


def ids(sentence):
    return torch.tensor([TEXT_VOCAB.index(w) for w in sentence.split()])


def assert_same_weights(model, reference, prefix):
    ref = {k: v for k, v in reference.state_dict().items() if k.startswith(prefix)}
    got = model.state_dict()
    assert ref and all(torch.equal(got[k], v) for k, v in ref.items()), prefix


def test_artefacts_carry_vocabularies_length_range_and_version(tmp_path):
    config, model_file, _ = save_experiment(tmp_path / "asr", three_module_config())
    paths = export_modules(config, model_file, tmp_path / "modules")
    assert [p.name for p in paths] == ["encoder0.pt", "encoder1.pt", "decoder.pt"]
    enc0, enc1, dec = (load_artefact(p) for p in paths)
    assert enc0["version"] == VERSION and enc0["kind"] == "encoder"
    assert enc0["interface_vocab"] == PHONE_VOCAB and enc0["input_vocab"] == TEXT_VOCAB
    assert enc1["input_vocab"] == PHONE_VOCAB and enc1["interface_vocab"] == TEXT_VOCAB
    assert enc0["length"] == {"olc_ratio": 1.2, "max_length": 64}
    assert dec["input_vocab"] == TEXT_VOCAB and dec["output_vocab"] == TEXT_VOCAB
    assert dec["length"] == {"olc_ratio": 1.0, "max_length": 64}
    assert sorted(p.name for p in (tmp_path / "modules").iterdir()) == sorted(p.name for p in paths)


def test_export_then_compose_rebuilds_the_same_model(tmp_path):
    config, model_file, original = save_experiment(tmp_path / "asr", three_module_config(), seed=3)
    paths = export_modules(config, model_file, tmp_path / "modules")
    config2, model2 = compose(paths, tmp_path / "composed")
    loaded, _ = MTTask.build_model_from_file(config2, model2, "cpu")
    assert set(loaded.state_dict()) == set(original.state_dict())
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in original.state_dict().items())
    src, lengths = random_batch()
    assert torch.allclose(loaded.eval().encode(src, lengths)[0], original.encode(src, lengths)[0])


def test_modules_from_different_experiments_compose_into_one_model(tmp_path):
    # Pronunciation chain of experiment A, decoder of experiment B (another seed, one module).
    a = export_modules(
        *save_experiment(tmp_path / "a", three_module_config(), seed=1)[:2], tmp_path / "ma"
    )
    cfg_b, file_b, model_b = save_experiment(tmp_path / "b", one_module_config(), seed=2)
    b = export_modules(cfg_b, file_b, tmp_path / "mb")
    out = lego_compose.main(
        ["--modules", str(a[0]), str(a[1]), str(b[1]), "--output_dir", str(tmp_path / "c")]
    )
    assert out == 0
    composed, _ = MTTask.build_model_from_file(
        tmp_path / "c/config.yaml", tmp_path / "c/model.pth", "cpu"
    )
    model_a = build(three_module_config(), seed=1)
    assert_same_weights(composed, model_a, "encoder.")
    assert_same_weights(composed, model_a, "frontend.")
    assert_same_weights(composed, model_b, "decoder.")


def test_composed_model_decodes_with_no_training_and_initialises_fine_tuning(tmp_path):
    from espnet2.bin.mt_inference import Text2Text

    cfg, file, _ = save_experiment(tmp_path / "x", one_module_config(), seed=4)
    config2, model2 = compose(export_modules(cfg, file, tmp_path / "m"), tmp_path / "c")
    translate = Text2Text(
        mt_train_config=config2, mt_model_file=model2, beam_size=2, maxlenratio=2.0, ctc_weight=0.0
    )
    hyps = translate(ids("w1 w2 w3"))
    assert hyps and isinstance(hyps[0][0], str)
    # --init_param: ESPnet's loader, as the trainer calls it, onto a freshly built model.
    fresh = build(one_module_config(), seed=9)
    load_pretrained_model(str(model2), fresh, ignore_init_mismatch=False, map_location="cpu")
    reference, _ = MTTask.build_model_from_file(config2, model2, "cpu")
    assert all(torch.equal(fresh.state_dict()[k], v) for k, v in reference.state_dict().items())


def test_trained_model_round_trip_decodes_identically(trained_experiment, tmp_path):
    from espnet2.bin.mt_inference import Text2Text

    exp, _ = trained_experiment
    lego_export.main(
        [
            "--config",
            str(exp / "config.yaml"),
            "--model_file",
            str(exp / "3epoch.pth"),
            "--output_dir",
            str(tmp_path / "m"),
        ]
    )
    config2, model2 = compose(
        [tmp_path / "m/encoder0.pt", tmp_path / "m/decoder.pt"], tmp_path / "c"
    )
    kwargs = dict(beam_size=2, maxlenratio=2.0, ctc_weight=0.0)
    original = Text2Text(
        mt_train_config=exp / "config.yaml", mt_model_file=exp / "3epoch.pth", **kwargs
    )
    composed = Text2Text(mt_train_config=config2, mt_model_file=model2, **kwargs)
    for sentence in ("w1 w2 w3", "w4 w4 w5 w6"):
        assert original(ids(sentence))[0][0] == composed(ids(sentence))[0][0]


def test_mismatched_interface_vocabularies_are_refused_naming_both_files(tmp_path, capsys):
    a = export_modules(*save_experiment(tmp_path / "a", three_module_config())[:2], tmp_path / "ma")
    b = export_modules(*save_experiment(tmp_path / "b", one_module_config())[:2], tmp_path / "mb")
    # A's phoneme recogniser emits phonemes; B's decoder reads words.
    with pytest.raises(ConfigError, match=r"encoder0.pt emits.*decoder.pt does not read.*8 vs 13"):
        compose([a[0], b[1]], tmp_path / "bad")
    assert not (tmp_path / "bad").exists()  # nothing written that looks like a model
    command = ["--modules", str(a[0]), str(b[1]), "--output_dir", str(tmp_path / "bad")]
    assert lego_compose.main(command) == 1
    assert re.match("error: .*does not read", capsys.readouterr().err)
    with pytest.raises(ConfigError, match="followed by one decoder"):
        compose([a[0], a[1]], tmp_path / "bad")


def test_an_artefact_of_another_format_version_is_refused(tmp_path):
    paths = export_modules(
        *save_experiment(tmp_path / "a", one_module_config())[:2], tmp_path / "m"
    )
    artefact = torch.load(paths[0], weights_only=False)
    artefact["version"] = VERSION + 1
    torch.save(artefact, paths[0])
    with pytest.raises(InputError, match=rf"encoder0.pt: artefact format version {VERSION + 1}"):
        compose(paths, tmp_path / "c")
    torch.save({"weights": 1}, paths[0])
    with pytest.raises(InputError, match="not a LegoNN module artefact"):
        load_artefact(paths[0])


def test_ctc_greedy_decoding_of_the_encoder_module_alone(trained_experiment, tmp_path, capsys):
    from espnet_ext.bin import lego_ctc_decode

    exp, data = trained_experiment
    out = tmp_path / "ctc.txt"
    lego_ctc_decode.main(
        [
            "--mt_train_config",
            str(exp / "config.yaml"),
            "--mt_model_file",
            str(exp / "3epoch.pth"),
            "--src_text",
            str(data / "valid_text"),
            "--output",
            str(out),
        ]
    )
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [line.split()[0] for line in lines] == [
        line.split()[0] for line in (data / "valid_text").read_text().splitlines()
    ]
    # Same best paths as the model's own interface, greedy-decoded by hand.
    model, _ = MTTask.build_model_from_file(exp / "config.yaml", exp / "3epoch.pth", "cpu")
    first_src = (data / "valid_text").read_text().splitlines()[0].split()[1:]
    log_probs, lengths = model.eval().interfaces(
        ids(" ".join(first_src))[None], torch.tensor([len(first_src)])
    )[0]
    path = torch.unique_consecutive(log_probs[0].argmax(-1))
    assert lines[0].split()[1:] == [TEXT_VOCAB[i] for i in path.tolist() if i != 0]
    bad = tmp_path / "bad.txt"
    bad.write_text("utt1\n", encoding="utf-8")
    assert (
        lego_ctc_decode.main(
            [
                "--mt_train_config",
                str(exp / "config.yaml"),
                "--mt_model_file",
                str(exp / "3epoch.pth"),
                "--src_text",
                str(bad),
                "--output",
                str(out),
            ]
        )
        == 1
    )
    assert "bad.txt:1: expected" in capsys.readouterr().err


def test_speech_modules_compose_with_a_text_decoder_into_an_asr_model(tmp_path):
    from espnet2.tasks.asr import ASRTask

    modules = [
        module_conf(PHONE_VOCAB, input_layer="conv2d", olc_ratio=1 / 1.2),
        module_conf(TEXT_VOCAB, input_layer="wemb", olc_ratio=1 / 3.5),
    ]
    asr = asr_experiment_config(modules, interface_text_keys=["phn", "text"])
    a = export_modules(*save_experiment(tmp_path / "asr", asr, seed=5)[:2], tmp_path / "ma")
    assert load_artefact(a[0])["task"] == "asr" and load_artefact(a[0])["input_vocab"] is None
    cfg_mt, file_mt, model_mt = save_experiment(tmp_path / "mt", one_module_config(), seed=6)
    b = export_modules(cfg_mt, file_mt, tmp_path / "mb")
    config, model_file = compose([a[0], a[1], b[1]], tmp_path / "c")
    composed, args = ASRTask.build_model_from_file(config, model_file, "cpu")
    assert args.model == "legonn" and args.input_size == FEATS
    assert_same_weights(composed, build(asr, seed=5), "encoder.")
    assert_same_weights(composed, model_mt, "decoder.")
    memory, lengths = composed.eval().encode(torch.randn(1, 80, FEATS), torch.tensor([80]))
    assert memory.shape == (1, 5, 16) and lengths.tolist() == [5]
    from espnet2.bin.asr_inference import Speech2Text  # decodes with no training

    recognize = Speech2Text(config, model_file, beam_size=2, ctc_weight=0.0, maxlenratio=0.5)
    text, tokens = recognize(torch.randn(80, FEATS))[0][:2]
    assert tokens and set(tokens) <= set(TEXT_VOCAB) and text == " ".join(tokens)


def test_export_refuses_a_model_file_with_weights_of_no_module(tmp_path):
    config, model_file, model = save_experiment(tmp_path / "x", one_module_config())
    state = model.state_dict()
    state["extra_head.weight"] = torch.zeros(2)
    torch.save(state, model_file)
    with pytest.raises(
        InputError, match=r"model.pth: 1 of its .* weights belong to no LegoNN module"
    ):
        export_modules(config, model_file, tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_a_jobs_speech_inputs_read_only_its_keys_matrices(tmp_path):
    import kaldiio
    import numpy as np

    from espnet_ext.bin.lego_ctc_decode import speech_inputs

    feats = {f"u{i}": np.full((i + 2, 3), i, dtype=np.float32) for i in range(3)}
    kaldiio.save_ark(str(tmp_path / "feats.ark"), feats, scp=str(tmp_path / "feats.scp"))
    scp = tmp_path / "feats.scp"
    # another job's utterance in an ark this job cannot read: it must not be opened
    scp.write_text(scp.read_text() + f"u3 {tmp_path / 'elsewhere.ark'}:9\n")
    got = list(speech_inputs(str(scp), {"u2", "u0"}))
    assert [utt for utt, _ in got] == ["u0", "u2"]  # the scp's order
    assert torch.equal(got[1][1], torch.full((4, 3), 2.0))
    assert [utt for utt, _ in speech_inputs(str(tmp_path / "feats.scp"), {"u1"})] == ["u1"]
