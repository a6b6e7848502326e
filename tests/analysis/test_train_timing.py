"""espnet_ext.analysis.train_timing: a real config's update time through ESPnet's trainer (the preflight)."""

import re
from pathlib import Path

import pytest
import torch

from espnet_ext.analysis import preflight, train_timing
from espnet_ext.analysis.preflight import CorpusSize
from espnet_ext.errors import ConfigError

EGS = Path(__file__).resolve().parents[2] / "egs"
MINI_ST = EGS / "mustc/st1/conf/tuning/train_st_s2t_transformer_s_mini.yaml"
MINI_VSR = EGS / "lrs3/vsr1/conf/train_vsr_mini.yaml"


# The clock's reads: asked for the first batch; per batch: it arrived, its mark (after the device), the
# next one asked for; the loader's end arrived; the final mark. Marks at 0, 1, 3, 4, 4.5 and 7; the
# loader kept the trainer waiting 0.25 s for batch 0, 0.25, 0.5, 0, 0.25 for the next ones, 1.0 for its end.
READS = [
    -0.5,
    -0.25,
    0.0,
    0.75,
    1.0,
    1.0,
    2.5,
    3.0,
    3.0,
    4.0,
    4.0,
    4.0,
    4.25,
    4.5,
    4.5,
    6.0,
    7.0,
    7.0,
]


def test_iterations_are_grouped_into_updates_and_inputs_counted():
    clock = iter(READS)
    timer = train_timing.StepTimer("asr")
    timer.clock = lambda: next(clock)
    batches = [("ids", {"speech_lengths": torch.tensor([n, n])}) for n in (10, 20, 30, 40, 50)]
    assert [b for _, b in timer.wrap(batches, accum_grad=2, device="cpu")] == [
        b for _, b in batches
    ]
    timer.stop()
    # iterations take 1, 2, 1, 0.5, 2.5 s; two updates of 2 (the fifth iteration completes none)
    assert timer.updates() == [(3.0, 60), (1.5, 140)]
    assert timer.marks == [0.0, 1.0, 3.0, 4.0, 4.5, 7.0]
    # the waits inside each update's iterations: for batches 1 and 2, then 3 and 4
    assert timer.loader_waits() == [0.75, 0.25]
    # a profiler runs from the first batch after the warm-up update to the end, not over the build
    events, clock = [], iter(READS)

    class Profiler:
        def start(self):
            events.append(("start", len(timer.marks)))

        def stop(self):
            events.append(("stop", len(timer.marks)))

    timer = train_timing.StepTimer("asr", Profiler())
    timer.clock = lambda: next(clock)
    for _ in timer.wrap(batches, accum_grad=2, device="cpu"):
        events.append("batch")
    timer.stop()
    assert events == ["batch", "batch", ("start", 3), "batch", "batch", "batch", ("stop", 6)]
    assert timer.profiled_seconds == 7.0 - 3.0
    images = train_timing.StepTimer("cls")
    list(images.wrap([("ids", {"image": torch.zeros(7, 3, 8, 8)})], 1, "cpu"))
    assert images.inputs == [7] and images.unit == "images"


def test_a_small_config_is_timed_on_cpu_through_the_trainer():
    size = CorpusSize(utterances=6, frames=120, tokens=8)
    timing = train_timing.measure("st", MINI_ST, size, updates=2, ngpu=0)
    # batch_type folded, batch_size 16, accum_grad 1: each update is one batch of the 6 utterances
    assert timing.updates == 1  # the first of the two is the warm-up
    assert timing.inputs_per_update == 6 * 120 and timing.unit == "frames"
    assert timing.update_seconds > 0 and timing.peak_bytes is None  # peak memory: CUDA only
    assert 0 <= timing.loader_wait_seconds < timing.update_seconds
    assert (
        timing.schedule_updates is None and timing.schedule_hours is None
    )  # epochs over the corpus
    cells = [c.strip() for c in timing.row().strip("|").split("|")]
    assert cells[:4] == [str(MINI_ST), "st", "no", "720 frames"]
    assert cells[6:] == ["-", "-", "-"]
    assert len(cells) == len(train_timing.HEADER.splitlines()[0].strip("|").split("|"))


def test_the_cli_overrides_reach_espnet_and_amp_is_reported(capsys):
    assert (
        train_timing.main(
            ["--task", "st", "--config", str(MINI_ST), "--ngpu", "0", "--updates", "2"]
            + ["--utterances", "4", "--frames", "100", "--tokens", "6", "--header"]
            + ["--batch_size", "2", "--use_amp", "true"]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(
        r"waiting for the data loader: \d+ ms of the \d+ ms update \(median\)", lines[0]
    )
    assert lines[1:3] == train_timing.HEADER.splitlines()
    cells = [c.strip() for c in lines[3].strip("|").split("|")]
    assert cells[2:4] == ["yes", "200 frames"]  # ESPnet's --batch_size 2 made the batches


@pytest.mark.parametrize(
    ("config", "updates"),
    [
        ("mustc/st1/conf/train_st.yaml", 50_000),  # thesis §5.2: 50,000 updates
        (
            "lrs3/vsr1/conf/train_vsr_large.yaml",
            30_000,
        ),  # av_hubert conf/finetune: max_update 30000
        ("wmt/mt1/conf/train_lego_wemb_ende.yaml", 150_000),  # LegoNN §V-B: 150k steps
        (
            "cifar100/cls1/conf/train_swin_t.yaml",
            None,
        ),  # epochs over the corpus: depends on its size
    ],
)
def test_schedule_updates_of_the_real_configs(config, updates):
    import yaml

    settings = yaml.safe_load((EGS / config).read_text())
    assert train_timing.schedule_updates(settings) == updates


def test_a_frozen_encoder_phase_is_timed_apart_and_weighted_in_the_hours(tmp_path):
    """AV-HuBERT's fine-tuning: the first freeze_finetune_updates run the encoder frozen."""
    import yaml

    config = yaml.safe_load(MINI_VSR.read_text())
    config.setdefault("model_conf", {})["freeze_finetune_updates"] = 3
    config.update(max_epoch=2, num_iters_per_epoch=4, accum_grad=1)  # a schedule of 8 updates
    path = tmp_path / "train_vsr_frozen.yaml"
    path.write_text(yaml.safe_dump(config))
    timing = train_timing.measure("vsr", path, CorpusSize(2, 12, 4), updates=6, ngpu=0, vocab=50)
    # 6 updates: the warm-up and 2 measured frozen; then the trained phase's warm-up and 2 measured
    assert train_timing.frozen_phase(6) == 3 and timing.updates == 4
    assert timing.frozen_update_seconds > 0 and timing.update_seconds > 0
    assert timing.frozen_schedule_updates == 3 and timing.schedule_updates == 8
    expected = (3 * timing.frozen_update_seconds + 5 * timing.update_seconds) / 3600
    assert timing.schedule_hours == pytest.approx(expected)
    update_cell = [c.strip() for c in timing.row().strip("|").split("|")][4]
    assert re.fullmatch(r"\d+ \(frozen \d+\)", update_cell)


@pytest.mark.parametrize("options,workers", [([], 2), (["--num_workers", "0"], 0)])
def test_batches_load_with_the_configs_own_workers(tmp_path, options, workers):
    """As a real run of the config loads them (preflight alone loads in the trainer's process)."""
    import yaml

    config = yaml.safe_load(MINI_ST.read_text())
    config["num_workers"] = 2
    path = tmp_path / "train_st_workers.yaml"
    path.write_text(yaml.safe_dump(config))
    seen = []

    class Timer(train_timing.StepTimer):
        def wrap(self, iterator, accum_grad, device):
            seen.append(iterator.num_workers)  # ESPnet's iterator is a torch DataLoader
            yield from super().wrap(iterator, accum_grad, device)

    size = CorpusSize(utterances=4, frames=60, tokens=5)
    train_timing.measure("st", path, size, updates=2, ngpu=0, extra_args=options, timer=Timer("st"))
    assert seen == [workers]


def test_the_frozen_phase_needs_enough_updates_and_splits_them():
    assert [train_timing.frozen_phase(n) for n in (4, 5, 6, 20)] == [2, 2, 3, 10]
    with pytest.raises(ConfigError, match="freeze_finetune_updates.*>= 4 updates"):
        train_timing.frozen_phase(3)


def test_fewer_than_two_updates_are_refused():
    with pytest.raises(ConfigError, match="--updates.*warms up|warms up"):
        train_timing.measure("st", MINI_ST, CorpusSize(2, 50, 4), updates=1, ngpu=0)


def test_profile_prints_the_costliest_operators_beside_the_row(capsys):
    argv = ["--task", "st", "--config", str(MINI_ST), "--ngpu", "0", "--updates", "2"]
    argv += ["--utterances", "4", "--frames", "100", "--tokens", "6", "--profile", "5"]
    assert train_timing.main(argv) == 0
    out = capsys.readouterr().out
    table, row = out.rsplit("\n|", 1)
    assert "Self CPU" in table and "aten::" in table  # the profiler's operator table
    operators = [line for line in table.splitlines() if line.strip().startswith("aten::")]
    assert 0 < len(operators) <= 5
    assert row.split("|")[1].strip() == "st"  # the timing row follows it
    # the host's time by module class (instances summed) and by backward function, 5 rows each
    modules, backward = (
        re.findall(r"^\| ([\w:]+) \| \d+ \| ([\d.]+) \| \d+ \|$", part, re.M)
        for part in table.split("| backward function (host)")
    )
    assert len(modules) == 5 and "ESPnetSTModel" in dict(modules)  # its forward holds all others
    assert [ms for _, ms in modules] == sorted((ms for _, ms in modules), key=float, reverse=True)
    # autograd's functions; the accumulation into the weights' .grad among them when it costs enough
    autograd = [
        n.endswith("Backward0") or n == "torch::autograd::AccumulateGrad" for n, _ in backward
    ]
    assert len(backward) == 5 and all(autograd), backward


def test_a_corpus_of_mixed_batches_is_refused_before_training():
    """64 utterances at 31 a batch would time updates of a full batch and the remainder mixed."""
    size = CorpusSize(utterances=20, frames=120, tokens=8)
    batch = ["--batch_size", "8"]
    assert max(preflight.corpus_batches("st", MINI_ST, size, extra_args=batch)) == 8
    refusal = r"--utterances.*20 synthetic utterances.*multiple of 8 \(e\.g\. 16\)"
    with pytest.raises(ConfigError, match=refusal):
        train_timing.measure("st", MINI_ST, size, updates=2, ngpu=0, extra_args=batch)
    size = CorpusSize(utterances=16, frames=120, tokens=8)
    assert preflight.corpus_batches("st", MINI_ST, size, extra_args=batch) == [8, 8]
