"""The thesis' Tabla 1 architectures: configs in sync, each layout builds and trains a step, sizes by hand."""

from pathlib import Path

import pytest
import torch
import yaml

from espnet_ext.analysis import multiformer_configs as configs
from espnet_ext.analysis.param_count import parameter_counts
from espnet_ext.nets.multiformer_encoder import (
    MultiformerEncoder,
    S2TTransformerEncoder,
    parse_blocks,
)
from espnet_ext.registry import build_model

MUSTC = Path(__file__).resolve().parents[2] / "egs" / "mustc"
TINY = dict(
    output_size=32, attention_heads=4, linear_units=32, conv_channels=16, use_flash_attn=False
)


def test_committed_configs_are_what_the_table_renders():
    assert configs.main(["--check", str(MUSTC)]) == 0


def test_check_reports_edited_stray_and_unlinked_configs(tmp_path):
    assert configs.main(["--write", str(tmp_path)]) == 0 and configs.problems(tmp_path) == []
    edited = tmp_path / "st1/conf/tuning/train_st_s2t_multiformer_s_h_lc.yaml"
    edited.write_text(edited.read_text().replace("Local(64)", "Local(32)"))
    (tmp_path / "asr1/conf/tuning/train_asr_old.yaml").write_text("encoder: transformer\n")
    (tmp_path / "st1/conf/train_st.yaml").unlink()
    found = configs.problems(tmp_path)
    assert len(found) == 3 and all(
        any(key in f for f in found) for key in ("_h_lc", "_old", "train_st.yaml")
    )


def test_all_thirteen_architectures_of_tabla_1_have_twelve_four_head_layers():
    assert len(configs.ARCHITECTURES) == 13
    for name, blocks in configs.ARCHITECTURES.items():
        layers = parse_blocks(blocks, 4)
        assert len(layers) == 12, name
    h_lc = parse_blocks(configs.ARCHITECTURES["s2t_multiformer_s"], 4)
    assert [str(h) for h in h_lc[8]] == ["Full", "Full", "Conv(7, 3)", "Conv(7, 3)"]


@pytest.mark.parametrize("name", [configs.BASELINE, *configs.ARCHITECTURES])
def test_each_layout_shrunk_to_tiny_d_takes_a_forward_backward_step(name):
    torch.manual_seed(0)
    if name == configs.BASELINE:
        encoder = S2TTransformerEncoder(20, num_blocks=2, **TINY)
    else:
        layout = [
            b.replace("Local(64", "Local(8") for b in configs.shrink(configs.ARCHITECTURES[name])
        ]
        encoder = MultiformerEncoder(20, layers=layout, **configs.REAL_FORMS, **TINY)
    lengths = torch.tensor([70, 45])
    xs = torch.randn(2, 70, 20)
    out, out_lengths, _ = encoder(xs, lengths)
    assert out.shape == (2, 18, 32) and out_lengths.tolist() == [18, 12]
    out[0, :18].sum().backward()
    assert all(p.grad is not None for p in encoder.parameters() if p.requires_grad)


def fairseq_s2t_transformer_s(vocab: int) -> int:
    """fairseq's s2t_transformer_s worked out by hand (d 256, FFN 2048, 12 + 6 layers, biases everywhere
    but the output projection, which is not tied to the embedding; sinusoidal positions)."""
    d, ffn = 256, 2048
    subsampler = (80 * 1024 * 5 + 1024) + (512 * 512 * 5 + 512)  # Conv1d 80->1024, 512->2·256
    attention = 4 * (d * d + d)
    feed_forward = (d * ffn + ffn) + (ffn * d + d)
    norm = 2 * d
    encoder = subsampler + 12 * (attention + feed_forward + 2 * norm) + norm
    decoder = vocab * d + 6 * (2 * attention + feed_forward + 3 * norm) + norm + d * vocab
    return encoder + decoder


def test_baseline_has_fairseqs_size_plus_espnets_output_bias():
    assert fairseq_s2t_transformer_s(8000) == 31_072_256  # "about 31 M" (fairseq S2T)
    counts = parameter_counts(MUSTC / "st1/conf/tuning/train_st_s2t_transformer_s.yaml", vocab=8000)
    assert (
        counts["total"] == fairseq_s2t_transformer_s(8000) + 8000
    )  # ESPnet's output layer has a bias
    conv_5_2 = MUSTC / "st1/conf/tuning/train_st_s2t_multiformer_s_conv_5_2.yaml"
    assert yaml.safe_load(conv_5_2.read_text())["encoder_conf"]["conv_form"] == "depthwise"
    depthwise = parameter_counts(conv_5_2)
    # The thesis' code: one depthwise K and V Conv1d(64, 64, 5, groups=64) with bias per group of Conv
    # heads, 12 groups (768 parameters each, ~9k in all).
    assert depthwise["encoder"] - counts["encoder"] == 12 * 2 * (64 * 5 + 64) == 9_216


def test_dense_conv_heads_add_a_k_and_a_v_convolution_per_head(tmp_path):
    config = yaml.safe_load(
        (MUSTC / "st1/conf/tuning/train_st_s2t_multiformer_s_conv_5_2.yaml").read_text()
    )
    config["encoder_conf"]["conv_form"] = "dense"
    dense = tmp_path / "dense.yaml"
    dense.write_text(yaml.safe_dump(config))
    baseline = parameter_counts(MUSTC / "st1/conf/tuning/train_st_s2t_transformer_s.yaml")
    # Each Conv head adds a K and a V Conv1d(64, 64, 5) with bias: 48 heads.
    assert parameter_counts(dense, task="st")["encoder"] - baseline["encoder"] == 48 * 2 * (
        64 * 64 * 5 + 64
    )


def test_real_configs_use_the_thesis_codes_conv_heads_and_mini_configs_their_measured_form():
    for path in MUSTC.glob("*1/conf/tuning/train_*_s2t_multiformer_*.yaml"):
        conf = yaml.safe_load(path.read_text())["encoder_conf"]
        forms = ("dense", "band") if path.stem.endswith("_mini") else ("depthwise", "band")
        assert (conf["conv_form"], conf["local_form"]) == forms, path.name


@pytest.mark.parametrize("name", [configs.BASELINE, *configs.MINI])
def test_mini_st_configs_build_through_espnet_and_train_a_step(name, tmp_path):
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("\n".join(["<blank>", "<unk>", *"abcdefgh", "<sos/eos>"]) + "\n")
    config = MUSTC / f"st1/conf/tuning/train_st_{name}_mini.yaml"
    assert yaml.safe_load(config.read_text())["encoder_conf"]["use_flash_attn"] is False
    model = build_model(
        "st",
        ["--config", str(config), "--token_list", str(tokens), "--src_token_list", str(tokens),
         "--input_size", "80"],
    )  # fmt: skip
    torch.manual_seed(0)
    batch = dict(
        speech=torch.randn(2, 120, 80),
        speech_lengths=torch.tensor([120, 90]),
        text=torch.randint(2, 10, (2, 5)),
        text_lengths=torch.tensor([5, 3]),
        src_text=torch.randint(2, 10, (2, 6)),
        src_text_lengths=torch.tensor([6, 4]),
    )
    loss, stats, _ = model(**batch)
    loss.backward()
    assert torch.isfinite(loss)


def test_asr_pretraining_config_builds_through_espnet_and_trains_a_step(tmp_path):
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("\n".join(["<blank>", "<unk>", *"abcdefgh", "<sos/eos>"]) + "\n")
    config = MUSTC / "asr1/conf/tuning/train_asr_s2t_multiformer_s_mini.yaml"
    model = build_model(
        "asr", ["--config", str(config), "--token_list", str(tokens), "--input_size", "80"]
    )
    loss, _, _ = model(
        speech=torch.randn(2, 120, 80),
        speech_lengths=torch.tensor([120, 90]),
        text=torch.randint(2, 10, (2, 5)),
        text_lengths=torch.tensor([5, 3]),
    )
    loss.backward()
    assert torch.isfinite(loss)
    st = yaml.safe_load(
        (MUSTC / "st1/conf/tuning/train_st_s2t_multiformer_s_mini.yaml").read_text()
    )
    asr = yaml.safe_load(config.read_text())
    assert st["encoder_conf"] == asr["encoder_conf"]  # the ST encoder starts from this one
    assert (st["optim_conf"]["lr"], asr["optim_conf"]["lr"]) == (0.002, 0.001)


def test_mini_config_trains_with_espnets_trainer_and_its_checkpoint_feeds_the_w_o_analysis(
    tmp_path,
):
    import subprocess
    import sys

    import kaldiio
    import numpy as np

    from espnet_ext.analysis.head_weights import analyse

    rng = np.random.default_rng(0)
    data = tmp_path / "data"
    data.mkdir()
    keys = [f"utt{i}" for i in range(8)]
    with kaldiio.WriteHelper(f"ark,scp:{data}/feats.ark,{data}/feats.scp") as writer:
        for key in keys:
            writer(key, rng.standard_normal((int(rng.integers(60, 120)), 80)).astype(np.float32))
    frames = {k: v.shape[0] for k, v in kaldiio.load_scp(str(data / "feats.scp")).items()}
    (data / "speech_shape").write_text("".join(f"{k} {frames[k]},80\n" for k in keys))
    for name, words in (("text", "a b c"), ("src_text", "d e")):
        (data / name).write_text("".join(f"{k} {words}\n" for k in keys))
        (data / f"{name}_shape").write_text("".join(f"{k} {len(words.split())}\n" for k in keys))
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("\n".join(["<blank>", "<unk>", *"abcde", "<sos/eos>"]) + "\n")
    args = [sys.executable, "-m", "espnet_ext.bin.st_train", "--config",
            str(MUSTC / "st1/conf/tuning/train_st_s2t_multiformer_s_mini.yaml"),
            "--token_list", str(tokens), "--src_token_list", str(tokens), "--token_type", "word",
            "--src_token_type", "word", "--input_size", "80", "--output_dir", str(tmp_path / "exp"),
            "--max_epoch", "1", "--num_iters_per_epoch", "2", "--batch_size", "4", "--ngpu", "0"]  # fmt: skip
    for split in ("train", "valid"):
        for name, kind in (
            ("feats.scp", "speech,kaldi_ark"),
            ("text", "text,text"),
            ("src_text", "src_text,text"),
        ):
            args += [f"--{split}_data_path_and_name_and_type", f"{data / name},{kind}"]
        for shape in ("speech_shape", "text_shape", "src_text_shape"):
            args += [f"--{split}_shape_file", str(data / shape)]
    args += ["--fold_length", "800", "--fold_length", "150", "--fold_length", "150"]
    run = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    exp = tmp_path / "exp"
    rows, _, blocks = analyse(exp / "valid.acc.ave.pth", exp / "config.yaml", tmp_path / "heads")
    assert len(rows) == 4 * 4 and blocks[0].startswith("1 x (4 x Conv(5, 2))")


# Tabla 2/3 as the thesis prints them: architecture -> "Configuración" (second-iteration rows marked †).
TABLA_ROWS = {
    "s2t_transformer_s": "-",
    "s2t_multiformer_s_full": "-",
    "s2t_multiformer_s_fast": "-",
    "s2t_multiformer_s_local": "-",
    "s2t_multiformer_s_conv_5_2": "-",
    "s2t_multiformer_s_conv_7_3": "-",
    "s2t_multiformer_s_l_lc": "LC",
    "s2t_multiformer_s_l_cl": "LC",
    "s2t_multiformer_s_h_lc": "HC",
    "s2t_multiformer_s": "HC + LC",
    "s2t_multiformer_s_v2": "HC + LC †",
    "s2t_multiformer_s_v3": "HC + LC †",
    "s2t_multiformer_s_v4": "HC + LC †",
    "s2t_multiformer_s_v5": "HC + LC †",
}


def _option(line: list[str], name: str) -> str:
    """The value the recipe sees: utils/parse_options.sh lets the last occurrence win."""
    return line[len(line) - 1 - line[::-1].index(name) + 1]


@pytest.mark.parametrize(
    "asr_spec, st_spec, archs",
    [
        ("tabla3", "tabla2", list(TABLA_ROWS)),
        (
            "tabla5_nods",
            "tabla5_nods",
            ["s2t_transformer_s", "s2t_multiformer_s_h_lc", "s2t_multiformer_s"],
        ),
        ("mini", "mini", ["s2t_transformer_s", *configs.MINI]),
    ],
)
def test_sweeps_train_each_architecture_with_its_config_and_st_starts_from_its_asr_run(
    asr_spec, st_spec, archs
):
    from espnet_ext.analysis.sweep import load_sweep

    asr = load_sweep(MUSTC / "asr1" / "conf" / "sweeps" / f"{asr_spec}.yaml")
    st = load_sweep(MUSTC / "st1" / "conf" / "sweeps" / f"{st_spec}.yaml")
    for sweep, task in ((asr, "asr"), (st, "st")):
        assert sorted(sweep.runs) == sorted(archs)
        rows = sweep.analyses[0]["rows"]
        assert [row["run"] for row in rows] == archs  # the thesis' row order
        for row in rows:
            assert row["label"] == f"{row['run']} ({TABLA_ROWS[row['run']]})".replace(" †)", ") †")
        for run in archs:
            train = sweep.invocations(run)[0]
            config = _option(train, f"--{task}_config")
            assert (MUSTC / f"{task}1" / config).is_file(), config
            assert Path(config).stem.startswith(f"train_{task}_{run}")
            assert ("_nods" in config) == (asr_spec == "tabla5_nods")
            assert ("_mini" in config) == (asr_spec == "mini")
    for run in archs:
        # The ST run's --asr_init is the model the ASR sweep trains for the same architecture.
        asr_tag = _option(asr.invocations(run)[0], "--asr_tag")
        init = _option(st.invocations(run)[0], "--asr_init")
        # the thesis: the best ASR checkpoint; the mini sweeps keep the average they were measured with
        model = "valid.acc.ave.pth" if asr_spec == "mini" else "valid.acc.best.pth"
        assert init == f"../asr1/exp/asr_{asr_tag}/{model}"
    # The shared preparation runs before any ASR model exists: it must not require one.
    assert "--asr_init ''" in st.common
