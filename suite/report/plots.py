"""The charts every scenario gets from one results table: time, speedup over the baseline and bandwidth
against problem size, each marking where a variant starts to pay; where the compiler was timed too, every
variant's time over the compiler's (suite.report.rival_chart).

Plots read results; they never run kernels. Only timed rows are drawn (status ok, mode native, a median
time): emulated and compile-only rows carry numerics, not times. The bandwidth ceiling is the copy measured in
the same run on the same device (`ceiling_gbps`), never a datasheet peak. A family's own charts come after these
from its `Scenario.charts`; the look both share is `suite.kit.chartkit`.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, NullFormatter

from suite.core.scenario import lookup
from suite.kit.ceiling_marks import ceiling_legend, draw_ceilings, per_size
from suite.kit.chartkit import (
    STYLE,
    comparisons,
    grid,
    impl_handles,
    measured_handles,
    palette,
    plain_log_y,
    predicted,
    predicted_handles,
    ratio_axis,
    save,
    scenario,
    variant_handles,
)
from suite.kit.tidy import chart_name, crossover, fmt_size, timed
from suite.report import memory
from suite.report.rival_chart import REFERENCE, rival_chart
from suite.report.tidied import Tidied

CROSSOVER = "crossover"
"""The gid of a crossover label, by which `_stack_crossovers` finds it."""
CROSSOVER_LOOK = {"ls": ":", "lw": 1.2}
"""The dotted vertical line at a crossover, in its implementation's colour."""
CROSSOVER_LEGEND = "from here on the variant pays (crossover)"
GAP = 3.0
"""Points between crossover labels set side by side."""


def make_charts(frame: pd.DataFrame | Tidied, outdir: Path, label: str | None = None) -> list[Path]:
    """Write every chart the table supports into `outdir`; return their paths (none if nothing was timed). Given
    the table already tidied (`Tidied`, made once for the charts and the report), it is not tidied again.

    `label` (a report over many runs draws one set of charts per device, revision or run) is appended to the
    generic charts' titles, so a chart read on its own says where its rows came from."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    tidied = Tidied.of(frame)
    data, pairs = tidied.data, tidied.pairs
    rows = timed(data)
    written: list[Path] = []

    def keep(figure: plt.Figure, kind: str, name: str) -> None:
        if label and figure.get_suptitle():
            figure.suptitle(f"{figure.get_suptitle()} — {label}", fontsize=12)
        written.append(save(figure, outdir / chart_name(kind, name)))

    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.9):
        for name, sub in rows.groupby("scenario"):
            colors = palette(sorted(sub["impl"].unique()))
            ratios = pairs[pairs["scenario"] == name]
            keep(time_chart(sub, colors, ratios), "time_vs_size", name)
            if sub["gbps"].notna().any():
                keep(bandwidth_chart(sub, colors), "bandwidth", name)
            if not ratios.empty:
                keep(speedup_chart(ratios, colors), "speedup", name)
            if (sub["variant"] == REFERENCE).any() and (figure := rival_chart(sub, colors)) is not None:
                keep(figure, "vs_compiler", name)
        for name, sub in data.groupby("scenario"):
            if (peaks := memory.chart(sub, outdir)) is not None:
                written.append(peaks)
            written += lookup(str(name)).charts(sub, outdir)
    return written


def time_chart(rows: pd.DataFrame, colors: dict[str, tuple], pairs: pd.DataFrame | None = None) -> plt.Figure:
    """Median time against size, one line per implementation and variant, interquartile band shaded.

    Given the speedup `pairs` of the same rows, the size from which a variant pays over its baseline for good is
    marked as on the speedup chart, so it can be read against the times it saves (or the sizes nobody runs).
    """
    keys = ["series", "dtype", "impl", "variant"]
    found = [] if pairs is None else [(*key, _pays_from(line)) for key, line in pairs.groupby(keys)]
    rows = rows.merge(pd.DataFrame(found, columns=[*keys, "pays_from"]), on=keys, how="left")

    def draw(data: pd.DataFrame, **_: object) -> None:
        ax = plt.gca()
        for (impl, variant), line in data.groupby(["impl", "variant"]):
            line = line.sort_values("size")
            ls, marker = STYLE.get(variant, ("-.", "D"))
            ax.plot(line["size"], line["time_ms"], ls=ls, marker=marker, color=colors[impl], ms=5)
            ax.fill_between(line["size"], line["time_q1_ms"], line["time_q3_ms"], color=colors[impl], alpha=0.2)
            if pd.notna(where := line["pays_from"].iloc[0]):
                _mark_crossover(ax, where, colors[impl], f"{variant} pays from {line['size_axis'].iloc[0]}=")
        ax.set_yscale("log")

    legend = {**impl_handles(colors, rows["impl"]), **variant_handles(rows["variant"])}
    legend |= _crossover_handle(rows["pays_from"].notna().any())
    title = f"{scenario(rows)}: median kernel time (band: interquartile range)"
    facets = grid(rows, draw, title, "median time (ms, log scale)", legend)
    for ax in facets.axes.flat:  # the limits are shared and settled once every facet is drawn
        plain_log_y(ax)
    return _stack_crossovers(facets.figure)


def speedup_chart(pairs: pd.DataFrame, colors: dict[str, tuple]) -> plt.Figure:
    """Measured speedup over each variant's baseline against size, the ledger's predicted speedup dashed beside it.

    A row names its baseline (a hand-written fused kernel is divided by the unfused one, torch's compiled and
    library variants by eager): the title and the legend say which for every line."""

    def draw(data: pd.DataFrame, **_: object) -> None:
        ax = plt.gca()
        for (impl, variant), line in data.groupby(["impl", "variant"]):
            line = line.sort_values("size")
            _, marker = STYLE.get(variant, ("-.", "D"))
            ax.plot(line["size"], line["speedup"], marker=marker, color=colors[impl], ms=5)
            ax.fill_between(line["size"], line["speedup_lo"], line["speedup_hi"], color=colors[impl], alpha=0.2)
            if (where := _pays_from(line)) is not None:
                _mark_crossover(ax, where, colors[impl], f"{variant} pays from ")
        predicted(ax, data, "size", colors)

    legend = {**impl_handles(colors, pairs["impl"]), **measured_handles(pairs), **predicted_handles(pairs)}
    crossed = any(_pays_from(line) is not None for _, line in pairs.groupby(["series", "dtype", "impl", "variant"]))
    legend |= _crossover_handle(crossed)
    title = f"{scenario(pairs)}: speedup of {comparisons(pairs)} (same backend, device, dtype)"
    facets = grid(pairs, draw, title, "speedup (baseline time / variant time)", legend)
    return _stack_crossovers(ratio_axis(facets, pairs))


def bandwidth_chart(rows: pd.DataFrame, colors: dict[str, tuple]) -> plt.Figure:
    """Achieved bandwidth (bytes read + written / median time) against size, under the run's copy ceiling: drawn
    per size where the case readings spread (`suite.kit.ceiling_marks`), so each point is read against the copy
    its own `pct_of_ceiling` is of."""
    stepped = per_size(rows)
    ceilings = rows["ceiling_gbps"].dropna()
    wide = rows["gbps"].max() / rows["gbps"].min() > 100 or (len(ceilings) and ceilings.max() / ceilings.min() > 10)
    highest = np.nanmax([rows["gbps"].max(), rows["ceiling_gbps"].max(), rows["ceiling_streaming_gbps"].max()])

    def draw(data: pd.DataFrame, **_: object) -> None:
        ax = plt.gca()
        for (impl, variant), line in data.groupby(["impl", "variant"]):
            line = line.sort_values("size")
            ls, marker = STYLE.get(variant, ("-.", "D"))
            ax.plot(line["size"], line["gbps"], ls=ls, marker=marker, color=colors[impl], ms=5)
        draw_ceilings(ax, data, stepped=stepped)
        if wide:  # a CPU and a GPU side by side: ceilings decades apart
            ax.set_yscale("log")
            top = 2 * highest
            ax.set_ylim(0.5 * rows["gbps"].min(), top)
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
        else:
            ax.set_ylim(0, 1.15 * highest)

    legend = {
        **impl_handles(colors, rows["impl"]),
        **variant_handles(rows["variant"]),
        **ceiling_legend(rows, stepped=stepped),
    }
    title = f"{scenario(rows)}: achieved bandwidth (ledger bytes read + written / median time)"
    return grid(rows, draw, title, "achieved bandwidth (GB/s)", legend).figure


def _pays_from(line: pd.DataFrame) -> float | None:
    """Where one speedup line crosses into paying for good; None when it never does or pays from the start."""
    where = crossover(line)
    return where if where is not None and where > line["size"].min() else None


def _crossover_handle(drawn: bool) -> dict[str, Line2D]:
    """The legend entry of the crossover lines, where a chart draws any."""
    return {CROSSOVER_LEGEND: Line2D([], [], color="0.2", **CROSSOVER_LOOK)} if drawn else {}


def _mark_crossover(ax: plt.Axes, where: float, color: tuple, label: str) -> None:
    """A dotted vertical line at the crossover size, labelled `label` + the size along its foot (left of the line).

    `label` names the variant: an implementation's variants share its colour, so the colour alone says only whose
    line it is. A light box keeps the label legible where it runs over the lines it describes; where labels of
    several lines would overprint, `_stack_crossovers` moves them apart once the chart is drawn."""
    ax.axvline(where, color=color, **CROSSOVER_LOOK)
    ax.annotate(
        f"{label}{fmt_size(where)}",
        (where, 0.02),
        xycoords=("data", "axes fraction"),
        xytext=(0, 0),
        textcoords="offset points",
        color=color,
        fontsize=7,
        rotation=90,
        ha="right",
        va="bottom",
        bbox={"fc": "white", "ec": "none", "alpha": 0.7, "pad": 0.3},
        gid=CROSSOVER,
    )


def _stack_crossovers(figure: plt.Figure) -> plt.Figure:
    """Move crossover labels that would overprint apart, side by side leftwards from the rightmost line's.

    Lines often start to pay at the same size (compiled and library from 2¹¹), and neighbouring sizes sit close
    on a log axis; a fixed step per label at exactly one size left them touching and let labels at nearly the same
    x overprint. So each label is measured as drawn and moved left just past the placed labels it would cross."""
    figure.draw_without_rendering()  # settles the axes' limits, which place the labels
    renderer = figure.canvas.get_renderer()
    for ax in figure.axes:
        placed = []
        for text in sorted((t for t in ax.texts if t.get_gid() == CROSSOVER), key=lambda t: -t.xy[0]):
            box = text.get_window_extent(renderer)
            while hit := [p for p in placed if box.overlaps(p)]:
                step = (min(p.x0 for p in hit) - GAP * figure.dpi / 72 - box.x1) * 72 / figure.dpi
                text.xyann = (text.xyann[0] + step, text.xyann[1])
                box = text.get_window_extent(renderer)
            placed.append(box)
    return figure
