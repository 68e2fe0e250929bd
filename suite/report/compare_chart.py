"""The chart of `python -m suite compare`: NEW/BASE time ratio per (case, implementation) on a log axis.

Each line is a dot at the ratio with its bootstrap interval as error bars, coloured by verdict; the shaded band is
the ±threshold region inside which a change is called `same`. Rows whose ratio has no interval (an older run
without repetitions) are drawn hollow. It only draws the lines it is given (see `suite.report.compare_stats`).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # a file, never a window: works on headless CI

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, NullFormatter

from suite.kit.chartkit import DPI

MAX_LINES = 60
"""At most this many lines; with more, the ones that changed first, then the largest ratios either way."""
_PALETTE = sns.color_palette("colorblind", 4)
COLOURS = {"slower": _PALETTE[3], "same": (0.45, 0.45, 0.45), "faster": _PALETTE[2]}
"""Vermilion for slower, green for faster (the colorblind palette's), grey for same."""


def draw(lines: pd.DataFrame, threshold: float, title: str, path: Path) -> Path:
    """Write the chart of `lines` (ratio, lo, hi, verdict, case, implementation) to `path`."""
    timed = lines[np.isfinite(lines["ratio"].astype(float))]
    shown = _pick(timed)
    with sns.axes_style("whitegrid"):  # scoped: the run's other charts keep their own look
        fig, ax = plt.subplots(figsize=(9, 1.6 + 0.32 * max(len(shown), 1)))
    ax.axvspan(1 / (1 + threshold), 1 + threshold, color="0.85", zorder=0)
    ax.axvline(1.0, color="0.1", lw=0.9, zorder=1)
    y = np.arange(len(shown))[::-1]
    for pos, line in zip(y, shown.itertuples(index=False), strict=True):
        _point(ax, pos, line)
    ax.set_yticks(y, [f"{c} — {i}" for c, i in zip(shown["case"], shown["implementation"], strict=True)], fontsize=8)
    if shown.empty:
        ax.text(0.5, 0.5, "no row timed in both runs", ha="center", va="center", transform=ax.transAxes)
        ax.set_yticks([])
    _log_axis(ax, shown, threshold)
    ax.set_xlabel("time ratio NEW / BASE (below 1: NEW is faster), 95% bootstrap interval")
    ax.set_ylim(-0.7, max(len(shown), 1) - 0.3)
    if len(shown) < len(timed):
        title += f" — {len(shown)} of {len(timed)} shown"
    ax.set_title(title, fontsize=11)
    ax.legend(handles=_legend(threshold), loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path


def _point(ax: plt.Axes, pos: float, line: object) -> None:
    colour = COLOURS.get(line.verdict, COLOURS["same"])  # type: ignore[attr-defined]
    ratio, lo, hi = float(line.ratio), float(line.lo), float(line.hi)  # type: ignore[attr-defined]
    if np.isfinite(lo) and np.isfinite(hi):
        ax.errorbar(ratio, pos, xerr=[[ratio - lo], [hi - ratio]], fmt="o", color=colour, ms=6, capsize=3, lw=1.4)
    else:
        ax.plot(ratio, pos, "o", mfc="none", mec=colour, ms=7, mew=1.6)


def _pick(timed: pd.DataFrame) -> pd.DataFrame:
    """All lines when they fit; else those called slower or faster first, then the farthest from 1."""
    if len(timed) <= MAX_LINES:
        return timed
    distance = np.abs(np.log(timed["ratio"].astype(float)))
    order = (timed["verdict"] != "same").astype(int) * 1e6 + distance
    keep = order.sort_values(ascending=False).index[:MAX_LINES]
    return timed.loc[sorted(keep)]


def _log_axis(ax: plt.Axes, shown: pd.DataFrame, threshold: float) -> None:
    """Every ratio and the band in view, the intervals too unless one is far wider than the ratios' spread
    (a handful of noisy repetitions): then its bar runs off the axis rather than flattening all the others."""
    ratios = shown["ratio"].astype(float).tolist()
    low, high = min([*ratios, 1 / (1 + threshold)]), max([*ratios, 1 + threshold])
    bounds = pd.concat([shown["lo"], shown["hi"]]).astype(float)
    bounds = bounds[np.isfinite(bounds) & (bounds > 0)].tolist()
    low = max(min([low, *bounds]), low / 4) / 1.1
    high = min(max([high, *bounds]), high * 4) * 1.1
    ax.set_xscale("log", base=2)
    ax.set_xlim(low, high)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _times(v)))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:.2g}×") if high / low < 4 else NullFormatter())
    ax.tick_params(axis="x", which="minor", labelsize=7)


def _times(value: float) -> str:
    """2×, 1×, 1/4×: a ratio far below 1 reads as a fraction rather than as 0.000488×."""
    return f"{value:.3g}×" if value >= 0.5 else f"1/{1 / value:.4g}×"


def _legend(threshold: float) -> list:
    handles: list = [Line2D([], [], color=c, marker="o", ls="", label=v) for v, c in COLOURS.items()]
    handles.append(Line2D([], [], color="0.3", marker="o", mfc="none", ls="", label="no interval (no repetitions)"))
    handles.append(Patch(color="0.85", label=f"±{threshold:.0%} band: same"))
    return handles
