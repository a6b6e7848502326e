"""Training speed of a real config: ESPnet's trainer on synthetic batches of the paper's size (a preflight run).

    python -m espnet_ext.analysis.train_timing --task st --config conf/train_st.yaml --ngpu 1 \
        --utterances 64 --frames 700 --tokens 30 [--updates 20] [--vocab 8000] [--header] [ESPnet options]

The corpus holds ``--utterances`` alike utterances of ``--frames`` speech / video frames and ``--tokens``
tokens (images: the preflight's); the config's own batch sampler (batch_type, batch_bins or batch_size,
accum_grad) makes the batches, so an update holds what the config's updates hold on utterances that long,
and its ``num_workers`` loader processes load them (ESPnet's default 1 where it sets none; an ESPnet
option ``--num_workers N`` overrides).
Everything else is espnet_ext.analysis.preflight: the model, optimizer, scheduler, AMP setting and
``Trainer.train_one_epoch``. The first update warms up (kernel selection, allocator) and is not counted.
A config whose encoder stays frozen for its first updates (``model_conf.freeze_finetune_updates``,
AV-HuBERT's fine-tuning) has two update costs: about half of the updates run frozen, then the first one
that trains everything warms that phase up and the rest measure it; the row gives the trained phase's
update time with the frozen one beside it, and the hours weigh each by its share of the schedule.

``--profile N``: the measured updates (not the model's build, its copy to the device or the warm-up
update) under PyTorch's profiler, then their N most expensive operators (by device time on CUDA, CPU time
otherwise) and how busy the device was: its kernels' time against the wall time. It tells a launch- or
input-bound update (a device idle most of the time) from a compute-bound one; then where the host's time
went: the module classes whose forwards and the backward's autograd functions that took the most CPU time
(a launch-bound update is as slow as its host). The profiler's own overhead lengthens the update times
printed beside it.

Printed as one markdown row (``--header`` first prints the table's head):

    | config | task | AMP | inputs / update | update ms | inputs / s | peak GiB | schedule updates | hours |

update ms: the median update (every batch of it, data loading included; on CUDA the clock waits for the
device; a line before the row says how much of it the trainer waited for the data loader); inputs: speech /
video frames, images, or tokens (mt: source tokens, lm: text tokens); peak GiB:
``torch.cuda.max_memory_allocated`` over the run (CUDA only); hours: update time x the config's schedule
(max_epoch x num_iters_per_epoch / accum_grad), when the config fixes its epoch length.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import re
import statistics
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import torch
import yaml

from espnet_ext.analysis.preflight import TASKS, CorpusSize, preflight
from espnet_ext.argv import ESPNET_NUM_WORKERS, option_value
from espnet_ext.errors import ConfigError, reports_input_errors

# task -> (the batch's key whose size is counted, unit); "len" counts rows (images)
INPUTS = {
    "asr": ("speech_lengths", "frames"),
    "st": ("speech_lengths", "frames"),
    "vsr": ("video_lengths", "frames"),
    "mt": ("src_text_lengths", "tokens"),
    "lm": ("text_lengths", "tokens"),
    "ocr": ("image", "images"),
    "cls": ("image", "images"),
}
HEADER = (
    "| config | task | AMP | inputs / update | update ms | inputs / s | peak GiB | schedule updates | hours |\n"
    "|---|---|---|---:|---:|---:|---:|---:|---:|"
)


class StepTimer:
    """Wraps the trainer's iterator: a timestamp at every batch handed out and at the end, and the batch's
    input count (preflight's ``timer``). A ``profiler`` (``torch.profiler.profile``) runs from the first
    batch after the warm-up update to the end; ``profiled_seconds`` is then that span's wall time.
    ``waits``: how long the trainer waited for each batch from the data loader (asked for it to got it,
    before the clock waits for the device), the last one for the loader to say it has no more."""

    def __init__(self, task: str, profiler=None):
        self.key, self.unit = INPUTS[task]
        self.profiler, self.profiled_seconds = profiler, None
        self.marks: list[float] = []
        self.waits: list[float] = []
        self.inputs: list[int] = []
        self.accum_grad = 1
        self.device = torch.device("cpu")
        self.clock = time.perf_counter

    def wrap(self, iterator: Iterable, accum_grad: int, device: str) -> Iterator:
        self.accum_grad, self.device = accum_grad, torch.device(device)
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        asked = self.clock()
        for index, (ids, batch) in enumerate(iterator):
            self.waits.append(self.clock() - asked)
            self._mark()
            if self.profiler is not None and index == accum_grad:  # the warm-up update is done
                self.profiler.start()
                self.profiled_seconds = -self.marks[-1]
            value = batch[self.key]
            self.inputs.append(len(value) if self.key == "image" else int(value.sum()))
            yield ids, batch
            asked = self.clock()
        self.waits.append(self.clock() - asked)

    def stop(self) -> None:
        self._mark()
        if self.profiled_seconds is not None and self.profiled_seconds < 0:
            self.profiler.stop()
            self.profiled_seconds += self.marks[-1]

    def _mark(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # the step's kernels are done, not just queued
        self.marks.append(self.clock())

    def updates(self) -> list[tuple[float, int]]:
        """(seconds, inputs) of each update: ``accum_grad`` iterations each."""
        seconds = [b - a for a, b in zip(self.marks, self.marks[1:])]
        n = self.accum_grad
        return [
            (sum(seconds[i : i + n]), sum(self.inputs[i : i + n]))
            for i in range(0, len(seconds) - n + 1, n)
        ]

    def loader_waits(self) -> list[float]:
        """Seconds of each update (as ``updates``) spent waiting for the data loader: the waits inside
        its iterations, each iteration ending when the next batch (or the end) arrived."""
        waits = self.waits[1 : len(self.marks)]  # iteration i waited for batch i + 1
        n = self.accum_grad
        return [sum(waits[i : i + n]) for i in range(0, len(waits) - n + 1, n)]


@dataclasses.dataclass
class Timing:
    config: str
    task: str
    amp: bool
    unit: str
    updates: int  # counted (the first one is the warm-up)
    update_seconds: float  # median
    inputs_per_update: float
    peak_bytes: int | None  # CUDA only
    schedule_updates: int | None
    loader_wait_seconds: float = 0.0  # median, of the measured updates
    # a config that freezes its encoder for its first ``frozen_schedule_updates`` (freeze_finetune_updates):
    # the median update then; ``update_seconds`` is the median update with everything training
    frozen_update_seconds: float | None = None
    frozen_schedule_updates: int = 0

    @property
    def inputs_per_second(self) -> float:
        return self.inputs_per_update / self.update_seconds

    @property
    def schedule_hours(self) -> float | None:
        if self.schedule_updates is None:
            return None
        frozen = min(self.frozen_schedule_updates, self.schedule_updates)
        seconds = self.update_seconds * (self.schedule_updates - frozen)
        if frozen:
            seconds += self.frozen_update_seconds * frozen
        return seconds / 3600

    def row(self) -> str:
        peak = "-" if self.peak_bytes is None else f"{self.peak_bytes / 2**30:.1f}"
        hours = "-" if self.schedule_hours is None else f"{self.schedule_hours:.1f}"
        schedule = "-" if self.schedule_updates is None else f"{self.schedule_updates:,}"
        update = f"{self.update_seconds * 1e3:.0f}"
        if self.frozen_update_seconds is not None:
            update += f" (frozen {self.frozen_update_seconds * 1e3:.0f})"
        return (
            f"| {self.config} | {self.task} | {'yes' if self.amp else 'no'} | "
            f"{self.inputs_per_update:,.0f} {self.unit} | {update} | "
            f"{self.inputs_per_second:,.0f} | {peak} | {schedule} | {hours} |"
        )


def schedule_updates(settings: dict) -> int | None:
    """Updates of the config's whole schedule, when its epochs have a fixed number of batches."""
    iters = settings.get("num_iters_per_epoch")
    if not iters or not settings.get("max_epoch"):
        return None
    return int(settings["max_epoch"]) * int(iters) // int(settings.get("accum_grad", 1))


def measure(
    task: str,
    config: str | Path,
    size: CorpusSize,
    updates: int = 20,
    ngpu: int = 1,
    vocab: int = 100,
    extra_args: Sequence[str] = (),
    timer: StepTimer | None = None,
) -> Timing:
    """``updates`` updates of ``config`` on the synthetic corpus ``size`` (see the module docstring);
    ``timer`` a StepTimer of ``task`` (one with a profiler, say)."""
    if updates < 2:
        raise ConfigError("needs >= 2 updates: the first one warms up", key="--updates")
    settings = yaml.safe_load(Path(config).read_text()) or {}
    amp_option = option_value(extra_args, "--use_amp")
    amp = settings.get("use_amp", False) if amp_option is None else amp_option.lower() == "true"
    timer = timer or StepTimer(task)
    if option_value(extra_args, "--num_workers") is None:
        workers = settings.get("num_workers", ESPNET_NUM_WORKERS)  # loading as a real run loads
        extra_args = [*extra_args, "--num_workers", str(workers)]
    freeze = int((settings.get("model_conf") or {}).get("freeze_finetune_updates") or 0)
    frozen = frozen_phase(updates) if freeze else None
    preflight(
        task,
        config,
        vocab,
        updates,
        ngpu,
        extra_args,
        size=size,
        timer=timer,
        frozen_updates=frozen,
    )
    updates_done, waits = timer.updates(), timer.loader_waits()
    # the first update warms up; so does the first one that trains a frozen encoder (its first backward)
    frozen_measured = range(1, frozen or 1)
    trained = range(1 if frozen is None else frozen + 1, len(updates_done))
    measured = [*frozen_measured, *trained]
    if not trained:
        raise ConfigError("no update after the warm-up was measured", path=config)
    return Timing(
        config=str(config),
        task=task,
        amp=bool(amp),
        unit=timer.unit,
        updates=len(measured),
        update_seconds=statistics.median(updates_done[i][0] for i in trained),
        inputs_per_update=statistics.mean(updates_done[i][1] for i in measured),
        peak_bytes=(
            torch.cuda.max_memory_allocated(timer.device) if timer.device.type == "cuda" else None
        ),
        schedule_updates=schedule_updates(settings),
        loader_wait_seconds=statistics.median(waits[i] for i in measured),
        frozen_update_seconds=(
            statistics.median(updates_done[i][0] for i in frozen_measured) if freeze else None
        ),
        frozen_schedule_updates=freeze,
    )


def frozen_phase(updates: int) -> int:
    """How many of ``updates`` run with the encoder frozen, for a config with ``freeze_finetune_updates``:
    the warm-up and about half of the rest, then one update warms the trained phase up (the encoder's first
    backward) and the others measure it."""
    if updates < 4:
        raise ConfigError(
            "a config that freezes its encoder first (freeze_finetune_updates) needs >= 4 updates: "
            "a warm-up and one measured update of each phase, and the trained phase's warm-up",
            key="--updates",
        )
    return 1 + (updates - 2) // 2


def profile_report(profiler, wall: float, device: torch.device, rows: int) -> str:
    """The top ``rows`` operators of a finished ``profiler``, the device's busy fraction of ``wall`` and
    the host's time by module and backward function (``host_report``)."""
    cuda = device.type == "cuda"
    events = profiler.key_averages()
    key = "self_device_time_total" if cuda else "self_cpu_time_total"
    report = events.table(sort_by=key, row_limit=rows)
    if cuda:
        # the kernels' own time: the CPU operators that launched them would count it twice
        kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
        busy = sum(e.self_device_time_total for e in kernels) / 1e6
        report += f"\ndevice kernels {busy:.2f} s of {wall:.2f} s wall ({busy / wall:.0%} busy)"
    return f"{report}\n{host_report(events, rows)}"


MODULE_EVENT, BACKWARD_EVENT = "nn.Module: ", "autograd::engine::evaluate_function: "


def host_report(events, rows: int) -> str:
    """Where the host's time went (what bounds a launch-bound update): the ``rows`` module classes whose
    forwards took the most CPU time (all their instances; a module's time includes its submodules') and
    the ``rows`` autograd functions of the backward that did, as two markdown tables. ``events``: a
    profiler's ``key_averages()`` recorded ``with_stack`` (the module events)."""
    tables = []
    for prefix, what in ((MODULE_EVENT, "module forward"), (BACKWARD_EVENT, "backward function")):
        total, calls = Counter(), Counter()
        for event in events:
            if event.key.startswith(prefix):
                name = event.key[len(prefix) :]
                if prefix == MODULE_EVENT:
                    name = re.sub(r"_\d+$", "", name)  # the profiler numbers each instance
                total[name] += event.cpu_time_total
                calls[name] += event.count
        lines = [f"| {what} (host) | calls | CPU ms | µs / call |", "|---|---:|---:|---:|"]
        lines += [
            f"| {name} | {calls[name]} | {us / 1e3:.1f} | {us / calls[name]:.0f} |"
            for name, us in total.most_common(rows)
        ]
        tables.append("\n".join(lines))
    return "\n\n".join(tables)


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", required=True, choices=sorted(TASKS))
    parser.add_argument("--config", required=True)
    parser.add_argument("--utterances", type=int, default=64, help="synthetic utterances")
    parser.add_argument("--frames", type=int, default=700, help="speech / video frames of each")
    parser.add_argument("--tokens", type=int, default=30, help="tokens of each (text, translation)")
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--ngpu", type=int, default=1)
    parser.add_argument(
        "--vocab", type=int, default=100, help="token list size (the recipe's nbpe)"
    )
    parser.add_argument("--header", action="store_true", help="print the table's head first")
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="profile; print the top N operators"
    )
    args, extra = parser.parse_known_args(argv)
    logging.basicConfig(level=logging.WARNING)
    size = CorpusSize(args.utterances, args.frames, args.tokens)

    profiler = None
    if args.profile > 0:
        from torch.profiler import ProfilerActivity, profile

        cuda = args.ngpu > 0
        activities = [ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * cuda
        profiler = profile(activities=activities, with_stack=True)  # with_stack: module events
    timer = StepTimer(args.task, profiler)
    timing = measure(
        args.task, args.config, size, args.updates, args.ngpu, args.vocab, extra, timer
    )
    if profiler is not None:
        device = torch.device("cuda" if args.ngpu > 0 else "cpu")
        print(profile_report(profiler, timer.profiled_seconds, device, args.profile))
    print(
        f"waiting for the data loader: {timing.loader_wait_seconds * 1e3:.0f} ms of the "
        f"{timing.update_seconds * 1e3:.0f} ms update (median)"
    )
    if args.header:
        print(HEADER)
    print(timing.row(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
