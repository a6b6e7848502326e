"""The relaxed-attention paper's tables and figures from a sweep's collected results.

``render_analyses(sweep, values, out_dir)`` turns the sweep spec's ``analyses`` list into markdown tables
(``espnet_ext.results.Table``) and PNG figures. Kinds:

- ``paper_table`` (Tables 1, 3, 7, 8): rows are runs (or several runs -> mean ± std over seeds; ``{set}`` in a
  run name picks a run per column; a mapping {run: [sets]} takes each set from the run listing it, as the
  head-selection paper's "separate" row, one model per domain), columns are column groups (a decoding
  each, e.g. without / with LM) x the metric's sets::

      {kind: paper_table, title: ..., groups: {"without LM": no_lm, "with LM": lm_extended},
       rows: [{label: Baseline, run: baseline}, {label: "+ matched inference", run: relaxed_cross, suffix: _matched},
              {label: "Relaxed self-attention", runs: [relaxed_self_seed1, relaxed_self_seed2]},
              {label: Separate, run: {separate_tedx: [test_es, test_fr], separate_other: [test_other_es]}}]}

  ``averages`` adds, after each group's sets, columns that average some of them (the head-selection
  paper's AVG over languages, AVG-A / AVG-T / AVG-Z over all / trained / zero-shot directions, High / Low)::

      averages: {AVG: [test_es, test_fr, test_it, test_pt], Low: [test_it, test_pt]}

- ``internal_lm`` (Tables 5, 6): absolute metric without LM and with each LM, and the LM-induced improvement,
  for each model; a bar chart of the improvements::

      {kind: internal_lm, title: ..., models: {Baseline: baseline, Relaxed cross attention: relaxed_cross},
       no_lm: no_lm, lms: {"+ LM (training transcripts only)": lm_transcripts, "+ LM (additional data)": lm_extended}}

- ``gamma`` (Figs. 6, 7): the metric on one set against γ for each relaxed variant (runs ``<variant>_g<γ>``
  from the sweep's ``gamma_grid``), with the baseline (γ = 0) as reference::

      {kind: gamma, title: ..., set: dev, baseline: baseline,
       decodes: {relaxed_self: no_lm, relaxed_cross: lm_extended}}

- ``curve`` (the head-selection paper's Fig. 2): the metric in one column (a set, or an ``averages``
  column) against a numeric setting, one line per series of runs; the table has a row per series::

      {kind: curve, title: ..., x_label: "H'", decode: beam, column: AVG, averages: {AVG: [...]},
       series: {Subset: {4: subset_h4, 8: subset_h8}, Group: {4: group_h4, 8: group_h8}}}
"""

from __future__ import annotations

import math
import os
import statistics
import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from espnet_ext.errors import ConfigError
from espnet_ext.results import Cell, Table

Values = dict[str, dict[str, dict[str, float | None]]]


def _value(values: Values, run: str, decode: str, dset: str) -> float | None:
    if run not in values:
        raise ConfigError(f"analysis refers to run '{run}', which the sweep does not define")
    if decode not in values[run]:
        raise ConfigError(
            f"analysis refers to decoding '{decode}' of run '{run}', which the sweep does not make"
        )
    return values[run][decode].get(dset)


def mean_of(samples: Sequence[float | None]) -> float | None:
    """The mean, or None until every sample is in (and for no samples: nothing to show)."""
    if not samples or any(s is None for s in samples):
        return None
    return statistics.fmean(samples)


def mean_std(samples: Sequence[float | None]) -> tuple[float, float] | None:
    """Mean and sample standard deviation, or None until every run has finished."""
    mean = mean_of(samples)
    if mean is None:
        return None
    return mean, (statistics.stdev(samples) if len(samples) > 1 else 0.0)


def average_columns(
    values: Mapping[str, float | None], averages: Mapping[str, Sequence[str]]
) -> dict[str, float | None]:
    """``{name: mean of values[member] over its members}`` for each average column (AVG over languages,
    High / Low, AVG-T over trained directions ...); None where a member has no value yet."""
    return {name: mean_of([values.get(m) for m in members]) for name, members in averages.items()}


def _averages(spec: dict, sets: Sequence[str]) -> dict[str, list[str]]:
    averages = {str(name): list(members) for name, members in (spec.get("averages") or {}).items()}
    for name, members in averages.items():
        unknown = [m for m in members if m not in sets]
        if not members or unknown:
            raise ConfigError(
                f"average '{name}' needs sets of the metric ({', '.join(sets)}), got {members}",
                key="averages",
            )
    return averages


RowRun = str | Mapping[str, Sequence[str]]  # a run name, or {run: [the sets it gives]}


def _run_for_set(run: RowRun, dset: str) -> str:
    """The run that gives a row its value on ``dset``."""
    if isinstance(run, str):
        # A run name may depend on the column's set ("soft_{set}": one trained model per data set).
        return run.format(set=dset)
    for name, sets in run.items():
        if dset in sets:
            return str(name)
    raise ConfigError(f"none of the runs {dict(run)} gives set '{dset}'", key="rows")


def _run_value(
    values: Values, run: RowRun, decode: str, name: str, averages: dict[str, list[str]]
) -> float | None:
    """A run's value in column ``name``: a set, or the mean of an average's sets (None until all are in)."""
    if name not in averages:
        return _value(values, _run_for_set(run, name), decode, name)
    return mean_of([_value(values, _run_for_set(run, d), decode, d) for d in averages[name]])


def paper_table(spec: dict, values: Values, sets: Sequence[str], fmt: str) -> Table:
    groups = dict(spec["groups"])
    averages = _averages(spec, sets)
    names = [*sets, *averages]
    columns = [
        f"{group} {name}" if len(groups) > 1 or group else name
        for group in groups
        for name in names
    ]
    cells, rows = [], []
    for row in spec["rows"]:
        label = str(row["label"])
        rows.append(label)
        runs = list(row["runs"]) if "runs" in row else [row["run"]]
        for (group, decode), name in ((g, n) for g in groups.items() for n in names):
            column = f"{group} {name}" if len(groups) > 1 or group else name
            decode_name = decode + row.get("suffix", "")

            samples = [_run_value(values, run, decode_name, name, averages) for run in runs]
            if len(runs) == 1:
                cells.append(Cell(row=label, column=column, value=samples[0], format=fmt))
            else:
                stats = mean_std(samples)
                text = None if stats is None else f"{stats[0]:{fmt}} ± {stats[1]:{fmt}}"
                cells.append(Cell(row=label, column=column, value=text))
    return Table(
        title=spec["title"],
        rows=rows,
        columns=columns,
        cells=cells,
        row_header=str(spec.get("row_header", "Approach")),
        notes=str(spec.get("notes", "")),
    )


def lm_improvement(
    no_lm: float | None, with_lm: float | None, higher_is_better: bool
) -> float | None:
    """How much the LM helps: WER reduction (no LM - LM) or BLEU gain (LM - no LM)."""
    if no_lm is None or with_lm is None:
        return None
    return with_lm - no_lm if higher_is_better else no_lm - with_lm


def _notes_with_figure(spec: dict, figure: Path, link_dir: Path) -> str:
    """The analysis' notes plus a Markdown image link to its figure, relative to the Markdown file's directory."""
    link = Path(os.path.relpath(figure, link_dir)).as_posix()
    return str(spec.get("notes", "")) + f"\n\n![{spec['title']}]({link})"


def internal_lm(
    spec: dict,
    values: Values,
    sets: Sequence[str],
    fmt: str,
    higher_is_better: bool,
    label: str,
    out_dir: Path,
    link_dir: Path,
) -> tuple[Table, Path]:
    word = "gain" if higher_is_better else "reduction"
    columns = [f"absolute {s}" for s in sets] + [f"LM-induced {word} {s}" for s in sets]
    rows, cells, bars = [], [], {}
    for model_label, run in spec["models"].items():
        base_row = f"{model_label}, no LM"
        rows.append(base_row)
        for dset in sets:
            cells.append(
                Cell(
                    row=base_row,
                    column=f"absolute {dset}",
                    value=_value(values, run, spec["no_lm"], dset),
                    format=fmt,
                )
            )
        for lm_label, decode in spec["lms"].items():
            row = f"{model_label} {lm_label}"
            rows.append(row)
            for dset in sets:
                with_lm = _value(values, run, decode, dset)
                gain = lm_improvement(
                    _value(values, run, spec["no_lm"], dset), with_lm, higher_is_better
                )
                cells.append(Cell(row=row, column=f"absolute {dset}", value=with_lm, format=fmt))
                cells.append(
                    Cell(row=row, column=f"LM-induced {word} {dset}", value=gain, format=fmt)
                )
                bars[(model_label, lm_label, dset)] = gain
    figure = _bar_chart(
        spec, bars, sets, f"LM-induced {word} of {label}", out_dir / f"{_slug(spec['title'])}.png"
    )
    table = Table(
        title=spec["title"],
        rows=rows,
        columns=columns,
        cells=cells,
        row_header="Approach",
        notes=_notes_with_figure(spec, figure, link_dir),
    )
    return table, figure


def gamma_runs(values: Values, variant: str) -> list[tuple[float, str]]:
    """(γ, run) of the runs named ``<variant>_g<γ>``, sorted by γ."""
    prefix = f"{variant}_g"
    found = []
    for run in values:
        if run.startswith(prefix):
            try:
                found.append((float(run[len(prefix) :]), run))
            except ValueError:
                continue  # e.g. <variant>_g0.1_seed2: not part of the γ curve
    return sorted(found)


def gamma_sweep(
    spec: dict, values: Values, fmt: str, label: str, out_dir: Path, link_dir: Path
) -> tuple[Table, Path]:
    dset = spec["set"]
    rows, cells, curves = [], [], {}
    gammas = sorted({g for variant in spec["decodes"] for g, _ in gamma_runs(values, variant)})
    columns = ["0 (baseline)"] + [f"{g:g}" for g in gammas]
    for variant, decode in spec["decodes"].items():
        points = gamma_runs(values, variant)
        if not points:
            raise ConfigError(
                f"gamma analysis: no runs '{variant}_g<γ>' (add {variant} to the sweep's gamma_grid)"
            )
        row = f"{variant} ({decode})"
        rows.append(row)
        baseline = _value(values, spec["baseline"], decode, dset)
        cells.append(Cell(row=row, column="0 (baseline)", value=baseline, format=fmt))
        curve = []
        for gamma, run in points:
            value = _value(values, run, decode, dset)
            cells.append(Cell(row=row, column=f"{gamma:g}", value=value, format=fmt))
            curve.append((gamma, value))
        curves[variant] = (baseline, curve)
    figure = _gamma_figure(
        spec, curves, f"{label} ({dset})", out_dir / f"{_slug(spec['title'])}.png"
    )
    table = Table(
        title=spec["title"],
        rows=rows,
        columns=columns,
        cells=cells,
        row_header="variant (decoding)",
        notes=_notes_with_figure(spec, figure, link_dir),
    )
    return table, figure


def curve(
    spec: dict,
    values: Values,
    sets: Sequence[str],
    fmt: str,
    label: str,
    out_dir: Path,
    link_dir: Path,
) -> tuple[Table, Path]:
    """One column's value against a numeric setting per series: a table (series x setting) and a line
    plot."""
    averages = _averages(spec, sets)
    column = str(spec["column"])
    if column not in sets and column not in averages:
        raise ConfigError(
            f"curve '{spec['title']}': column '{column}' is neither a set of the metric "
            f"({', '.join(sets)}) nor one of its averages",
            key="column",
        )
    series = {}
    for name, runs in dict(spec["series"]).items():
        try:
            points = sorted((float(x), str(run)) for x, run in dict(runs).items())
        except ValueError:
            raise ConfigError(
                f"curve '{spec['title']}', series '{name}': settings must be numbers, got "
                f"{list(dict(runs))}",
                key="series",
            ) from None
        series[str(name)] = [
            (x, _run_value(values, run, spec["decode"], column, averages)) for x, run in points
        ]
    settings = sorted({x for points in series.values() for x, _ in points})
    columns = [f"{spec.get('x_label', 'x')} = {x:g}" for x in settings]
    cells = [
        Cell(row=name, column=f"{spec.get('x_label', 'x')} = {x:g}", value=value, format=fmt)
        for name, points in series.items()
        for x, value in points
    ]
    figure = _curve_figure(
        spec, series, f"{label} ({column})", out_dir / f"{_slug(spec['title'])}.png"
    )
    table = Table(
        title=spec["title"],
        rows=list(series),
        columns=columns,
        cells=cells,
        row_header=str(spec.get("row_header", "Series")),
        notes=_notes_with_figure(spec, figure, link_dir),
    )
    return table, figure


def render_analyses(
    sweep, values_of: Callable[[str | None], Values], out_dir: Path, link_dir: Path | None = None
) -> tuple[list[Table], list[Path]]:
    """Tables and figures (written to ``out_dir``) of the sweep's analyses; ``values_of(key)`` collects a
    result key (None: the sweep's metric). An analysis may name its own ``key`` and ``format`` (e.g. the
    attention entropy). Figures are linked relative to ``link_dir``, the Markdown file's directory."""
    link_dir = out_dir if link_dir is None else link_dir
    metric = sweep.metric
    higher = bool(metric.get("higher_is_better", False))
    tables, figures = [], []
    for spec in sweep.analyses:
        kind = spec.get("kind")
        values = values_of(spec.get("key"))
        fmt = str(spec.get("format", metric.get("format", ".2f")))
        label = str(spec.get("label", metric.get("label", metric["key"])))
        if kind == "paper_table":
            tables.append(paper_table(spec, values, sweep.sets, fmt))
        elif kind == "internal_lm":
            table, figure = internal_lm(
                spec, values, sweep.sets, fmt, higher, label, out_dir, link_dir
            )
            tables.append(table), figures.append(figure)
        elif kind == "gamma":
            table, figure = gamma_sweep(spec, values, fmt, label, out_dir, link_dir)
            tables.append(table), figures.append(figure)
        elif kind == "curve":
            table, figure = curve(spec, values, sweep.sets, fmt, label, out_dir, link_dir)
            tables.append(table), figures.append(figure)
        else:
            raise ConfigError(
                f"sweep {sweep.name}: unknown analysis kind '{kind}' "
                "(paper_table, internal_lm, gamma, curve)"
            )
    return tables, figures


def _slug(title: str) -> str:
    keep = "".join(c.lower() if c.isalnum() else "_" for c in title.split(":")[0])
    return "_".join(part for part in keep.split("_") if part) or "figure"


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def fitted_title(title: str, width_inches: float, fontsize: float = 9) -> str:
    """``title`` broken into lines that fit ``width_inches`` at ``fontsize`` (matplotlib does not wrap)."""
    chars = max(20, int(width_inches * 72 / (0.6 * fontsize)))  # a generous average glyph width
    return "\n".join(textwrap.wrap(title, chars))


def _save(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _bar_chart(spec, bars, sets, ylabel, path: Path) -> Path:
    plt = _plt()
    models, lms = list(spec["models"]), list(spec["lms"])
    fig, axes = plt.subplots(1, len(sets), figsize=(4 * len(sets), 3.2), squeeze=False)
    width = 0.8 / len(lms)
    for ax, dset in zip(axes[0], sets):
        for k, lm in enumerate(lms):
            heights = [bars.get((m, lm, dset)) or 0.0 for m in models]
            ax.bar(
                [i + k * width for i in range(len(models))], heights, width, label=lm.lstrip("+ ")
            )
        ax.set_xticks(
            [i + width * (len(lms) - 1) / 2 for i in range(len(models))], models, fontsize=8
        )
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_title(dset)
        ax.set_ylabel(ylabel, fontsize=8)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(fitted_title(spec["title"], fig.get_figwidth()), fontsize=9)
    return _save(plt, fig, path)


def _gamma_figure(spec, curves, ylabel, path: Path) -> Path:
    plt = _plt()
    fig, axes = plt.subplots(1, len(curves), figsize=(4 * len(curves), 3.2), squeeze=False)
    for ax, (variant, (baseline, curve)) in zip(axes[0], curves.items()):
        points = [(g, v) for g, v in curve if v is not None]
        if points:
            ax.plot([g for g, _ in points], [v for _, v in points], marker="o", label=variant)
        if baseline is not None:
            ax.axhline(baseline, color="grey", linestyle="--", label="baseline (γ = 0)")
        if (
            curve
            and min(g for g, _ in curve) > 0
            and max(g for g, _ in curve) / min(g for g, _ in curve) > 20
        ):
            ax.set_xscale("log")
        ax.set_xlabel("relaxation coefficient γ")
        ax.set_ylabel(ylabel, fontsize=8)
        ax.set_title(variant)
        if points or baseline is not None:  # nothing measured yet: an empty panel, no legend
            ax.legend(fontsize=7)
        if points and all(math.isfinite(v) for _, v in points):
            ax.margins(y=0.2)
    fig.suptitle(fitted_title(spec["title"], fig.get_figwidth()), fontsize=9)
    return _save(plt, fig, path)


def _curve_figure(spec, series, ylabel, path: Path) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    for name, points in series.items():
        measured = [(x, v) for x, v in points if v is not None]
        if measured:
            ax.plot([x for x, _ in measured], [v for _, v in measured], marker="o", label=name)
    ax.set_xlabel(str(spec.get("x_label", "x")))
    ax.set_ylabel(ylabel, fontsize=8)
    if ax.lines:  # nothing measured yet: an empty plot, no legend
        ax.legend(fontsize=7)
    fig.suptitle(fitted_title(spec["title"], fig.get_figwidth()), fontsize=9)
    return _save(plt, fig, path)
