"""The swap-matrix tool (§IV-B): LegoNN through the inventory, plain encoder-decoders by weights."""

import pytest
import sacrebleu
import torch
from tiny_lego import TEXT_VOCAB, experiment_config, module_conf, save_experiment

from espnet_ext.analysis import lego_swap

# on one worker with the other modules of its session fixture (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("trained_experiment")


def plain_config(encoder_units: int):
    config = experiment_config([module_conf(TEXT_VOCAB)])
    config.update(
        model="mt",
        encoder="transformer",
        decoder="transformer",
        encoder_conf=dict(
            output_size=16,
            attention_heads=2,
            linear_units=encoder_units,
            num_blocks=1,
            input_layer=None,  # the MT frontend embeds the tokens
        ),
        decoder_conf=dict(attention_heads=2, linear_units=32, num_blocks=1),
        model_conf=dict(report_bleu=False),
    )
    return config


def direct_bleu(config, model_file, text_file, **options):
    """The experiment decoded as it is (our mt_inference class), scored with sacrebleu directly."""
    from espnet_ext.bin.mt_inference import Text2Text

    options = {"beam_size": 2, "ctc_weight": 0.0, **options}
    translate = Text2Text(mt_train_config=config, mt_model_file=model_file, **options)
    lines = [line.split(maxsplit=1)[1] for line in text_file.read_text().splitlines()]
    hyps = [translate(torch.tensor([TEXT_VOCAB.index(w) for w in s.split()]))[0][0] for s in lines]
    return sacrebleu.corpus_bleu(hyps, [lines]).score


def test_legonn_swap_matrix_diagonal_is_each_model_as_trained(trained_experiment, tmp_path):
    exp, data = trained_experiment
    other, other_model, _ = save_experiment(
        tmp_path / "seed7", experiment_config([module_conf(TEXT_VOCAB)]), seed=7
    )
    out = tmp_path / "swap"
    text = data / "valid_text"
    lego_swap.main(
        [
            "--experiment",
            "trained",
            str(exp / "config.yaml"),
            str(exp / "3epoch.pth"),
            "--experiment",
            "seed7",
            str(other),
            str(other_model),
            "--src_text",
            str(text),
            "--ref",
            str(text),
            "--output_dir",
            str(out),
            "--beam_size",
            "2",
        ]
    )
    import json

    result = json.loads((out / "swap_matrix.json").read_text())
    assert result["names"] == ["trained", "seed7"] and result["not_swappable"] == []
    matrix = result["bleu"]
    assert all(v is not None for row in matrix for v in row)
    expected = direct_bleu(exp / "config.yaml", exp / "3epoch.pth", text)
    assert matrix[0][0] == pytest.approx(expected, abs=1e-6)
    assert (out / "swap_matrix.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| trained |" in (out / "swap_matrix.md").read_text()


def test_plain_models_of_different_sizes_do_not_swap_and_families_do_not_mix(
    trained_experiment, tmp_path, capsys
):
    exp, data = trained_experiment
    text = str(data / "valid_text")
    small = save_experiment(tmp_path / "small", plain_config(32))
    large = save_experiment(tmp_path / "large", plain_config(64))
    names, matrix, reasons = lego_swap.swap_matrix(
        [("small", *map(str, small[:2])), ("large", *map(str, large[:2]))],
        lego_swap.read_text(text, False, "source"),
        lego_swap.read_text(text, False, "reference"),
        {"beam_size": 2, "ctc_weight": 0.0},
    )
    assert matrix[0][0] is not None and matrix[1][1] is not None
    assert matrix[0][1] is None and matrix[1][0] is None
    assert (
        "encoder.encoders.0.feed_forward.w_1.bias: (32,) in small, (64,) in large"
        in reasons[("small", "large")]
    )
    assert (
        lego_swap.main(
            [
                "--experiment",
                "a",
                str(small[0]),
                str(small[1]),
                "--experiment",
                "b",
                str(exp / "config.yaml"),
                str(exp / "3epoch.pth"),
                "--src_text",
                text,
                "--ref",
                text,
                "--output_dir",
                str(tmp_path / "x"),
            ]
        )
        == 1
    )
    assert "mixes LegoNN and plain" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_every_cell_is_decoded_with_the_recipes_options(trained_experiment, tmp_path, monkeypatch):
    """The decoding config reaches ESPnet's search for every cell (a plain encoder-decoder's output
    is bounded by maxlenratio x source length: without the recipe's ratio the diagonal is not the model
    as the recipe decodes it)."""
    import espnet_ext.bin.mt_inference as mt_inference

    searches, built = [], []

    class RecordingText2Text(mt_inference.Text2Text):
        def __init__(self, **kwargs):
            searches.append({k: v for k, v in kwargs.items() if k in lego_swap.DECODING_OPTIONS})
            super().__init__(**kwargs)
            built.append(self)

    monkeypatch.setattr(mt_inference, "Text2Text", RecordingText2Text)
    _, data = trained_experiment
    text = str(data / "valid_text")
    first = save_experiment(tmp_path / "a", plain_config(32))
    second = save_experiment(tmp_path / "b", plain_config(32), seed=3)
    decoding = tmp_path / "decode.yaml"
    decoding.write_text(
        "beam_size: 2\nctc_weight: 0.0\nmaxlenratio: 3.0\npenalty: 0.6\nlenpen: 1.0\n"
    )
    options = lego_swap.decoding_options(str(decoding))
    search = {"beam_size": 2, "ctc_weight": 0.0, "maxlenratio": 3.0, "penalty": 0.6}
    assert options == {**search, "lenpen": 1.0}
    _, matrix, _ = lego_swap.swap_matrix(
        [("a", *map(str, first[:2])), ("b", *map(str, second[:2]))],
        lego_swap.read_text(text, False, "source"),
        lego_swap.read_text(text, False, "reference"),
        options,
    )
    assert searches == [search] * 4
    # our rules (espnet_ext.decoding.options) switch each cell's beam search, as mt_inference does
    assert [translate.beam_search.lenpen for translate in built] == [1.0] * 4
    direct = direct_bleu(*first[:2], data / "valid_text", maxlenratio=3.0, penalty=0.6, lenpen=1.0)
    assert matrix[0][0] == pytest.approx(direct, abs=1e-6)
    # without a config: beam 5, no CTC head, ESPnet's other defaults
    assert lego_swap.decoding_options(None) == {"beam_size": 5, "ctc_weight": 0.0}


@pytest.mark.parametrize(
    "text, message",
    [
        ("beam_size: 2\nbatch_size: 4\n", "decode.yaml: key 'batch_size': not a decoding option"),
        ("lm_weight: 0.3\n", "decode.yaml: key 'lm_weight': the swap matrix decodes without an LM"),
        ("- 1\n", "decode.yaml: a decoding config must be a mapping"),
        ("beam_size: [2\n", "decode.yaml: cannot read the decoding config"),
        ("lenpen: soon\n", "decode.yaml: must be a number or none"),
    ],
)
def test_bad_decoding_configs_name_the_file_and_key(tmp_path, text, message):
    decoding = tmp_path / "decode.yaml"
    decoding.write_text(text)
    with pytest.raises(lego_swap.ConfigError) as error:
        lego_swap.decoding_options(str(decoding))
    assert message in str(error.value)


def test_plain_swap_keeps_a_table_tied_to_the_decoder_the_decoders(tmp_path):
    """The LegoNN baselines share all embeddings (§V-B): the source table is the decoder's too, so it
    stays the decoder experiment's; the rest of the encoder side is swapped."""
    from espnet2.tasks.mt import MTTask

    config = plain_config(32)
    config["model_conf"].update(
        share_encoder_decoder_input_embed=True, share_decoder_input_output_embed=True
    )
    enc = save_experiment(tmp_path / "a", config, seed=1)
    dec = save_experiment(tmp_path / "b", config, seed=2)
    config_file, model_file = lego_swap.swapped_encdec(
        ("a", str(enc[0]), str(enc[1])), ("b", str(dec[0]), str(dec[1])), tmp_path
    )
    saved = torch.load(model_file, map_location="cpu")  # one table in the file too, not two values
    assert torch.equal(saved["frontend.embed.0.weight"], saved["decoder.embed.0.weight"])
    swapped, _ = MTTask.build_model_from_file(config_file, model_file, "cpu")
    table = swapped.decoder.embed[0].weight
    assert (
        swapped.frontend.embed[0].weight is table and swapped.decoder.output_layer.weight is table
    )
    assert torch.equal(table, dec[2].decoder.embed[0].weight)
    assert not torch.equal(table, enc[2].decoder.embed[0].weight)
    for key, value in enc[2].encoder.state_dict().items():
        assert torch.equal(swapped.encoder.state_dict()[key], value), key
