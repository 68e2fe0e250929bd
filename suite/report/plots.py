"""Charts of one results table: time, fused-over-unfused speedup and bandwidth against problem size.

Plots read results; they never run kernels. Only timed rows are drawn (status ok, mode native, a median
time): emulated and compile-only rows carry numerics, not times. The bandwidth ceiling is the copy measured in
the same run on the same device (`ceiling_gbps`), never a datasheet peak. Lines are coloured by implementation
(backend/device) and styled by variant; facets are cases (one column per chain) and dtypes (one row each).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # charts are files: never open a window, work on headless CI

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from suite.report import extras
from suite.report.frames import (
    BASELINE,
    chart_name,
    crossover,
    dtype_rank,
    fmt_size,
    json_dict,
    short_label,
    speedups,
    tidy,
    timed,
)

DPI = 120
MAX_COLS = 4
"""At most this many cases side by side; with more, an evenly spread selection from shortest to longest."""
STYLE = {"fused": ("-", "o"), "unfused": ("--", "X"), "library": (":", "s")}
"""Line style and marker per variant; any other variant gets dash-dot and a diamond."""
PREDICTED = {"cpu": (0, (5, 2)), "cuda": (0, (2, 2))}
FAMILIES = {"cheap ops only": ("-", None), "with tanh/exp": ("-.", "white")}
"""Line style and marker face per chain family on the speedup-vs-chain chart (None: the line's colour); a family
with one length is a lone point, so its hollow marker has to tell it apart."""
Draw = Callable[..., None]


def make_charts(frame: pd.DataFrame, outdir: Path) -> list[Path]:
    """Write every chart the table supports into `outdir`; return their paths (none if nothing was timed)."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    data = tidy(frame)
    rows, pairs = timed(data), speedups(data)
    written: list[Path] = []
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.9):
        for scenario, sub in rows.groupby("scenario"):
            colors = _palette(sorted(sub["impl"].unique()))
            ratios = pairs[pairs["scenario"] == scenario]
            written.append(_save(time_chart(sub, colors, ratios), outdir / chart_name("time_vs_size", scenario)))
            if sub["gbps"].notna().any():
                written.append(_save(bandwidth_chart(sub, colors), outdir / chart_name("bandwidth", scenario)))
            if not ratios.empty:
                written.append(_save(speedup_chart(ratios, colors), outdir / chart_name("speedup", scenario)))
            if ratios["order"].nunique() > 1:
                path = outdir / chart_name("speedup_vs_chain", scenario)
                written.append(_save(chain_chart(ratios, colors), path))
        for scenario, sub in data.groupby("scenario"):
            for extra in extras.charts(str(scenario)):
                written += extra(sub, outdir)
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

    legend = {**_impl_handles(colors), **_variant_handles(rows["variant"])}
    title = f"{_scenario(rows)}: median kernel time (band: interquartile range)"
    return _grid(rows, draw, title, "median time (ms, log scale)", legend).figure


def speedup_chart(pairs: pd.DataFrame, colors: dict[str, tuple]) -> plt.Figure:
    """Measured speedup over the baseline against size, the ledger's predicted speedup dashed beside it."""

    def draw(data: pd.DataFrame, **_: object) -> None:
        ax = plt.gca()
        for (impl, variant), line in data.groupby(["impl", "variant"]):
            line = line.sort_values("size")
            _, marker = STYLE.get(variant, ("-.", "D"))
            ax.plot(line["size"], line["speedup"], marker=marker, color=colors[impl], ms=5)
            ax.fill_between(line["size"], line["speedup_lo"], line["speedup_hi"], color=colors[impl], alpha=0.2)
            if (where := _pays_from(line)) is not None:
                _mark_crossover(ax, where, colors[impl], "pays from ")
        _predicted(ax, data, "size")

    legend = {**_impl_handles(colors), **_measured_handles(pairs), **_predicted_handles(pairs)}
    variants = ", ".join(sorted(pairs["variant"].unique()))
    title = f"{_scenario(pairs)}: speedup of {variants} over {BASELINE} (same backend, device, dtype)"
    grid = _grid(pairs, draw, title, f"speedup ({BASELINE} time / {variants} time)", legend)
    return _ratio_axis(grid, pairs)


def bandwidth_chart(rows: pd.DataFrame, colors: dict[str, tuple]) -> plt.Figure:
    """Achieved bandwidth (bytes read + written / median time) against size, under the run's copy ceiling."""
    ceilings = rows["ceiling_gbps"].dropna()
    wide = rows["gbps"].max() / rows["gbps"].min() > 100 or (len(ceilings) and ceilings.max() / ceilings.min() > 10)
    highest = np.nanmax([rows["gbps"].max(), rows["ceiling_gbps"].max(), rows["ceiling_streaming_gbps"].max()])

    def draw(data: pd.DataFrame, **_: object) -> None:
        ax = plt.gca()
        for (impl, variant), line in data.groupby(["impl", "variant"]):
            line = line.sort_values("size")
            ls, marker = STYLE.get(variant, ("-.", "D"))
            ax.plot(line["size"], line["gbps"], ls=ls, marker=marker, color=colors[impl], ms=5)
        draw_ceilings(ax, data)
        if wide:  # a CPU and a GPU side by side: ceilings decades apart
            ax.set_yscale("log")
            top = 2 * highest
            ax.set_ylim(0.5 * rows["gbps"].min(), top)
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
        else:
            ax.set_ylim(0, 1.15 * highest)

    legend = {**_impl_handles(colors), **_variant_handles(rows["variant"]), **CEILING_LEGEND}
    title = f"{_scenario(rows)}: achieved bandwidth (ledger bytes read + written / median time)"
    return _grid(rows, draw, title, "achieved bandwidth (GB/s)", legend).figure


CEILING_LEGEND = {"measured copy ceiling (ordinary stores)": Line2D([], [], color="0.25", ls=":", lw=1.6)}


def draw_ceilings(ax: plt.Axes, data: pd.DataFrame) -> None:
    """Each device's copy ceiling, and above it, where memcpy streams past it, the copy no kernel here can reach
    (see suite.run.ceiling): rows carry both, so charts read them from the rows they draw."""
    ceilings = data.groupby("device")[["ceiling_gbps", "ceiling_streaming_gbps"]].median()
    for device, (ceiling, streaming) in ceilings.iterrows():
        if ceiling == ceiling:
            ax.axhline(ceiling, color="0.25", ls=":", lw=1.6)
            ax.annotate(f"{device} copy: {ceiling:,.0f} GB/s", (0.02, ceiling), xycoords=("axes fraction", "data"),
                        xytext=(0, 3), textcoords="offset points", fontsize=8, color="0.25")  # fmt: skip
        if streaming == streaming and streaming > 1.05 * ceiling:
            ax.axhline(streaming, color="0.6", ls=":", lw=1.2)
            ax.annotate(f"{device} streaming-store copy: {streaming:,.0f} GB/s", (0.02, streaming),
                        xycoords=("axes fraction", "data"), xytext=(0, 3), textcoords="offset points", fontsize=7,
                        color="0.5")  # fmt: skip


def chain_chart(pairs: pd.DataFrame, colors: dict[str, tuple]) -> plt.Figure:
    """Speedup against chain length at each implementation's largest size, measured vs predicted.

    One line per chain family (see FAMILIES): the cheap chains that extend one another form a line, the chains
    with transcendentals another, so two chains of one length but different cost are not averaged into a point.
    """
    largest = pairs.groupby("impl")["size"].transform("max")
    top = pairs[pairs["size"] == largest].assign(family=lambda d: d["params"].map(_family))

    def draw(data: pd.DataFrame, **_: object) -> None:
        ax = plt.gca()
        for (impl, variant, family), line in data.groupby(["impl", "variant", "family"]):
            line = line.groupby("order", as_index=False)[["speedup", "speedup_lo", "speedup_hi"]].median()
            _, marker = STYLE.get(variant, ("-.", "D"))
            ls, face = FAMILIES[family]
            ax.plot(line["order"], line["speedup"], ls=ls, marker=marker, mfc=face, color=colors[impl], ms=6)
            ax.fill_between(line["order"], line["speedup_lo"], line["speedup_hi"], color=colors[impl], alpha=0.2)
        _predicted(ax, data, "order")

    at = {i: _sizes_text(top.loc[top["impl"] == i, ["size_axis", "size"]]) for i in colors}
    impls = {f"{i} ({at[i]})": h for i, h in _impl_handles(colors).items() if i in set(top["impl"])}
    legend = {**impls, **_measured_handles(pairs), **_family_handles(top["family"]), **_predicted_handles(pairs)}
    title = f"{_scenario(pairs)}: speedup over {BASELINE} vs chain length at the largest size"
    ylabel = f"speedup ({BASELINE} time / {', '.join(sorted(top['variant'].unique()))} time)"
    grid = _grid(top, draw, title, ylabel, legend, x="order", col="dtype", row=None)
    return _ratio_axis(grid, top)


def _grid(data: pd.DataFrame, draw: Draw, title: str, ylabel: str, legend: dict, **facets: str | None) -> sns.FacetGrid:
    """Cases in columns, dtypes in rows (when several); `draw` fills each facet from its slice of `data`.

    facets: x ("size" or "order", the chain length), col ("series") and row ("dtype", None for a single row).
    """
    x, col, row = facets.get("x", "size"), facets.get("col", "series"), facets.get("row", "dtype")
    row = row if row and data[row].nunique() > 1 else None
    data = data.assign(series=data["series"].map(short_label))
    cols = _pick_columns(data, col)
    if len(cols) < data[col].nunique():
        title += f" — {len(cols)} of {data[col].nunique()} cases shown"
    data = data[data[col].isin(cols)]
    rows = sorted(data[row].unique(), key=dtype_rank) if row else None
    grid = sns.FacetGrid(
        data,
        col=col,
        row=row,
        col_order=cols,
        row_order=rows,
        height=3.3,
        aspect=1.3,
        margin_titles=True,
        sharey=True,
        dropna=False,
        despine=False,
    )
    grid.map_dataframe(draw)
    grid.set_titles(col_template="{col_name}", row_template="{row_name}")
    for ax in grid.axes.flat:
        if data[x].max() >= 4 * data[x].min():
            _log2_axis(ax, data[x], plain=x != "size")
    grid.set_axis_labels(_x_label(data, x), ylabel)
    grid.add_legend(legend_data=legend, title="")
    only = "" if "dtype" in (row, col) else f" [{', '.join(sorted(data['dtype'].unique()))}]"
    grid.figure.suptitle(title + only, y=1.0, va="bottom", fontsize=12)
    return grid


def _pick_columns(data: pd.DataFrame, col: str) -> list[str]:
    if col == "dtype":
        return sorted(data[col].unique(), key=dtype_rank)
    order = data.sort_values("series_rank")[col].unique().tolist()
    if len(order) <= MAX_COLS:
        return order
    step = (len(order) - 1) / (MAX_COLS - 1)
    return [order[round(i * step)] for i in range(MAX_COLS)]


def _pays_from(line: pd.DataFrame) -> float | None:
    """Where one speedup line crosses into paying for good; None when it never does or pays from the start."""
    where = crossover(line)
    return where if where is not None and where > line["size"].min() else None


def _mark_crossover(ax: plt.Axes, where: float, color: tuple, label: str) -> None:
    """A dotted vertical line at the crossover size, labelled `label` + the size along its foot.

    Labels of implementations crossing at the same size step leftwards instead of overprinting; a light box keeps
    them legible where they run over the lines they describe."""
    nth = sum(text.xy[0] == where for text in ax.texts)
    ax.axvline(where, color=color, ls=":", lw=1.2)
    ax.annotate(f"{label}{fmt_size(where)}", (where, 0.02), xycoords=("data", "axes fraction"),
                xytext=(-10 * nth, 0), textcoords="offset points", color=color, fontsize=7, rotation=90,
                ha="right", va="bottom", bbox={"fc": "white", "ec": "none", "alpha": 0.7, "pad": 0.3})  # fmt: skip


def _predicted(ax: plt.Axes, data: pd.DataFrame, x: str) -> None:
    """The ledger's prediction: one grey dashed line per device (its store model), whatever the backend."""
    for (device, _), line in data.groupby(["device", "variant"]):
        line = line.groupby(x, as_index=False)["predicted"].median()
        ax.plot(line[x], line["predicted"], color="0.35", ls=PREDICTED.get(device, "--"), lw=1.4)
    ax.axhline(1.0, color="0.1", lw=0.9)


def _ratio_axis(grid: sns.FacetGrid, data: pd.DataFrame) -> plt.Figure:
    """Speedups on a log2 axis labelled 0.5×, 1×, 2×…, always showing break-even and every prediction."""
    values = pd.concat([data["speedup_lo"], data["speedup_hi"], data["predicted"]]).dropna()
    low, high = min(values.min(), 1.0) / 1.25, max(values.max(), 1.0) * 1.25
    for ax in grid.axes.flat:
        ax.set_yscale("log", base=2)
        ax.set_ylim(low, high)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
        ax.yaxis.set_minor_formatter(NullFormatter())
    return grid.figure


def _log2_axis(ax: plt.Axes, values: pd.Series, plain: bool) -> None:
    """x at log base 2, ticks at powers of two (every other one over a wide range), labelled 2ⁿ or plainly."""
    ax.set_xscale("log", base=2)
    span = math.log2(values.max()) - math.log2(max(values.min(), 1))
    ax.xaxis.set_major_locator(LogLocator(base=4 if span >= 8 else 2))
    ax.xaxis.set_minor_locator(LogLocator(base=2, subs=(1.0,)))
    fmt = (lambda v, _: f"{v:g}") if plain else (lambda v, _: f"$2^{{{round(math.log2(v))}}}$")
    ax.xaxis.set_major_formatter(FuncFormatter(fmt))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _palette(impls: list[str]) -> dict[str, tuple]:
    return dict(zip(impls, sns.color_palette("colorblind", max(len(impls), 1)), strict=False))


def _impl_handles(colors: dict[str, tuple]) -> dict[str, Line2D]:
    return {impl: Line2D([], [], color=c, lw=2.5) for impl, c in colors.items()}


def _variant_handles(variants: pd.Series) -> dict[str, Line2D]:
    out = {}
    for variant in sorted(variants.unique()):
        ls, marker = STYLE.get(variant, ("-.", "D"))
        out[variant] = Line2D([], [], color="0.2", ls=ls, marker=marker)
    return out


def _measured_handles(pairs: pd.DataFrame) -> dict[str, Line2D]:
    variants = sorted(pairs["variant"].unique())
    return {f"measured ({v})": Line2D([], [], color="0.2", marker=STYLE.get(v, ("-.", "D"))[1]) for v in variants}


def _family_handles(families: pd.Series) -> dict[str, Line2D]:
    out = {}
    for family, (ls, face) in FAMILIES.items():
        if family in set(families):
            out[f"chain: {family}"] = Line2D([], [], color="0.2", ls=ls, marker="o", mfc=face)
    return out


def _predicted_handles(pairs: pd.DataFrame) -> dict[str, Line2D]:
    out = {}
    for device in sorted(pairs["device"].unique()):
        style = PREDICTED.get(device, "--")
        out[f"predicted by ledger ({device})"] = Line2D([], [], color="0.35", ls=style, lw=1.4)
    out["1× (break-even)"] = Line2D([], [], color="0.1", lw=0.9)
    return out


def _family(params: str) -> str:
    """The chain family of a case from its params JSON: cheap ops only, or with a transcendental op."""
    from scenarios.elementwise_chain import TRANSCENDENTAL

    ops = json_dict(params).get("ops", [])
    return "with tanh/exp" if TRANSCENDENTAL.intersection(ops) else "cheap ops only"


def _sizes_text(sizes: pd.DataFrame) -> str:
    if sizes.empty:
        return ""
    axis, size = sizes.iloc[0]
    exponent = round(math.log2(size))
    return f"{axis} = $2^{{{exponent}}}$" if size == 2**exponent else f"{axis} = {size:,.0f}"


def _x_label(data: pd.DataFrame, x: str) -> str:
    if x == "order":
        return "chain length (ops fused into one kernel)"
    axes = sorted(data["size_axis"].unique())
    unit = " (elements)" if axes == ["n"] else ""
    return f"problem size {', '.join(axes)}{unit}"


def _scenario(data: pd.DataFrame) -> str:
    return str(data["scenario"].iloc[0])


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path
