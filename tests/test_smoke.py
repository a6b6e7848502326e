"""espnet_ext.smoke: the overrides of a smoke run's trainings, and the soft vocabulary limit."""

import pytest
import yaml

from espnet_ext import smoke
from espnet_ext.text.token_list import main as token_list_main

CONFIG = {
    "encoder": "transformer",
    "encoder_conf": {"output_size": 256, "attention_heads": 8, "linear_units": 2048, "num_blocks": 12,
                     "conv_channels": [64, 128], "dropout_rate": 0.1},
    "decoder_conf": {"attention_heads": 4, "linear_units": 1024, "ingestor": {"embed_dim": 300, "attention_heads": 4}},
    "model_conf": {"lsm_weight": 0.1, "use_flag": True},
    "optim_conf": {"lr": 0.001},
    "max_epoch": 100,
}  # fmt: skip


# ESPnet's per-epoch attention plots, curves and TensorBoard logs (defaults: on) and its data-loader
# processes started every epoch (default: 1), off in a smoke run
PLOTS_OFF = [("--num_att_plot", "0"), ("--use_matplotlib", "false"), ("--use_tensorboard", "false"),
             ("--num_workers", "0")]  # fmt: skip


def overrides(tmp_path, config=CONFIG, extra=(), inference_model=""):
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    args = smoke.train_args(["python", "-m", "x", "--config", str(path), *extra], inference_model)
    pairs = list(zip(args[::2], args[1::2]))
    return dict(pairs[:3]), [(k, v) for k, v in pairs[3:] if k != "--batch_size"]


def test_widths_shrink_depths_heads_and_training_settings_stay(tmp_path):
    _, widths = overrides(tmp_path)
    assert sorted(widths) == sorted(
        [
            *PLOTS_OFF,
            ("--encoder_conf", "output_size=32"),
            ("--encoder_conf", "linear_units=256"),
            ("--encoder_conf", "conv_channels=[8,16]"),
            ("--decoder_conf", "linear_units=128"),
            (
                "--decoder_conf",
                "ingestor.embed_dim=40",
            ),  # 37 rounded up to a multiple of its 4 heads
        ]
    )


@pytest.mark.parametrize(
    "extra, inference_model, epochs",
    [
        ((), "", "2"),
        ((), "valid.acc.ave.pth", "2"),
        ((), "last5.pth", "5"),  # the average needs its epochs
        (("--max_epoch", "4"), "last10.pth", "4"),  # never more than the real training has
        (("--max_epoch", "1"), "", "1"),
    ],
)
def test_epochs_and_updates(tmp_path, extra, inference_model, epochs):
    steps, _ = overrides(tmp_path, extra=extra, inference_model=inference_model)
    assert steps == {"--max_epoch": epochs, "--num_iters_per_epoch": "1", "--accum_grad": "1"}


def test_a_width_stays_a_multiple_of_its_heads_and_plots_already_off_stay_off(tmp_path):
    config = {"encoder_conf": {"output_size": 64, "attention_heads": 16}, "num_att_plot": 0,
              "use_matplotlib": False, "num_workers": 0,
              "model_conf": {"embed_dim": 96, "num_heads": [3, 6, 12, 24]}}  # fmt: skip
    _, widths = overrides(tmp_path, config)
    assert sorted(widths) == [
        ("--encoder_conf", "output_size=16"),
        ("--model_conf", "embed_dim=24"),
        ("--use_tensorboard", "false"),  # the one still on
    ]
    _, widths = overrides(tmp_path, {**config, "num_workers": 4})
    assert ("--num_workers", "0") in widths


def test_a_training_command_without_config_is_refused(capsys):
    assert smoke.main(["train_args", "--", "python", "-m", "x"]) == 1
    assert "--config" in capsys.readouterr().err


def test_cli_prints_one_argument_per_line(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text("encoder_conf: {linear_units: 1024}\nmax_epoch: 3\n")
    assert (
        smoke.main(["train_args", "--inference_model", "last3.pth", "--", "--config", str(path)])
        == 0
    )
    assert capsys.readouterr().out.split("\n")[:3] == ["--max_epoch", "3", "--num_iters_per_epoch"]


def test_vocabulary_size_is_a_soft_limit_in_a_smoke_run(tmp_path, monkeypatch):
    text = tmp_path / "text"
    text.write_text("u1 hello world\nu2 hello there\n")
    args = [
        "--token_type",
        "bpe",
        "--vocab_size",
        "5000",
        "--text",
        str(text),
        "--out_dir",
        str(tmp_path / "t"),
    ]
    assert token_list_main(args) == 1  # a real run: the size cannot be reached, refused
    monkeypatch.setenv(smoke.ENV, "true")
    assert token_list_main(args) == 0
    assert 4 < len((tmp_path / "t" / "tokens.txt").read_text().splitlines()) < 50


def test_a_config_written_beside_a_model_of_the_run_keeps_its_widths(tmp_path):
    composed = tmp_path / "mt_composed"
    composed.mkdir()
    (composed / "model.pth").write_bytes(b"")
    steps, widths = overrides(composed)
    assert steps["--max_epoch"] == "2" and widths == PLOTS_OFF


@pytest.mark.parametrize(
    "config, extra, batch",
    [
        ({"batch_type": "unsorted", "batch_size": 128}, (), ["--batch_size", "8"]),
        (
            {"batch_type": "sorted", "batch_size": 4},
            ("--batch_size", "1024"),
            ["--batch_size", "8"],
        ),
        ({"batch_type": "sorted", "batch_size": 4}, (), []),
        ({}, (), ["--batch_size", "8"]),  # ESPnet's default: folded, 20
        ({"batch_type": "numel", "batch_bins": 100000}, (), []),
    ],
)
def test_sample_batches_are_capped(tmp_path, config, extra, batch):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    args = smoke.train_args(["--config", str(path), *extra])
    assert args[6:8] == batch or (not batch and "--batch_size" not in args)


def test_a_list_of_module_mappings_is_given_whole(tmp_path):
    modules = [
        {
            "token_list": "t.txt",
            "output_size": 512,
            "attention_heads": 16,
            "olc": {"max_length": 512},
        }
    ]
    _, widths = overrides(tmp_path, {"encoder_conf": {"modules": modules}})
    ((option, value),) = widths[len(PLOTS_OFF) :]
    assert option == "--encoder_conf" and value.startswith("modules=")
    assert yaml.safe_load(value[len("modules=") :]) == [{**modules[0], "output_size": 64}]


def test_the_widths_of_a_named_size_preset_are_narrowed(tmp_path):
    _, widths = overrides(tmp_path, {"encoder_conf": {"size": "large", "dropout_rate": 0.1}})
    assert sorted(widths[len(PLOTS_OFF) :]) == [
        ("--encoder_conf", "linear_units=512"),
        ("--encoder_conf", "output_size=128"),
    ]


@pytest.mark.parametrize(
    "vocabulary, beam, expected", [(30, 50, ["--beam_size", "30"]), (60, 50, [])]
)
def test_the_beam_is_no_wider_than_the_vocabulary(tmp_path, vocabulary, beam, expected):
    (tmp_path / "decode.yaml").write_text(f"beam_size: {beam}\n")
    tokens = ["<blank>", *(f"t{n}" for n in range(vocabulary - 2)), "<sos/eos>"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"token_list": tokens}))
    command = [
        "--config",
        str(tmp_path / "decode.yaml"),
        "--asr_train_config",
        str(tmp_path / "config.yaml"),
    ]
    assert smoke.decode_args(command) == expected
    assert smoke.decode_args(["--output_dir", "x"]) == []  # no decoding config: nothing


@pytest.mark.parametrize(
    "decoding, expected",
    [
        ("maxlenratio: -200.0\n", ["--maxlenratio", "-10.0"]),
        (
            "maxlenratio: 0.3\nminlenratio: 0.1\n",
            ["--maxlenratio", "-10.0", "--minlenratio", "0.0"],
        ),
        ("", []),  # a decoder without ESPnet's length options (e.g. a classifier's)
    ],
)
def test_hypotheses_are_capped_where_the_config_sets_a_length(tmp_path, decoding, expected):
    (tmp_path / "decode.yaml").write_text(f"beam_size: 4\n{decoding}")
    assert smoke.decode_args(["--config", str(tmp_path / "decode.yaml")]) == expected
