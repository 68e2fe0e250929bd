"""The look every chart shares, the machinery's and a family's own: style per variant, facets, axes, legends.

A scenario family draws its own charts (`Scenario.charts`) and may import only `suite.core`; so that its charts
read like the generic ones (suite.report.plots) without copying them, the pieces both use live here. They only
draw what they are given: rows come from `suite.kit.tidy`. Lines are coloured by implementation
(backend/device) and styled by variant; facets are cases (one column each) and dtypes (one row each).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # charts are files: never open a window, work on headless CI

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
from matplotlib.transforms import Bbox

from suite.core.scenario import lookup
from suite.kit.tidy import dtype_rank

DPI = 120
PAD = 0.1
"""Inches kept clear inside a figure's edge and between its title and the facets under it."""
MAX_COLS = 4
"""At most this many cases side by side; with more, an evenly spread selection from first to last."""
LineStyle = str | tuple[float, tuple[float, ...]]
STYLE: dict[str, tuple[LineStyle, str]] = {
    "fused": ("-", "o"),
    "unfused": ("--", "X"),
    "library": (":", "s"),
    "eager": ((0, (3, 1, 1, 1, 1, 1)), "v"),
    "compiled": ((0, (7, 2)), "P"),
    "tiled": ("-", "^"),
    "unblocked": ("--", "<"),
}
"""Line style and marker per variant; any other variant gets dash-dot and a diamond. Eager (the decomposition op
by op) is dash-dot-dot and compiled long-dashed, so neither reads as the hand-written unfused or library line."""
PREDICTED = {"cpu": (0, (5, 2)), "cuda": (0, (2, 2))}
Draw = Callable[..., None]
CEILING_LEGEND = {"measured copy ceiling (ordinary stores)": Line2D([], [], color="0.25", ls=":", lw=1.6)}


def draw_ceilings(ax: plt.Axes, data: pd.DataFrame) -> None:
    """Each device's copy ceiling, and above it, where memcpy streams past it, the copy no kernel here can reach
    (see suite.run.ceiling): rows carry both, so charts read them from the rows they draw."""
    ceilings = data.groupby("device")[["ceiling_gbps", "ceiling_streaming_gbps"]].median()
    for device, (ceiling, streaming) in ceilings.iterrows():
        if ceiling == ceiling:
            ax.axhline(ceiling, color="0.25", ls=":", lw=1.6)
            ax.annotate(
                f"{device} copy: {ceiling:,.0f} GB/s",
                (0.02, ceiling),
                xycoords=("axes fraction", "data"),
                xytext=(0, 3),
                textcoords="offset points",
                fontsize=8,
                color="0.25",
            )
        if streaming == streaming and streaming > 1.05 * ceiling:
            ax.axhline(streaming, color="0.6", ls=":", lw=1.2)
            ax.annotate(
                f"{device} streaming-store copy: {streaming:,.0f} GB/s",
                (0.02, streaming),
                xycoords=("axes fraction", "data"),
                xytext=(0, 3),
                textcoords="offset points",
                fontsize=7,
                color="0.5",
            )


def grid(data: pd.DataFrame, draw: Draw, title: str, ylabel: str, legend: dict, **facets: str | None) -> sns.FacetGrid:
    """Cases in columns, dtypes in rows (when several); `draw` fills each facet from its slice of `data`.

    facets: x ("size", or another numeric column), col ("title", the case's facet title, or "dtype"), row
    ("dtype", None for a single row) and xlabel (default: the problem size, in the scenario's unit).
    """
    x, col, row = facets.get("x", "size"), facets.get("col", "title"), facets.get("row", "dtype")
    row = row if row and data[row].nunique() > 1 else None
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
            log2_axis(ax, data[x], plain=x != "size")
    grid.set_axis_labels(facets.get("xlabel") or _size_label(data), ylabel)
    grid.add_legend(legend_data=legend, title="")
    only = "" if "dtype" in (row, col) else f" [{', '.join(sorted(data['dtype'].unique()))}]"
    grid.figure.suptitle(title + only, fontsize=12)  # wrapped and placed when saved (`fit`)
    return grid


def _pick_columns(data: pd.DataFrame, col: str) -> list[str]:
    if col == "dtype":
        return sorted(data[col].unique(), key=dtype_rank)
    order = data.sort_values("series_rank")[col].unique().tolist()
    if len(order) <= MAX_COLS:
        return order
    step = (len(order) - 1) / (MAX_COLS - 1)
    return [order[round(i * step)] for i in range(MAX_COLS)]


def _size_label(data: pd.DataFrame) -> str:
    axes = sorted(data["size_axis"].unique())
    unit = lookup(scenario(data)).size_unit
    return f"problem size {', '.join(axes)}{f' ({unit})' if unit else ''}"


def predicted(ax: plt.Axes, data: pd.DataFrame, x: str) -> None:
    """The ledger's prediction: one grey dashed line per device (its store model), whatever the backend."""
    for (device, _), line in data.groupby(["device", "variant"]):
        line = line.groupby(x, as_index=False)["predicted"].median()
        ax.plot(line[x], line["predicted"], color="0.35", ls=PREDICTED.get(device, "--"), lw=1.4)
    ax.axhline(1.0, color="0.1", lw=0.9)


def ratio_axis(grid: sns.FacetGrid, data: pd.DataFrame) -> plt.Figure:
    """Speedups on a log2 axis labelled 0.5×, 1×, 2×…, always showing break-even and every prediction."""
    values = pd.concat([data["speedup_lo"], data["speedup_hi"], data["predicted"]]).dropna()
    low, high = min(values.min(), 1.0) / 1.25, max(values.max(), 1.0) * 1.25
    for ax in grid.axes.flat:
        ax.set_yscale("log", base=2)
        ax.set_ylim(low, high)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
        ax.yaxis.set_minor_formatter(NullFormatter())
    return grid.figure


def log2_axis(ax: plt.Axes, values: pd.Series, plain: bool) -> None:
    """x at log base 2, ticks at powers of two (every other one over a wide range), labelled 2ⁿ or plainly."""
    ax.set_xscale("log", base=2)
    span = math.log2(values.max()) - math.log2(max(values.min(), 1))
    ax.xaxis.set_major_locator(LogLocator(base=4 if span >= 8 else 2))
    ax.xaxis.set_minor_locator(LogLocator(base=2, subs=(1.0,)))
    fmt = (lambda v, _: f"{v:g}") if plain else (lambda v, _: f"$2^{{{round(math.log2(v))}}}$")
    ax.xaxis.set_major_formatter(FuncFormatter(fmt))
    ax.xaxis.set_minor_formatter(NullFormatter())


def log2_counts(ax: plt.Axes, values: pd.Series) -> None:
    """x at log base 2 for a count a family sweeps (cols, seq_len): ticks at powers of 2 or 4, labelled plainly."""
    ax.set_xscale("log", base=2)
    span = math.log2(max(values.max(), 2)) - math.log2(max(values.min(), 1))
    ax.xaxis.set_major_locator(LogLocator(base=4 if span >= 8 else 2))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def palette(impls: list[str]) -> dict[str, tuple]:
    return dict(zip(impls, sns.color_palette("colorblind", max(len(impls), 1)), strict=False))


def impl_handles(colors: dict[str, tuple]) -> dict[str, Line2D]:
    return {impl: Line2D([], [], color=c, lw=2.5) for impl, c in colors.items()}


def variant_handles(variants: pd.Series) -> dict[str, Line2D]:
    out = {}
    for variant in sorted(variants.unique()):
        ls, marker = STYLE.get(variant, ("-.", "D"))
        out[variant] = Line2D([], [], color="0.2", ls=ls, marker=marker)
    return out


def measured_handles(pairs: pd.DataFrame) -> dict[str, Line2D]:
    variants = sorted(pairs["variant"].unique())
    return {f"measured ({v})": Line2D([], [], color="0.2", marker=STYLE.get(v, ("-.", "D"))[1]) for v in variants}


def predicted_handles(pairs: pd.DataFrame) -> dict[str, Line2D]:
    out = {}
    for device in sorted(pairs["device"].unique()):
        style = PREDICTED.get(device, "--")
        out[f"predicted by ledger ({device})"] = Line2D([], [], color="0.35", ls=style, lw=1.4)
    out["1× (break-even)"] = Line2D([], [], color="0.1", lw=0.9)
    return out


def scenario(data: pd.DataFrame) -> str:
    return str(data["scenario"].iloc[0])


def save(fig: plt.Figure, path: Path) -> Path:
    """Lay the figure out (`fit`) and write it."""
    fit(fig)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path


def fit(figure: plt.Figure) -> None:
    """Lay a figure out so that nothing in it overlaps or lies outside it; its axes keep their size.

    Seaborn sizes a facet grid for its facets and legend, not for its title and labels: over a single facet a long
    title is wider than the whole figure, and a y label longer than its facet is tall runs up into the facet's and
    the figure's titles. So every axis label wraps to the length of its axes, the title wraps to the figure's width
    and sits above every facet's title, and the figure grows (the axes never shrink) to hold it all.
    """
    figure.draw_without_rendering()  # settles limits, ticks and titles, which the extents below depend on
    renderer = figure.canvas.get_renderer()
    for ax in figure.axes:
        box = ax.get_window_extent(renderer)
        wrap(ax.xaxis.label, box.width)
        wrap(ax.yaxis.label, box.height)
    heading = figure._suptitle  # the Text; get_suptitle() gives only its string
    if heading is not None:
        heading.set_in_layout(False)  # first the rest, then the title takes the width that leaves it
    _grow(figure, figure.get_tightbbox(renderer))
    if heading is not None:
        heading.set_in_layout(True)
        wrap(heading, figure.bbox.width - 2 * PAD * figure.dpi)
        top = max((b.y1 for ax in figure.axes if (b := ax.get_tightbbox(renderer)) is not None), default=0.0)
        heading.set(x=0.5, y=(top + PAD * figure.dpi) / figure.bbox.height, ha="center", va="bottom")
        _grow(figure, figure.get_tightbbox(renderer))


def wrap(text: Text, length: float) -> None:
    """Break `text` at spaces into the fewest lines that keep it within `length` pixels along its direction
    (its width; its height when it stands vertically, as a y label does)."""
    words = " ".join(text.get_text().split())
    renderer = text.figure.canvas.get_renderer()
    vertical = text.get_rotation() % 180 == 90
    text.set_text(words)
    columns = len(words)
    while columns > 1:
        box = text.get_window_extent(renderer)
        if (box.height if vertical else box.width) <= length:
            return
        columns -= 1
        text.set_text(textwrap.fill(words, columns, break_long_words=False, break_on_hyphens=False))


def _grow(figure: plt.Figure, used: Bbox) -> None:
    """Enlarge `figure` to hold `used` (inches) with PAD to spare on every side, everything in it keeping its
    place relative to the rest: axes and figure texts, placed in fractions of the figure, are placed anew."""
    width, height = figure.get_size_inches()
    left, bottom = max(0.0, PAD - used.x0), max(0.0, PAD - used.y0)
    wide, high = max(width, used.x1 + PAD) + left, max(height, used.y1 + PAD) + bottom
    if (wide, high) == (width, height):
        return
    figure.set_size_inches(wide, high)
    for ax in figure.axes:
        x, y, w, h = ax.get_position().bounds
        ax.set_position(((x * width + left) / wide, (y * height + bottom) / high, w * width / wide, h * height / high))
    for text in figure.texts:
        x, y = text.get_position()
        text.set_position(((x * width + left) / wide, (y * height + bottom) / high))
