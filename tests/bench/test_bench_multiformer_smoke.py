"""The Multiformer benchmark runs end to end (its ratios are measured by running it in full, not here)."""

import sys
from pathlib import Path

import torch

from espnet_ext.attention import head_kinds

sys.path.insert(0, str(Path(__file__).parent))
from bench_multiformer import (  # noqa: E402
    LocalPath,
    PeakMemory,
    build,
    step_peak_bytes,
    without_attention,
)


def test_multiformer_benchmark_smoke_run(run_benchmark, tmp_path):
    stdout = run_benchmark("bench_multiformer.py", "--out_dir", str(tmp_path), "--batch_size", "2")
    assert "4 heads, batch 2, training mode" in stdout
    rows = [line for line in stdout.splitlines() if line.startswith("| ") and line[2].isdigit()]
    kinds = [
        r for r in rows if len(r.strip().strip("|").split("|")) == 9
    ]  # T + (ms, MiB) x 4 kinds
    dense = [r for r in rows if len(r.strip().strip("|").split("|")) == 4]  # T, blocked, dense, MiB
    assert [r.split("|")[1].strip() for r in kinds] == ["64", "128", "256"]
    assert [r.split("|")[1].strip() for r in dense] == ["64", "128", "256"]  # all <= the threshold
    # T, blocked and chunked ms, blocked and chunked MiB
    chunked = [r for r in rows if len(r.strip().strip("|").split("|")) == 5]
    assert [r.split("|")[1].strip() for r in chunked] == ["64", "128", "256"]
    assert (
        len(rows) == 9 and "Local(64) dense / blocked up to T=256" in stdout
    )  # the CPU's long path
    assert "Local(64) chunked vs Full at T=256" in stdout
    sizes = next(line for line in stdout.splitlines() if line.startswith("Local(64) chunked at T="))
    assert all(f"chunks of {c} " in sizes for c in (64, 128, 256))
    assert "with the attention's projections (q, k, v, context; no weights)" in stdout
    assert (tmp_path / "multiformer_bench.png").stat().st_size > 0


def test_peak_memory_counts_each_live_storage_once():
    with PeakMemory() as memory:
        a = torch.ones(1000)  # 4,000 bytes
        b = a.view(10, 100)  # a view: no new storage
        c = a * 2  # 4,000 more
        del c
        d = b + 1  # takes c's place: the peak stays 8,000
    assert memory.peak == 8000 and d.numel() == 1000


def test_projections_floor_lies_between_the_floor_and_every_attention_kind():
    """The projections-only encoder keeps q, k, v and the context per layer (4 x B x T x d floats) on top
    of the floor, and Local and Full keep at least that plus their weights."""
    batch, length, size, layers = 2, 256, 32, 2
    xs, lengths = torch.randn(batch, length, size), torch.full((batch,), length)
    models = {
        "floor": without_attention(build("4 x Full", size, 64, layers, 8, "cpu")),
        "projections": without_attention(build("4 x Full", size, 64, layers, 8, "cpu"), True),
        "Local": LocalPath(build("4 x Local(64)", size, 64, layers, 8, "cpu"), 0),
        "Full": build("4 x Full", size, 64, layers, 8, "cpu"),
    }
    peak = {name: step_peak_bytes(model.train(), xs, lengths) for name, model in models.items()}
    saved = 4 * batch * length * size * 4 * layers
    assert peak["projections"] - peak["floor"] >= saved
    assert peak["floor"] < peak["projections"] < peak["Local"] < peak["Full"]


def test_multiformer_configs_benchmark_smoke_run(run_benchmark):
    stdout = run_benchmark(
        "bench_multiformer_configs.py", "--compile", "eager"
    )  # dynamo, no inductor
    rows = dict(
        (cells[0], float(cells[2].rstrip("x")))
        for line in stdout.splitlines()
        if line.startswith("| encoder") or line.startswith("| attention")
        for cells in [[c.strip() for c in line.strip("|").split("|")]]
    )
    # the three kinds of layer of train_st.yaml, each against ESPnet's attention
    assert list(rows) == [
        "encoder, s2t_transformer_s",
        "encoder, Multiformer",
        "encoder, Multiformer, groups one by one",
        "encoder, s2t_transformer_s, compiled",
        "encoder, Multiformer, compiled",
        "attention, ESPnet (4 x Full)",
        "attention, 4 x Conv(5, 2)",
        "attention, 2 x Local(64), 2 x Conv(5, 2)",
        "attention, 2 x Full, 2 x Conv(7, 3)",
    ]
    assert rows["encoder, s2t_transformer_s"] == rows["attention, ESPnet (4 x Full)"] == 1.0
    assert "goal (CUDA only): the Multiformer's encoder <= 1.00x" in stdout
    assert "compiled (eager): the Multiformer's encoder" in stdout


def test_groups_one_by_one_keeps_a_layers_groups_off_the_fused_call(monkeypatch):
    from bench_multiformer_configs import GroupsOneByOne

    from espnet_ext.attention import multi_attention

    monkeypatch.setattr(
        head_kinds, "LOCAL_DENSE_DEVICES", {"cpu", "cuda"}
    )  # the fused call's devices
    model = build("2 x Local(64), 2 x Conv(5, 2)", 16, 32, 1, 8, "cpu").train()
    fused = []
    original = multi_attention.MultiHeadMultiAttention._attention_in_one_call
    monkeypatch.setattr(
        multi_attention.MultiHeadMultiAttention,
        "_attention_in_one_call",
        lambda self, *a: fused.append(1) or original(self, *a),
    )
    xs, lengths = torch.randn(2, 32, 16), torch.tensor([32, 20])
    model(xs, lengths)
    assert fused == [1]
    GroupsOneByOne(model)(xs, lengths)
    assert fused == [1] and multi_attention.ONE_CALL_MAX_FRAMES == 1024  # restored
