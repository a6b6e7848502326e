"""The OLC probe: one LegoNN encoder module trained alone on CTC from a dump dir, OLC settings overridden."""

import json

import kaldiio
import numpy as np
import pytest
import yaml

from espnet_ext.analysis import olc_probe
from espnet_ext.errors import ConfigError

TOKENS = ["<blank>", "<unk>", "a", "b", "c"]


def write_set(directory, count, seed):
    directory.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    feats = {
        f"utt{i}": rng.standard_normal((40 + 4 * i, 8)).astype(np.float32) for i in range(count)
    }
    kaldiio.save_ark(str(directory / "feats.ark"), feats, scp=str(directory / "feats.scp"))
    lines = [f"utt{i} {' '.join(str(2 + (i + j) % 3) for j in range(3))}" for i in range(count)]
    (directory / "phn_int").write_text("\n".join(lines) + "\n")
    return directory


@pytest.fixture
def recipe(tmp_path):
    config = {
        "encoder_conf": {
            "modules": [
                dict(
                    token_list=TOKENS,
                    input_layer="cnn",
                    conv_channels=[2, 2],
                    conv_strides=[2, 2],
                    output_size=8,
                    attention_heads=2,
                    linear_units=8,
                    num_blocks=1,
                    dropout_rate=0.0,
                    olc=dict(ratio=0.8, max_length=64, query_scale=0.1, alignment_prior=0.5),
                )
            ]
        },
        "optim_conf": {"lr": 0.01},
        "scheduler_conf": {"warmup_steps": 2},
        "batch_size": 3,
    }
    (tmp_path / "conf.yaml").write_text(yaml.safe_dump(config))
    return tmp_path, write_set(tmp_path / "train", 6, 0), write_set(tmp_path / "valid", 3, 1)


def run(recipe, *extra):
    root, train, valid = recipe
    out = root / "probe.json"
    argv = [
        "--config",
        str(root / "conf.yaml"),
        "--train_dir",
        str(train),
        "--valid_dir",
        str(valid),
    ]
    status = olc_probe.main(
        [*argv, "--updates", "4", "--eval_every", "2", "--output", str(out), *extra]
    )
    return status, out


def test_probe_trains_the_module_and_records_its_ctc_and_error_rate(recipe):
    status, out = run(recipe, "--olc", "query_scale=1", "alignment_prior=0")
    assert status == 0
    result = json.loads(out.read_text())
    assert result["module"]["olc"] == dict(
        ratio=0.8, max_length=64, query_scale=1, alignment_prior=0
    )
    assert [r["update"] for r in result["records"]] == [2, 4]
    for record in result["records"]:
        assert np.isfinite(record["valid_ctc"]) and record["error_rate"] >= 0
    status, out = run(recipe, "--no_olc")
    assert status == 0 and "olc" not in json.loads(out.read_text())["module"]


def test_probe_schedule_is_espnets_warmuplr():
    import torch
    from espnet2.schedulers.warmup_lr import WarmupLR

    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=0.002)
    espnet = WarmupLR(optimizer, warmup_steps=150)
    rates = []
    for _ in range(300):
        optimizer.step()
        espnet.step()
        rates.append(optimizer.param_groups[0]["lr"])
    ours = [0.002 * 150**0.5 * min((s + 1) ** -0.5, (s + 1) * 150**-1.5) for s in range(1, 301)]
    assert np.allclose(rates, ours)


def test_bad_overrides_and_missing_targets_are_refused(recipe, capsys):
    with pytest.raises(ConfigError, match="--olc"):
        olc_probe.parse_overrides(["query_scale"])
    root, train, _ = recipe
    (train / "phn_int").write_text("utt0 2 3\n")
    status, _ = run(recipe)
    assert status == 1
    assert "has no target" in capsys.readouterr().err


def test_error_rate_counts_token_errors_and_empty_hypotheses():
    # one substitution in 3 tokens; an empty hypothesis: 2 deletions -> 3 errors in 5 tokens
    assert olc_probe.error_rate([[2, 4, 3], []], [[2, 3, 3], [4, 4]]) == 60.0
