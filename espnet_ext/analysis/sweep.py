"""Sweep driver: the paper's tables and analyses as many recipe runs, submitted through the recipe's backend.

    cd egs/<corpus>/<task>1
    python -m espnet_ext.analysis.sweep run     --spec conf/sweeps/table1.yaml [--cmd "utils/slurm.py ..."]
    python -m espnet_ext.analysis.sweep collect --spec conf/sweeps/table1.yaml [--results_md RESULTS.md]

``run --runs a,b`` prepares and runs only those runs (the rest of a sweep that another session or cluster
did not finish); ``collect`` leaves a cell empty whose result file is missing.

``run --dry_run`` runs nothing: it calls every recipe invocation of the sweep in the order a real run would
(preparation, then per run its training and each decoding) under the pipelines' dry run
(``PIPELINE_DRY_RUN``, ``utils/pipeline.sh``): each pipeline reports the stages its fingerprints say would
run, and counts them done for the invocations after it. A decoding invocation that would run one of the
``train_stages`` again (a decoding option in a training stage's fingerprint) fails the dry run, and so
does one that would write none of its result files (no stage it would run is the result's, e.g. a decoding
stage outside ``decode_stages``, unless the file is there already), and an invocation the recipe refuses.

A spec (YAML) names the recipe command, the shared preparation, the runs (one trained model each), the
decodings of every run and the analyses to write::

    name: table1
    command: ./run.sh                       # the recipe, run from the recipe dir
    common: --cmd_backend local              # options of every invocation
    tag_option: --asr_tag                    # how the recipe names an experiment (exp/asr_<tag>)
    train_stages: [9, 9]                     # the stages that train one model ...
    decode_stages: [10, 11]                  # ... and that decode + score it
    prepare: ["--stop_stage 8", "--stage 5 --stop_stage 7 --use_lm true"]   # once, in order, before the runs
    runs: {baseline: --attention_variant baseline, relaxed_cross: --attention_variant relaxed_cross}
    gamma_grid: {relaxed_cross: [0.1, 0.25]}        # adds runs relaxed_cross_g0.1 ... (--relax_gamma)
    seeds: [1, 2]                                   # adds <run>_seed<k> for each run above
    seed_option: --asr_args "--seed {seed}"
    decodes:                                        # name -> options (or {options, runs: [only these]})
        no_lm: ""
        lm_extended: --use_lm true
        lm: {options: --use_lm true, tune: {option: '--inference_args "--lm_weight {value}"',
                                            values: [0.1, 0.2], tune_set: dev, tag: "{decode}_lmw{value}"}}
    result: exp/asr_{tag}/{decode}/{set}/score_wer/result.json
    metric: {key: wer, label: "WER [%]", sets: [dev, test], higher_is_better: false}
    tag_format: "{run}"                             # experiment tag of a run (shared across sweeps)
    analyses: [...]                                 # see espnet_ext.analysis.tables
    extends: table1.yaml                            # start from that spec; keys here replace its keys

A decoding with ``tune`` is tuned per run, as the relaxed-attention paper tunes the LM weight λ "for each
approach" on the development set: it expands into one decoding per value (named by ``tag``, default
``{decode}_{value}``), and its own name stands, in the collected values and so in every analysis, for each
run's value with the best metric on ``tune_set`` (the first listed on a tie); the tables' notes say which.

A spec with ``kind: tune`` instead tunes one decoding option of one model over a grid, as the papers tune
the LM weight λ on the development set (see ``Tuning``); the recipe hands it its own command line::

    python -m espnet_ext.analysis.sweep tune --spec conf/sweeps/lm_weight.yaml [--values "0 0.1"] \
        [--label decode_lm_extended] -- ./mt.sh <options>

With ``PIPELINE_DRY_RUN`` set (``PIPELINE_DRY_RUN=$(mktemp -d) ./run.sh --use_lm true --lm_weights "0 0.1"``)
a tuning is dry-run the same way (``dry_run_tune``).

Each run is one job of an array submitted with ``--cmd`` (local processes or Slurm), and before it each
``prepare`` line is one job of its own (in order, each waited for; log ``exp/sweeps/<name>/log/prepare.<k>.log``)
with the same resources: features, LM training or pseudo-labelling must not run where the driver runs (a
login node). Inside a job the recipe runs with ``--cmd_backend local`` (the specs' ``common``) on the resources
the job was given, first the training stages, then every decoding, its own jobs at most ``nproc`` at once.
When ``--cmd`` gives each job GPUs (``--gpu N``), every invocation (preparation, training, decoding; in
``--dry_run`` too) gets ``--ngpu N --gpu_inference true``, less what the spec's ``common`` gives itself or the
recipe does not declare (``Sweep.device_options``). A Slurm ``--cmd`` with GPUs also needs ``--num_threads``
(else Slurm gives the job one CPU for the GPU's data loaders and all of the recipe's jobs), e.g.::

    python -m espnet_ext.analysis.sweep run --spec conf/sweeps/paper.yaml \
        --cmd "utils/slurm.py --config conf/slurm.conf --gpu 1 --num_threads 8"

The recipe's fingerprinted stages make a rerun skip what is done, and runs with the same tag in two sweeps
share their trained model.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from espnet_ext.errors import ConfigError, InputError, reports_input_errors
from espnet_ext.fileio import atomic_write
from espnet_ext.jobs.slurm_config import SlurmConfig
from espnet_ext.jobs.spec import parse_command_line

REQUIRED = ("name", "command", "tag_option", "train_stages", "decode_stages", "result", "metric")


@dataclass
class Decode:
    name: str
    options: str
    runs: list[str] | None = (
        None  # None: every run; a name also covers its family (<name>_g0.1, _seed2)
    )

    def applies_to(self, run: str) -> bool:
        return (
            self.runs is None or run in self.runs or any(run.startswith(r + "_") for r in self.runs)
        )


@dataclass
class Tuned:
    """A decoding tuned per run over a grid: the grid's (value, decoding name) pairs and the set chosen on."""

    choices: list[tuple[str, str]]
    on: str


@dataclass
class Sweep:
    name: str
    command: str
    tag_option: str
    train_stages: Sequence[int]
    decode_stages: Sequence[int]
    result: str
    metric: dict
    common: str = ""
    prepare: list[str] = field(default_factory=list)
    runs: dict[str, str] = field(default_factory=dict)
    decodes: list[Decode] = field(default_factory=list)
    tag_format: str = "{run}"
    analyses: list[dict] = field(default_factory=list)
    source: Path = Path(".")
    tuned: dict[str, Tuned] = field(default_factory=dict)
    # GPUs each job of the sweep has (the --cmd's --gpu): every invocation asks the recipe to use them
    ngpu: int = 0
    _device: dict[int, list[str]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def sets(self) -> list[str]:
        return list(self.metric.get("sets", []))

    def tag(self, run: str) -> str:
        return self.tag_format.format(run=run, name=self.name)

    def result_path(self, run: str, decode: str, dset: str) -> Path:
        return Path(self.result.format(tag=self.tag(run), decode=decode, set=dset))

    def decode_dir(self, run: str, decode: str, dset: str) -> Path:
        """The result path up to the decoding's own directory (its ``{decode}`` part)."""
        head = self.result[: self.result.index("{decode}") + len("{decode}")]
        return Path(head.format(tag=self.tag(run), decode=decode, set=dset))

    def device_options(self) -> list[str]:
        """The options that make every invocation use the job's ``ngpu`` GPUs: ESPnet's ``--ngpu N`` (training)
        and ``--gpu_inference true`` (decoding on one GPU); nothing without GPUs.

        One the spec's ``common`` gives is left out: the spec wins (europarl's modules give --ngpu 1). They
        come right after ``common``, so a run's, decoding's or preparation's own value, later on the line,
        wins as well (utils/parse_options.sh: the last value counts). One the recipe does not declare (its
        --help, down the pipeline it passes options to) is left out with a warning: a wrapper recipe without
        it still runs, as it did before, rather than failing on an unknown option."""
        if self.ngpu <= 0:
            return []
        if self.ngpu not in self._device:
            given = {
                word[2:].replace("-", "_").split("=")[0]
                for word in shlex.split(self.common)
                if word.startswith("--")
            }
            wanted = {
                name: value
                for name, value in (("ngpu", str(self.ngpu)), ("gpu_inference", "true"))
                if name not in given
            }
            declared = declared_options(shlex.split(self.command), self.source) if wanted else set()
            options = []
            for name, value in wanted.items():
                if name in declared:
                    options += [f"--{name}", value]
                else:
                    print(
                        f"warning: sweep {self.name} ({self.source}): {self.command} declares no "
                        f"--{name} (see its --help): its invocations run without --{name} {value}, "
                        f"although each job has {self.ngpu} GPU(s)",
                        file=sys.stderr,
                        flush=True,
                    )
            self._device[self.ngpu] = options
        return list(self._device[self.ngpu])

    def prepare_invocations(self) -> list[list[str]]:
        """The recipe command lines of the shared preparation, in order."""
        return [
            [
                *shlex.split(self.command),
                *shlex.split(self.common),
                *self.device_options(),
                *shlex.split(options),
            ]
            for options in self.prepare
        ]

    def invocations(self, run: str) -> list[list[str]]:
        """The recipe command lines of one run: training, then every decoding that applies to it."""
        base = [
            *shlex.split(self.command),
            *shlex.split(self.common),
            *self.device_options(),
            *shlex.split(self.runs[run]),
            self.tag_option,
            self.tag(run),
        ]
        lines = [
            base + ["--stage", str(self.train_stages[0]), "--stop_stage", str(self.train_stages[1])]
        ]
        for decode in self.decodes:
            if decode.applies_to(run):
                lines.append(
                    base
                    + shlex.split(decode.options)
                    + [
                        "--inference_tag",
                        decode.name,
                        "--stage",
                        str(self.decode_stages[0]),
                        "--stop_stage",
                        str(self.decode_stages[1]),
                    ]
                )
        return lines


def _expand_runs(spec: dict, path: Path) -> dict[str, str]:
    runs = {str(k): str(v or "") for k, v in (spec.get("runs") or {}).items()}
    for variant, gammas in (spec.get("gamma_grid") or {}).items():
        for gamma in gammas:
            runs[f"{variant}_g{gamma}"] = f"--attention_variant {variant} --relax_gamma {gamma}"
    seeds = spec.get("seeds") or []
    if seeds:
        if "seed_option" not in spec:
            raise InputError(
                "'seeds' needs 'seed_option' (e.g. --asr_args \"--seed {seed}\")", path=path
            )
        base = dict(runs)
        for (run, options), seed in itertools.product(base.items(), seeds):
            runs[f"{run}_seed{seed}"] = f"{options} {spec['seed_option'].format(seed=seed)}"
    if not runs:
        raise InputError("the sweep has no runs (runs, gamma_grid)", path=path)
    return runs


def _read_spec(path: Path, kind: str, required: Sequence[str], seen: tuple[Path, ...] = ()) -> dict:
    """The spec at ``path`` as a mapping with the ``required`` keys, of this ``kind`` ("table", "tune").

    ``extends: other.yaml`` (beside this spec) starts from that spec's keys; each key given here replaces
    the other's whole value (the same table on other data: other ``common`` options, ``result`` path).
    """
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise InputError(f"cannot read the sweep spec: {e}", path=path) from e
    if not isinstance(spec, dict):
        raise InputError("expected a mapping", path=path)
    if "extends" in spec:
        base = path.parent / str(spec.pop("extends"))
        if base.resolve() in seen + (path.resolve(),):
            raise InputError(
                f"extends {base.name}, which extends this spec again", path=path, key="extends"
            )
        if not base.is_file():
            raise InputError(f"extends {base}, which does not exist", path=path, key="extends")
        spec = {**_read_spec(base, kind, (), seen + (path.resolve(),)), **spec}
    found = str(spec.get("kind", "table"))
    if found != kind:
        command = "tune" if found == "tune" else "run / collect"
        raise InputError(
            f"a spec of kind '{found}', not '{kind}' (python -m espnet_ext.analysis.sweep {command})",
            path=path,
            key="kind",
        )
    missing = [k for k in required if k not in spec]
    if missing:
        raise InputError(f"missing {', '.join(missing)}", path=path)
    return spec


def load_sweep(path) -> Sweep:
    path = Path(path)
    spec = _read_spec(path, "table", REQUIRED)
    decodes, tuned = [], {}
    for name, entry in (spec.get("decodes") or {"decode": ""}).items():
        if isinstance(entry, dict) and entry.get("tune") is not None:
            tuned[str(name)] = _tuned_decodes(str(name), entry, decodes, spec, path)
        elif isinstance(entry, dict):
            decodes.append(Decode(str(name), str(entry.get("options", "")), entry.get("runs")))
        else:
            decodes.append(Decode(str(name), str(entry or "")))
    if "{decode}" not in str(spec["result"]):
        # every decoding is run with --inference_tag <decode name>, so that name is in its output path
        raise InputError(
            "the result path must contain {decode} (decodings write under their inference tag)",
            path=path,
            key="result",
        )
    runs = _expand_runs(spec, path)
    for decode in decodes:
        # A name may also stand for a family: relaxed_cross covers relaxed_cross_g0.1, ..._seed2.
        unknown = [
            r
            for r in decode.runs or []
            if not any(run == r or run.startswith(r + "_") for run in runs)
        ]
        if unknown:
            raise InputError(f"decode '{decode.name}' names unknown runs {unknown}", path=path)
    return Sweep(
        name=str(spec["name"]),
        command=str(spec["command"]),
        tag_option=str(spec["tag_option"]),
        train_stages=list(spec["train_stages"]),
        decode_stages=list(spec["decode_stages"]),
        result=str(spec["result"]),
        metric=dict(spec["metric"]),
        common=str(spec.get("common", "")),
        prepare=[str(p) for p in spec.get("prepare") or []],
        runs=runs,
        decodes=decodes,
        tag_format=str(spec.get("tag_format", "{run}")),
        analyses=list(spec.get("analyses") or []),
        source=path,
        tuned=tuned,
    )


def _tuned_decodes(name: str, entry: dict, decodes: list[Decode], spec: dict, path: Path) -> Tuned:
    """Append the grid's decodings of ``decodes: {name: {options, runs, tune}}``; its ``Tuned``."""
    tune = entry["tune"]
    key = f"decodes.{name}.tune"
    if not isinstance(tune, dict) or any(k not in tune for k in ("option", "values", "tune_set")):
        raise InputError("needs option (with {value}), values and tune_set", path=path, key=key)
    if "{value}" not in str(tune["option"]) or not tune["values"]:
        raise InputError("option must contain {value}, values a list", path=path, key=key)
    if tune["tune_set"] not in (spec["metric"].get("sets") or []):
        raise InputError(
            f"tune_set: '{tune['tune_set']}' is not one of the metric's sets", path=path, key=key
        )
    choices = []
    for value in tune["values"]:
        grid_name = str(tune.get("tag", "{decode}_{value}")).format(decode=name, value=value)
        options = f"{entry.get('options', '')} {str(tune['option']).format(value=value)}"
        decodes.append(Decode(grid_name, options.strip(), entry.get("runs")))
        choices.append((str(value), grid_name))
    return Tuned(choices, str(tune["tune_set"]))


def select_tuned(
    sweep: Sweep, values: dict[str, dict[str, dict[str, float | None]]]
) -> dict[str, dict[str, str]]:
    """Add each tuned decoding to ``values``: per run, its grid decoding with the best metric on the tuning
    set (none until all are in); returns {run: {tuned decoding: chosen value}}."""
    higher = bool(sweep.metric.get("higher_is_better", False))
    chosen: dict[str, dict[str, str]] = {}
    for run, decodes in values.items():
        for name, tuned in sweep.tuned.items():
            grid = [(value, d) for value, d in tuned.choices if d in decodes]
            if not grid:
                continue
            scores = [decodes[d][tuned.on] for _, d in grid]
            if any(score is None for score in scores):
                decodes[name] = dict.fromkeys(sweep.sets)
                continue
            best = (max if higher else min)(range(len(grid)), key=lambda i: scores[i])
            decodes[name] = dict(decodes[grid[best][1]])
            chosen.setdefault(run, {})[name] = grid[best][0]
    return chosen


def tuned_notes(sweep: Sweep, chosen: dict[str, dict[str, str]]) -> str:
    """A sentence per tuned decoding: the value each run's row uses."""
    notes = []
    for name, tuned in sweep.tuned.items():
        picks = [f"{run} {c[name]}" for run, c in chosen.items() if name in c]
        values = ", ".join(v for v, _ in tuned.choices)
        notes.append(
            f"`{name}`: tuned per run on {tuned.on} among {{{values}}}; chosen: "
            + (", ".join(picks) or "none yet")
            + "."
        )
    return " ".join(notes)


TUNING_REQUIRED = ("name", "what", "grid", "train", "decode", "report", "exp_query", "result")
GRID_REQUIRED = ("option", "values", "tag", "tuned_tag", "tune_set", "test_sets")


@dataclass
class Tuning:
    """One decoding option of one model tuned over a grid (a spec of ``kind: tune``).

    Each value decodes ``tune_set`` (inference tag ``tag``), the best of them by ``metric`` (the first
    listed on a tie) then decodes ``test_sets`` (tag ``tuned_tag``), and the report says which was
    chosen. Tags fill in ``{label}`` (the caller's name for the decoding) and ``{value}``. The recipe
    command (``base``) comes from the caller; its options are followed by this spec's, which win.
    """

    name: str
    what: str  # how messages and RESULTS.md name the option ("LM weight")
    option: str  # recipe options of one value: --inference_args "--lm_weight {value}"
    values: list[str]
    tag: str
    tuned_tag: str
    tune_set: str
    test_sets: str
    train: str  # options that run every stage before decoding (done stages are skipped)
    decode: str  # options that decode and score
    report: str  # options that write RESULTS.md ...
    notes_option: str  # ... and the option that adds a note to it ("" : none)
    exp_query: str  # options that make the recipe print its experiment dir, and exit
    result: str  # a result file: {exp}, {tag}, {set} filled in
    metric: dict  # {key, label, higher_is_better}
    source: Path = Path(".")

    def value_options(self, value: str) -> list[str]:
        return shlex.split(self.option.format(value=value))

    def grid(self, label: str) -> list[tuple[str, str]]:
        """[(value, inference tag)] of the grid, in the spec's order."""
        return [(v, self.tag.format(label=label, value=v)) for v in self.values]

    def decode_line(self, base: list[str], value: str, tag: str, sets: str) -> list[str]:
        return [
            *base,
            *shlex.split(self.decode),
            "--test_sets",
            sets,
            "--inference_tag",
            tag,
            *self.value_options(value),
        ]

    def grid_invocations(self, base: list[str], label: str) -> list[list[str]]:
        """Training (stages not yet done), then each value decoding ``tune_set``."""
        return [[*base, *shlex.split(self.train)]] + [
            self.decode_line(base, value, tag, self.tune_set) for value, tag in self.grid(label)
        ]

    def tuned_invocation(self, base: list[str], label: str, best: str) -> list[str]:
        tag = self.tuned_tag.format(label=label, value=best)
        return self.decode_line(base, best, tag, self.test_sets)

    def notes(self, label: str, best: str, seconds: float) -> str:
        rows = self.tag.format(label=label, value="<value>")
        tuned = self.tuned_tag.format(label=label, value=best)
        minutes, rest = divmod(round(seconds), 60)
        return (
            f"{self.what} tuned on {self.tune_set} among {{{', '.join(self.values)}}} (rows {rows}): "
            f"best {best}, used for {self.test_sets} (row {tuned}). This {self.what} grid invocation "
            f"(with any stages it had to run) took {minutes} min {rest} s."
        )

    def report_invocation(self, base: list[str], label: str, best: str, seconds: float):
        notes = [self.notes_option, self.notes(label, best, seconds)] if self.notes_option else []
        return [*base, *shlex.split(self.report), *notes]


def _grid_values(values, where: str, path: Path) -> list[str]:
    """The grid's values as the recipe will see them (strings), refused if empty or repeated."""
    if isinstance(values, str):
        values = values.split()
    if not isinstance(values, list):
        raise ConfigError("expected a list of values", path=path, key=where)
    values = [str(v) for v in values]
    if not values:
        raise ConfigError("the grid has no values", path=path, key=where)
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        raise ConfigError(f"values listed twice: {repeated}", path=path, key=where)
    return values


def load_tuning(path, values: str | None = None) -> Tuning:
    """The tuning spec at ``path``; ``values`` (whitespace-separated) replaces its grid's values."""
    path = Path(path)
    spec = _read_spec(path, "tune", TUNING_REQUIRED)
    grid = spec["grid"]
    if not isinstance(grid, dict):
        raise InputError("expected a mapping", path=path, key="grid")
    missing = [k for k in GRID_REQUIRED if k not in grid]
    if missing:
        raise InputError(f"missing {', '.join(missing)}", path=path, key="grid")
    metric = dict(spec.get("metric") or {})
    if "key" not in metric:
        raise InputError("missing metric.key", path=path, key="metric")
    for key in ("option", "tag", "tuned_tag"):
        if "{value}" not in str(grid[key]):
            raise InputError("must contain {value}", path=path, key=f"grid.{key}")
        try:
            str(grid[key]).format(label="", value="")
        except (KeyError, IndexError, ValueError) as e:
            raise InputError(
                f"only {{label}} and {{value}} are filled in ({e!r})", path=path, key=f"grid.{key}"
            ) from e
    return Tuning(
        name=str(spec["name"]),
        what=str(spec["what"]),
        option=str(grid["option"]),
        values=(
            _grid_values(grid["values"], "grid.values", path)
            if values is None
            else _grid_values(values, "--values", path)
        ),
        tag=str(grid["tag"]),
        tuned_tag=str(grid["tuned_tag"]),
        tune_set=str(grid["tune_set"]),
        test_sets=str(grid["test_sets"]),
        train=str(spec["train"]),
        decode=str(spec["decode"]),
        report=str(spec["report"]),
        notes_option=str(spec.get("notes_option", "")),
        exp_query=str(spec["exp_query"]),
        result=str(spec["result"]),
        metric=metric,
        source=path,
    )


def _call(line: list[str], what: str) -> None:
    print("+ " + shlex.join(line), file=sys.stderr, flush=True)
    code = subprocess.call(line)
    if code:
        raise SystemExit(f"{what}: '{shlex.join(line)}' failed with exit code {code}")


def tune(tuning: Tuning, base: list[str], label: str) -> str:
    """Train if needed, decode ``tune_set`` with each value, the test sets with the best; its value."""
    from espnet_ext.scoring.select_best import select_best

    if os.environ.get(DRY_RUN_ENV):
        return dry_run_tune(tuning, base, label, Path(os.environ[DRY_RUN_ENV]))
    start = time.monotonic()
    what = f"{tuning.name} grid"
    for line in tuning.grid_invocations(base, label):
        _call(line, what)
    query = [*base, *shlex.split(tuning.exp_query)]
    answer = subprocess.run(query, stdout=subprocess.PIPE, text=True)
    if answer.returncode or not answer.stdout.strip():
        raise SystemExit(f"{what}: '{shlex.join(query)}' did not print the experiment dir")
    exp = answer.stdout.strip().splitlines()[-1]
    results = [
        (value, tuning.result.format(exp=exp, tag=tag, set=tuning.tune_set))
        for value, tag in tuning.grid(label)
    ]
    key = tuning.metric["key"]
    best, values = select_best(results, key, bool(tuning.metric.get("higher_is_better", True)))
    for value, score in values:
        mark = "\t<- best" if value == best else ""
        print(f"{tuning.what} {value}\t{key} {score:.2f}{mark}", file=sys.stderr)
    label_of_metric = tuning.metric.get("label", key)
    print(
        f"{tuning.what} {best} gives the best {tuning.tune_set} {label_of_metric}; "
        f"decoding {tuning.test_sets} with it",
        file=sys.stderr,
        flush=True,
    )
    _call(tuning.tuned_invocation(base, label, best), what)
    _call(tuning.report_invocation(base, label, best, time.monotonic() - start), what)
    return best


def dry_run_tune(tuning: Tuning, base: list[str], label: str, plan_dir: Path) -> str:
    """``tune`` under the pipelines' dry run (``PIPELINE_DRY_RUN`` set, e.g. ``PIPELINE_DRY_RUN=$(mktemp -d)
    ./run.sh --use_lm true --lm_weights "0 0.1"``): every invocation planned in order, nothing run, the first
    value standing in for the best (nothing is scored). SystemExit when a decoding would run a stage of the
    experiment itself (training) or write no result."""
    what = f"{tuning.name} grid (dry run)"
    query = [*base, *shlex.split(tuning.exp_query)]
    answer = subprocess.run(query, stdout=subprocess.PIPE, text=True)
    if answer.returncode or not answer.stdout.strip():
        raise SystemExit(f"{what}: '{shlex.join(query)}' did not print the experiment dir")
    exp = Path(os.path.realpath(answer.stdout.strip().splitlines()[-1]))
    train, *grid = tuning.grid_invocations(base, label)
    best = tuning.values[0]
    decodings = [(line, tag, tuning.tune_set) for line, (_, tag) in zip(grid, tuning.grid(label))]
    tuned_tag = tuning.tuned_tag.format(label=label, value=best)
    decodings.append((tuning.tuned_invocation(base, label, best), tuned_tag, tuning.test_sets))
    problems = []
    for line in [train] + [line for line, _, _ in decodings]:
        print("+ " + shlex.join(line), file=sys.stderr, flush=True)
        planned = plan_invocation(line, plan_dir)
        stages = ", ".join(f"{p.number} ({p.title})" for p in planned) or "none"
        print(f"    would run: {stages}", file=sys.stderr, flush=True)
        match = next(((tag, sets) for other, tag, sets in decodings if other is line), None)
        if match is None:
            continue
        tag, sets = match
        if any(Path(p.marker_dir) == exp for p in planned):
            problems.append(
                f"'{shlex.join(line)}' would run a stage of {exp} itself (training) again"
            )
        for dset in sets.split():
            result = Path(tuning.result.format(exp=exp, tag=tag, set=dset))
            inside = [
                Path(p.marker_dir) for p in planned if Path(p.marker_dir).is_relative_to(exp / tag)
            ]
            if not result.exists() and not any(result.is_relative_to(w) for w in inside):
                problems.append(f"'{shlex.join(line)}' would not write {result}")
    plan_invocation(tuning.report_invocation(base, label, best, 0.0), plan_dir)
    if problems:
        raise SystemExit(f"{what}:\n" + "\n".join(problems))
    return best


def sweep_dir(sweep: Sweep) -> Path:
    return Path("exp") / "sweeps" / sweep.name


def selected_runs(sweep: Sweep, names: str | None) -> list[str]:
    """The runs named in ``names`` (comma- or space-separated; None: all), in the spec's order."""
    if names is None:
        return list(sweep.runs)
    wanted = names.replace(",", " ").split()
    unknown = [n for n in wanted if n not in sweep.runs]
    if unknown or not wanted:
        raise InputError(
            f"--runs {names!r}: unknown runs {unknown} (the spec has {', '.join(sweep.runs)})"
            if unknown
            else "--runs names no run",
            path=sweep.source,
            key="runs",
        )
    return [run for run in sweep.runs if run in wanted]


def declared_options(command: Sequence[str], spec: Path, cwd: Path | None = None) -> set[str]:
    """Option names the recipe command accepts (run in ``cwd``), as its ``--help`` lists them
    (utils/parse_options.sh), and the ``--help`` of the pipeline it hands every other option to ("Every
    other option goes to ./asr.sh"); an error names ``spec``'s ``command``."""
    names: set[str] = set()
    line, seen = [*command, "--help"], set()
    while line:
        shown = subprocess.run(line, capture_output=True, text=True, cwd=cwd)
        if shown.returncode:
            raise InputError(
                f"'{shlex.join(line)}' failed with exit code {shown.returncode}, so which GPU options "
                f"the recipe takes is unknown:\n{(shown.stdout + shown.stderr)[-2000:]}",
                path=spec,
                key="command",
            )
        seen.add(line[0])
        names |= set(re.findall(r"^  --([a-z][a-z0-9_]*) ", shown.stdout, flags=re.M))
        passed = re.search(r"^Every other option goes to (\S+) \(", shown.stdout, flags=re.M)
        line = [passed.group(1), "--help"] if passed and passed.group(1) not in seen else None
    return names


def backend_words(cmd: str) -> list[str]:
    """The job backend command line ``cmd`` (``--cmd``) as words to run."""
    words = shlex.split(cmd)
    if not words:
        raise ConfigError("--cmd is empty: give the job backend, e.g. utils/run.py")
    if words[0].endswith(".py"):
        # the interpreter running the sweep, not whichever python3 the shebang finds on PATH
        words.insert(0, sys.executable)
    return words


def backend_gpus(cmd: str) -> int:
    """The GPUs each job of the backend command ``cmd`` gets (its ``--gpu``, or the Slurm config's default).

    Refuses, before anything is submitted, a Slurm command whose GPU jobs would get Slurm's default of one
    CPU: a task runs a whole recipe on it (``--cmd_backend local``: its jobs run at most ``nproc`` at once)."""
    words = shlex.split(cmd)
    try:
        # the job CLI's own parser: --gpu N and --gpu=N, dashes or underscores, values checked
        options = parse_command_line([*words[1:], "sweep.log", "true"]).options if words else {}
    except ConfigError as e:
        raise ConfigError(f"--cmd {cmd!r}: {e}") from None
    slurm = bool(words) and Path(words[0]).name == "slurm.py"
    if slurm:
        config = options.get("config")
        config = SlurmConfig.load(str(config)) if config else SlurmConfig.default()
        options = {**config.defaults, **options}
    gpus = int(options.get("gpu", 0))
    if slurm and gpus > 0 and "num_threads" not in options:
        raise ConfigError(
            f"--cmd {cmd!r} gives each job {gpus} GPU(s) but no --num_threads, so Slurm gives it one CPU: "
            "that one CPU would run the data loader processes that feed the GPU(s), the training itself "
            "and every job the recipe runs inside the task (decoding, scoring: the local backend runs "
            "nproc = 1 of them at a time). Add --num_threads N to --cmd: CPU cores per job, at least the "
            "training config's num_workers + 1 per GPU, e.g. --num_threads 8 for one GPU with num_workers: 4"
        )
    return gpus


def run_task(sweep: Sweep, index: int, runs: Sequence[str] | None = None) -> None:
    """Array job ``index`` (1-based, into ``runs``, default all): train one run and decode it, each
    step a recipe invocation."""
    run = list(runs or sweep.runs)[index - 1]
    for line in sweep.invocations(run):
        print("+ " + shlex.join(line), flush=True)
        code = subprocess.call(line)
        if code:
            raise SystemExit(
                f"sweep {sweep.name}, run {run}: '{shlex.join(line)}' failed with exit code {code}"
            )


DRY_RUN_ENV = "PIPELINE_DRY_RUN"  # utils/pipeline.sh: plan the stages instead of running them


@dataclass(frozen=True)
class PlannedStage:
    number: int
    title: str
    marker_dir: str


def plan_invocation(line: list[str], plan_dir: Path) -> list[PlannedStage]:
    """The stages the recipe invocation ``line`` would run, decided by the pipelines' own fingerprints, as
    if the invocations planned before it in ``plan_dir`` had run; SystemExit with the recipe's output when
    it refuses the invocation."""
    stages = plan_dir / "stages.tsv"
    done = len(_planned_rows(stages))  # rows of earlier (or enclosing) invocations
    proc = subprocess.run(
        line,
        env={**os.environ, DRY_RUN_ENV: str(plan_dir.absolute())},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if proc.returncode:
        raise SystemExit(
            f"dry run: '{shlex.join(line)}' failed with exit code {proc.returncode}:\n"
            + proc.stdout[-3000:]
        )
    return _planned_rows(stages)[done:]


def _planned_rows(stages: Path) -> list[PlannedStage]:
    if not stages.exists():
        return []
    planned = []
    for row in stages.read_text(encoding="utf-8").splitlines():
        number, title, marker_dir = row.split("\t")
        planned.append(PlannedStage(int(number), title, marker_dir))
    return planned


def dry_run_plan(sweep: Sweep, runs: Sequence[str]) -> list[str]:
    """Plan every invocation of ``runs`` in order (see the module doc); the problems found, one line each
    (empty: every decoding reuses its run's trained model and writes its results)."""
    training = range(sweep.train_stages[0], sweep.train_stages[1] + 1)
    problems = []
    # Marker dirs of the stages planned so far other than training ones: a stage writes under its marker
    # dir, and a decoding's stages have theirs in its directory (RESULTS.md's is the whole exp dir).
    writers: list[Path] = []

    def written(run, decode, dset):
        result = sweep.result_path(run, decode, dset)
        inside = Path(os.path.realpath(sweep.decode_dir(run, decode, dset)))
        return result.exists() or any(
            w.is_relative_to(inside) and Path(os.path.realpath(result)).is_relative_to(w)
            for w in writers
        )

    def show(line, planned):
        print("+ " + shlex.join(line), flush=True)
        stages = ", ".join(f"{p.number} ({p.title})" for p in planned) or "none"
        print(f"    would run: {stages}", flush=True)
        writers.extend(Path(p.marker_dir) for p in planned if p.number not in training)

    with tempfile.TemporaryDirectory(prefix="sweep_dry_run_") as tmp:
        plan_dir = Path(tmp)
        for line in sweep.prepare_invocations():
            show(line, plan_invocation(line, plan_dir))
        for run in runs:
            train, *decodes = sweep.invocations(run)
            show(train, plan_invocation(train, plan_dir))
            applied = [d for d in sweep.decodes if d.applies_to(run)]
            for decode, line in zip(applied, decodes, strict=True):
                planned = plan_invocation(line, plan_dir)
                show(line, planned)
                retrained = [p for p in planned if p.number in training]
                if retrained:
                    stages = ", ".join(f"{p.number} ({p.title}, {p.marker_dir})" for p in retrained)
                    problems.append(
                        f"run {run}: '{shlex.join(line)}' would run the training stage(s) {stages} "
                        "again: the stage fingerprint differs from the training invocation's"
                    )
                # planned by this invocation, or already by one before it (e.g. in the preparation)
                unwritten = [
                    str(sweep.result_path(run, decode.name, d))
                    for d in sweep.sets
                    if not written(run, decode.name, d)
                ]
                if unwritten:
                    problems.append(
                        f"run {run}: '{shlex.join(line)}' would not write {', '.join(unwritten)}: "
                        "no stage it would run writes there"
                    )
    return problems


def run_sweep(
    sweep: Sweep,
    spec_path: str,
    cmd: str,
    max_jobs_run: int | None,
    dry_run: bool,
    only: str | None = None,
) -> None:
    """Prepare, then one array job over the runs (``only``: those named, e.g. the ones a previous
    session or cluster did not finish), each a job of ``cmd``; ``dry_run``: plan the same lines instead."""
    out = sweep_dir(sweep)
    runs = selected_runs(sweep, only)
    backend = backend_words(cmd)
    sweep.ngpu = backend_gpus(cmd)  # refuses a backend that cannot work before anything runs
    if dry_run:
        problems = dry_run_plan(sweep, runs)
        if problems:
            raise SystemExit(
                f"sweep {sweep.name} ({sweep.source}), dry run:\n" + "\n".join(problems)
            )
        return
    # Each preparation line is a job too: on a cluster it is the heaviest work (features, LM training),
    # which must not run on the login node the driver runs on, and it gets the runs' resources.
    for k, line in enumerate(sweep.prepare_invocations(), start=1):
        print("+ " + shlex.join(line), flush=True)
        log = out / "log" / f"prepare.{k}.log"
        if subprocess.call([*backend, str(log), *line]):
            raise SystemExit(
                f"sweep {sweep.name}: preparation {k} '{shlex.join(line)}' failed; see its log {log}"
            )
    with atomic_write(out / "runs.json") as f:
        json.dump(
            {run: [shlex.join(line) for line in sweep.invocations(run)] for run in runs},
            f,
            indent=1,
        )
    array = [
        *backend,
        *(["--max_jobs_run", str(max_jobs_run)] if max_jobs_run else []),
        f"JOB=1:{len(runs)}",
        str(out / "log" / "run.JOB.log"),
        sys.executable,
        "-m",
        "espnet_ext.analysis.sweep",
        "task",
        "--spec",
        spec_path,
        "--index",
        "JOB",
        *(["--runs", ",".join(runs)] if only is not None else []),
        *(["--ngpu", str(sweep.ngpu)] if sweep.ngpu else []),
    ]
    print("+ " + shlex.join(array), flush=True)
    if subprocess.call(array):
        raise SystemExit(
            f"sweep {sweep.name}: some runs failed; their logs are {out}/log/run.<n>.log "
            f"(n = position in {out}/runs.json)"
        )


def collect(sweep: Sweep, key: str | None = None) -> dict[str, dict[str, dict[str, float | None]]]:
    """{run: {decode: {set: value or None (not run yet)}}} of ``key`` (default: the metric's) in the
    runs' result files."""
    from espnet_ext.results import lookup

    key = key or sweep.metric["key"]
    values: dict[str, dict[str, dict[str, float | None]]] = {}
    for run in sweep.runs:
        for decode in sweep.decodes:
            if decode.applies_to(run):
                values.setdefault(run, {})[decode.name] = {
                    dset: lookup(sweep.result_path(run, decode.name, dset), key)
                    for dset in sweep.sets
                }
    return values


def write_collection(sweep: Sweep, results_md: str | None, command: str) -> list[Path]:
    from espnet_ext.analysis.tables import render_analyses
    from espnet_ext.results import write_results

    out = sweep_dir(sweep)
    values = collect(sweep)
    chosen = select_tuned(sweep, values)
    with atomic_write(out / "results.json") as f:
        json.dump(values, f, indent=1)
    notes = " ".join(filter(None, [f"Spec: `{sweep.source}`.", tuned_notes(sweep, chosen)]))

    def values_of(key):
        if key is None:
            return values
        other = collect(sweep, key)
        for run, picks in chosen.items():  # the values of the decodings the metric chose
            for name, value in picks.items():
                grid = dict(sweep.tuned[name].choices)
                other[run][name] = dict(other[run][grid[value]])
        return other

    tables, figures = render_analyses(sweep, values_of, out)
    written = [out / "results.json", *figures]
    title = f"Sweep {sweep.name}"
    written.append(write_results(out / "tables.md", title, tables, command, notes=notes))
    if results_md:
        # RESULTS.md is committed with the recipe: its figures go beside it, not into exp/.
        md_dir = Path(results_md).parent
        md_tables, md_figures = render_analyses(
            sweep, values_of, md_dir / "figures", link_dir=md_dir
        )
        written += md_figures
        written.append(write_results(results_md, title, md_tables, command, notes=notes))
    return written


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "run", help="prepare, submit every run as one array job, wait, collect"
    )
    run.add_argument(
        "--cmd",
        default="utils/run.py",
        help="job backend command (cmd.sh's ${cuda_cmd} etc.) of the preparation and of each run; "
        "its --gpu N makes every recipe invocation --ngpu N --gpu_inference true (also in --dry_run)",
    )
    run.add_argument(
        "--max_jobs_run", type=int, default=None, help="runs at once (local: default 1)"
    )
    run.add_argument(
        "--dry_run",
        action="store_true",
        help="run nothing: each invocation's stages as the pipelines would decide them; "
        "fails if a decoding would retrain",
    )
    task = commands.add_parser("task", help="one run (what each array job executes)")
    task.add_argument("--index", type=int, required=True)
    task.add_argument(
        "--ngpu",
        type=int,
        default=0,
        help="GPUs the job has (run passes its --cmd's --gpu): the recipe gets --ngpu/--gpu_inference",
    )
    for sub in (run, task):
        sub.add_argument(
            "--runs", default=None, help="only these runs, e.g. 'relaxed_cross,relaxed_self'"
        )
    col = commands.add_parser("collect", help="tables and figures of what has finished")
    tun = commands.add_parser(
        "tune", help="tune a decoding option of one model over a grid (a spec of kind: tune)"
    )
    tun.add_argument("--values", default=None, help="the grid (default: the spec's), e.g. '0 0.1'")
    tun.add_argument("--label", default="decode", help="fills {label} in the spec's tags")
    tun.add_argument("base", nargs="+", help="-- then the recipe command and its options")
    for sub in (run, task, col, tun):
        sub.add_argument("--spec", required=True)
    for sub in (run, col):
        sub.add_argument(
            "--results_md", default=None, help="also write the tables as this RESULTS.md"
        )
    args = parser.parse_args(argv)
    if args.command == "tune":
        tune(load_tuning(args.spec, args.values), args.base, args.label)
        return
    sweep = load_sweep(args.spec)
    if args.command == "task":
        sweep.ngpu = args.ngpu
        run_task(sweep, args.index, selected_runs(sweep, args.runs))
        return
    if args.command == "run":
        words = shlex.split(args.cmd)
        local = bool(words) and Path(words[0]).name == "run.py"
        max_jobs = args.max_jobs_run or (1 if local else None)  # local runs share the cores
        run_sweep(sweep, args.spec, args.cmd, max_jobs, args.dry_run, args.runs)
        if args.dry_run:
            return
    command = "python -m espnet_ext.analysis.sweep " + shlex.join(
        list(argv if argv is not None else sys.argv[1:])
    )
    for path in write_collection(sweep, args.results_md, command):
        print(path)


if __name__ == "__main__":
    sys.exit(main())
