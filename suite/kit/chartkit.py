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
from suite.kit.size_ticks import categorical, dodged
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
PREDICTED_LOOK = {"lw": 1.2, "marker": "_", "ms": 12, "mew": 1.4}
"""A predicted speedup's line; the bar at each point keeps a prediction at a lone size visible."""
Draw = Callable[..., None]


def grid(data: pd.DataFrame, draw: Draw, title: str, ylabel: str, legend: dict, **facets: str | None) -> sns.FacetGrid:
    """Cases in columns, dtypes in rows (when several); `draw` fills each facet from its slice of `data`.

    facets: x ("size", or another numeric column), col ("title", the case's facet title, or "dtype"), row
    ("dtype", None for a single row), xlabel (default: the problem size, in the scenario's unit) and xticks
    ("drawn" where `draw` ticks x itself; else x spread over 4× or more is a log2 axis, and fewer, closer values
    are categories, `suite.kit.size_ticks.categorical`).
    """
    x, col, row = facets.get("x", "size"), facets.get("col", "title"), facets.get("row", "dtype")
    row = row if row and data[row].nunique() > 1 else None
    cols = _pick_columns(data, col)
    if len(cols) < data[col].nunique():
        title += f" — {len(cols)} of {data[col].nunique()} cases shown"
    data = data[data[col].isin(cols)]
    values = data[x].dropna().unique()
    if x == "size" and facets.get("xticks") != "drawn":
        data = dodged(data, x)  # one size: the series side by side at it (a measured x, such as bytes, stays put)
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
        elif facets.get("xticks") != "drawn":  # one size, or a few close ones: each ticked where it is
            categorical(ax, values)
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


def predicted(ax: plt.Axes, data: pd.DataFrame, x: str, colors: dict[str, tuple]) -> None:
    """The ledger's prediction beside each measured line: its implementation's colour, dashed per device (its store
    model), a bar across each point so that a prediction at a single size is seen too."""
    for (impl, device, _), line in data.groupby(["impl", "device", "variant"]):
        line = line.groupby(x, as_index=False)["predicted"].median()
        ax.plot(line[x], line["predicted"], color=colors[impl], ls=PREDICTED.get(device, "--"), **PREDICTED_LOOK)
    ax.axhline(1.0, color="0.1", lw=0.9)


def comparisons(pairs: pd.DataFrame) -> str:
    """What each compared variant is divided by: 'fused over unfused; compiled, library over eager'."""
    found = pairs[["variant", "baseline"]].drop_duplicates().sort_values(["baseline", "variant"])
    by = found.groupby("baseline", sort=False)["variant"].agg(", ".join)
    return "; ".join(f"{variants} over {baseline}" for baseline, variants in by.items())


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


def plain_log_y(ax: plt.Axes) -> None:
    """A log y axis ticked in plain numbers (20, not 2×10¹, beside 10¹ in another notation); over less than 20×,
    where a decade may hold no major tick, the minor ticks at 2 and 5 are labelled too."""
    low, high = ax.get_ylim()
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    minor = FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "25" else "")
    ax.yaxis.set_minor_formatter(minor if low > 0 and high / low < 20 else NullFormatter())


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


def count_axis(ax: plt.Axes, values: pd.Series) -> None:
    """A family's swept count on x: a log2 axis (`log2_counts`) where it spans 4× or more, else each value its own
    category (`suite.kit.size_ticks.categorical`), so one seq_len is a tick at the points, not a place on a scale."""
    values = values.dropna()
    if values.max() >= 4 * values.min():
        log2_counts(ax, values)
    else:
        categorical(ax, values.unique())


def palette(impls: list[str]) -> dict[str, tuple]:
    return dict(zip(impls, sns.color_palette("colorblind", max(len(impls), 1)), strict=False))


def impl_handles(colors: dict[str, tuple], drawn: pd.Series | None = None) -> dict[str, Line2D]:
    """A colour swatch per implementation; given the `drawn` rows' impl column, only theirs (an implementation
    the chart has no line of gets no entry)."""
    keep = set(colors) if drawn is None else set(drawn)
    return {impl: Line2D([], [], color=c, lw=2.5) for impl, c in colors.items() if impl in keep}


def variant_handles(variants: pd.Series) -> dict[str, Line2D]:
    out = {}
    for variant in sorted(variants.unique()):
        ls, marker = STYLE.get(variant, ("-.", "D"))
        out[variant] = Line2D([], [], color="0.2", ls=ls, marker=marker)
    return out


def measured_handles(pairs: pd.DataFrame) -> dict[str, Line2D]:
    """A marker per compared variant, labelled with what its times are divided by (its baseline's)."""
    found = pairs[["variant", "baseline"]].drop_duplicates().sort_values(["variant", "baseline"])
    return {
        f"measured: {b} time / {v} time": Line2D([], [], color="0.2", marker=STYLE.get(v, ("-.", "D"))[1])
        for v, b in found.itertuples(index=False)
    }


def predicted_handles(pairs: pd.DataFrame) -> dict[str, Line2D]:
    out = {}
    for device in sorted(pairs["device"].unique()):
        style = PREDICTED.get(device, "--")
        out[f"predicted by ledger ({device})"] = Line2D([], [], color="0.35", ls=style, **PREDICTED_LOOK)
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
    title is wider than the whole figure, a y label longer than its facet is tall runs up into the facet's and the
    figure's titles, and a facet's title (a case's parameters) wider than its facet runs into its neighbour's. So
    every facet title and axis label wraps to the length of its axes, the title wraps to the figure's width and
    sits above every facet's title, and the figure grows (the axes never shrink) to hold it all.
    """
    figure.draw_without_rendering()  # settles limits, ticks and titles, which the extents below depend on
    renderer = figure.canvas.get_renderer()
    for ax in figure.axes:
        box = ax.get_window_extent(renderer)
        wrap(ax.xaxis.label, box.width)
        wrap(ax.yaxis.label, box.height)
        wrap(ax.title, box.width)  # a case's parameters, side by side, ran into the next facet's
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
