"""W_o head analysis (§4.3) on a tiny Multiformer built here: regions, shares, proposal, figures."""

import pytest
import torch
import yaml

from espnet_ext.analysis.head_weights import analyse, main, notation
from espnet_ext.attention.multi_attention import HeadKind
from espnet_ext.errors import InputError
from espnet_ext.nets.multiformer_encoder import MultiformerEncoder

ENCODER_CONF = dict(
    output_size=16,
    attention_heads=4,
    linear_units=16,
    conv_channels=8,
    use_flash_attn=False,
    layers=["1 x (2 x Local(8), 2 x Conv(5, 2))", "1 x (2 x Full, 2 x Conv(7, 3))"],
)


@pytest.fixture
def trained(tmp_path):
    torch.manual_seed(0)
    encoder = MultiformerEncoder(20, **ENCODER_CONF)
    with torch.no_grad():
        w_o = encoder.encoders[0].self_attn.linear_out.weight  # (d_model, h·d_k), d_k = 4
        w_o[:, 4:8] *= 0.01  # head 1 (Local) barely read by W_o
        w_o[:, 8:12] *= 1.5  # head 2 (Conv) read most strongly
    state = {f"encoder.{k}": v for k, v in encoder.state_dict().items()}
    state["decoder.embed.0.weight"] = torch.zeros(3, 16)  # the rest of a model is ignored
    torch.save(state, tmp_path / "valid.acc.ave.pth")
    config = {"encoder": "multiformer", "encoder_conf": ENCODER_CONF, "decoder": "transformer"}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    return tmp_path, encoder


def test_shares_are_each_heads_w_o_energy_and_the_weak_head_is_proposed(trained):
    tmp_path, encoder = trained
    rows, replaced, blocks = analyse(
        tmp_path / "valid.acc.ave.pth", tmp_path / "config.yaml", tmp_path / "out"
    )
    w_o = encoder.encoders[0].self_attn.linear_out.weight.detach()
    energy = torch.stack([w_o[:, 4 * i : 4 * i + 4].pow(2).sum() for i in range(4)])
    layer0 = [r for r in rows if r["layer"] == 0]
    assert [r["kind"] for r in layer0] == ["Local(8)", "Local(8)", "Conv(5, 2)", "Conv(5, 2)"]
    for row, expected in zip(layer0, energy / energy.sum()):
        assert row["share"] == pytest.approx(expected.item(), rel=1e-5)
    assert layer0[1]["mean_abs"] == pytest.approx(w_o[:, 4:8].abs().mean().item(), rel=1e-5)
    assert [(r["layer"], r["head"], r["by"]) for r in replaced] == [(0, 1, "Conv(5, 2)")]
    assert blocks == ["1 x (3 x Conv(5, 2), 1 x Local(8))", "1 x (2 x Conv(7, 3), 2 x Full)"]
    out = tmp_path / "out"
    for name in (
        "layer_00.png",
        "layer_01.png",
        "overview.png",
        "heads.tsv",
        "heads.md",
        "proposal.md",
    ):
        assert (out / name).stat().st_size > 0
    assert "layer 0 head 1 (Local(8)" in (out / "proposal.md").read_text()
    assert len((out / "heads.tsv").read_text().splitlines()) == 1 + 8


def test_command_line_and_espnet_checkpoint_layout(trained, capsys):
    tmp_path, _ = trained
    state = torch.load(tmp_path / "valid.acc.ave.pth")
    torch.save({"model": state, "optimizers": []}, tmp_path / "checkpoint.pth")
    main(["--checkpoint", str(tmp_path / "checkpoint.pth"), "--config", str(tmp_path / "config.yaml"),
          "--out_dir", str(tmp_path / "cli")])  # fmt: skip
    assert "1 head(s) proposed" in capsys.readouterr().out


def test_checkpoint_not_matching_the_config_is_refused(trained):
    tmp_path, _ = trained
    config = yaml.safe_load((tmp_path / "config.yaml").read_text())
    config["encoder_conf"]["layers"] = ["3 x (4 x Full)"]
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(InputError, match=r"valid.acc.ave.pth: key 'encoder.encoders.2.self_attn"):
        analyse(tmp_path / "valid.acc.ave.pth", tmp_path / "other.yaml", tmp_path / "x")
    assert not (tmp_path / "x").exists()  # nothing half-written


def test_notation_merges_equal_consecutive_layers():
    local, conv = HeadKind("local", (64,)), HeadKind("conv", (5, 2))
    layers = [[local, local, conv, conv]] * 3 + [[conv] * 4]
    assert notation(layers) == ["3 x (2 x Conv(5, 2), 2 x Local(64))", "1 x (4 x Conv(5, 2))"]
