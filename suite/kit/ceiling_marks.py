"""The measured copy ceiling on a bandwidth chart: one flat line where the case readings agree, one mark per size
where they spread.

A row's percentage of the ceiling (`pct_of_ceiling`) is of the copy measured for its own case, on the same
device, in the same run (see suite.run.ceiling). Where those readings differ from size to size (a CPU's copy
runs from cache at small sizes, from DRAM at large ones), one flat line at their median misreads every row: a
kernel at 76% of its own case's copy can look like 90% of the line, and an unfused kernel can sit above it. So a
chart whose readings spread draws each size's ceiling at that size, and the legend says so.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

SPREAD = 1.03
"""Readings of one device whose largest is more than this times their smallest are drawn per size."""
COLUMNS = {"ceiling_gbps": ("0.25", 1.6, 8), "ceiling_streaming_gbps": ("0.6", 1.2, 7)}
NOTE = {"ceiling_gbps": "0.25", "ceiling_streaming_gbps": "0.5"}
"""Per ceiling: colour, line width and annotation font size (the annotation's colour in NOTE). Streaming is the
copy no kernel here can reach."""
NAMES = {
    "ceiling_gbps": ("measured copy ceiling (ordinary stores)", "copy ceiling (measured per size)"),
    "ceiling_streaming_gbps": ("streaming-store copy", "streaming-store copy (measured per size)"),
}
PER_SIZE = {"marker": "_", "ms": 16, "mew": 2.0}
"""A ceiling measured per size: a bar across each size's position, joined by a thin dotted line."""


def per_size(rows: pd.DataFrame, x: str = "size") -> bool:
    """Whether the ordinary-store ceilings of `rows` differ between values of `x` on some device."""
    readings = rows.groupby(["device", x])["ceiling_gbps"].median().dropna()
    spread = readings.groupby(level="device").agg(lambda r: r.max() / r.min() if r.min() > 0 else 1.0)
    return bool((spread > SPREAD).any())


def _streams(rows: pd.DataFrame) -> bool:
    """Whether memcpy's streaming stores beat the ordinary copy by enough to draw (5%) anywhere in `rows`."""
    return bool((rows["ceiling_streaming_gbps"] > 1.05 * rows["ceiling_gbps"]).any())


def draw_ceilings(ax: plt.Axes, data: pd.DataFrame, x: str = "size", stepped: bool | None = None) -> None:
    """Each device's copy ceiling over the rows of one facet, and above it, where memcpy streams past it, the copy
    no kernel here can reach. `stepped` (default: `per_size(data, x)`) draws a mark at each value of `x` rather
    than one line at the median; a chart passes the same choice to every facet and to `ceiling_legend`."""
    stepped = per_size(data, x) if stepped is None else stepped
    columns = ["ceiling_gbps", *(["ceiling_streaming_gbps"] if _streams(data) else [])]
    devices = data["device"].nunique()
    for device, rows in data.groupby("device"):
        for column in columns:
            colour, width, font = COLUMNS[column]
            kept = rows if column == "ceiling_gbps" else rows[rows[column] > 1.05 * rows["ceiling_gbps"]]
            if not stepped:
                level = kept[column].median()
                if level == level:
                    ax.axhline(level, color=colour, ls=":", lw=width)
                    label = "copy" if column == "ceiling_gbps" else "streaming-store copy"
                    at, text = (0.02, level), f"{device} {label}: {level:,.0f} GB/s"
                    _note(ax, at, ("axes fraction", "data"), text, font, NOTE[column])
                continue
            line = kept.groupby(x)[column].median().dropna().sort_index()
            if line.empty:
                continue
            ax.plot(line.index, line.values, color=colour, ls=":", lw=width * 0.7, **PER_SIZE)
            if devices > 1:  # the legend names the mark, not the device: say whose it is
                _note(ax, (line.index[-1], line.values[-1]), ("data", "data"), str(device), font, NOTE[column])


def _note(ax: plt.Axes, at: tuple[float, float], coords: tuple[str, str], text: str, font: int, colour: str) -> None:
    ax.annotate(text, at, xycoords=coords, xytext=(0, 3), textcoords="offset points", fontsize=font, color=colour)


def ceiling_legend(rows: pd.DataFrame, x: str = "size", stepped: bool | None = None) -> dict[str, Line2D]:
    """The legend entries of what `draw_ceilings` draws over `rows`: none for a ceiling it does not draw."""
    stepped = per_size(rows, x) if stepped is None else stepped
    out = {}
    for column in ["ceiling_gbps", *(["ceiling_streaming_gbps"] if _streams(rows) else [])]:
        if rows[column].notna().any():
            colour, width, _ = COLUMNS[column]
            style = {"lw": width * 0.7, **PER_SIZE} if stepped else {"lw": width}
            out[NAMES[column][stepped]] = Line2D([], [], color=colour, ls=":", **style)
    return out
