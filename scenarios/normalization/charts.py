"""The normalization family's own chart: effective bandwidth against cols with the tile boundary marked.

The generic bandwidth chart divides each variant's own ledger bytes by its time, so a fused kernel that moves
less looks slower per byte. Here every variant is given the *minimal* traffic — x read once, weight and bias
once, y written once — over its median time, so the lines compare times on the scale of the measured copy
ceiling, and the tile marks where a fused kernel starts reading x twice. The re-read comes from the scenario's
ledger (`reread_bytes`). Used by layernorm, rmsnorm and softmax (`RowNormalization.charts`); reads tidy rows
and never runs a kernel.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D

from scenarios.normalization.decomposition import reread_bytes
from suite.core.scenario import get
from suite.kit.ceiling_marks import ceiling_legend, draw_ceilings, per_size
from suite.kit.chartkit import STYLE, count_axis, save
from suite.kit.size_ticks import dodged
from suite.kit.tidy import json_dict, tidy, timed

MAX_COLS = 4


def ledgers(scenario: str, params: dict, dtype: str) -> dict:
    return get(scenario).ledger(params, dtype)


def with_ledger(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with cols, rows, tile, the minimal bytes and the fused kernel's re-read bytes added."""
    data = frame.copy() if "impl" in frame else tidy(frame)
    parsed = data["params"].map(json_dict)
    for key in ("rows", "cols", "tile"):
        data[key] = parsed.map(lambda p, k=key: p.get(k, math.nan)).astype(float)
    minimal, reread = [], []
    for scenario, p, dtype in zip(data["scenario"], parsed, data["dtype"], strict=True):
        try:
            lg = ledgers(scenario, p, dtype)
        except Exception:  # a row of a case this tree cannot model: no bytes rather than no chart
            minimal.append(math.nan)
            reread.append(math.nan)
            continue
        minimal.append(lg["library"].bytes_read + lg["library"].bytes_written)
        reread.append(reread_bytes(lg["fused"]))
    data["minimal_bytes"], data["reread_bytes"] = minimal, reread
    data["case"] = [f"rows={r:.0f}, tile={t:.0f}" for r, t in zip(data["rows"], data["tile"], strict=True)]
    return data.dropna(subset=["rows", "cols", "tile", "minimal_bytes"])


def _mark_tiles(ax: plt.Axes, data: pd.DataFrame) -> None:
    """A dashed line at each tile within the plotted columns: beyond it a fused kernel reads x twice."""
    for tile in data["tile"].dropna().unique():
        if data["cols"].min() <= tile * 2 and tile <= data["cols"].max() * 2:
            ax.axvline(tile, color="0.5", ls="--", lw=1.1)
            ax.annotate(
                f"tile {tile:.0f}",
                (tile, 0.02),
                xycoords=("data", "axes fraction"),
                xytext=(3, 0),
                textcoords="offset points",
                fontsize=8,
                color="0.35",
            )


def effective_bandwidth_chart(frame: pd.DataFrame, outdir: Path) -> list[Path]:
    """Minimal bytes / median time against cols per backend/device and variant, the copy ceiling dotted and
    the tile (beyond which a fused kernel reads x twice) dashed."""
    rows = timed(with_ledger(frame))
    rows = rows[rows["minimal_bytes"] > 0]
    if rows.empty:
        return []
    scenario = str(rows["scenario"].iloc[0])
    rows = rows.assign(effective=rows["minimal_bytes"] / (rows["time_ms"] * 1e6))
    impls = sorted(rows["impl"].unique())
    colors = dict(zip(impls, sns.color_palette("colorblind", len(impls)), strict=False))
    cases = sorted(rows["case"].unique())[:MAX_COLS]
    rows = rows[rows["case"].isin(cases)]
    cols = rows["cols"]
    rows = dodged(rows, "cols")  # one width: the lines' points side by side at it
    dtypes = sorted(rows["dtype"].unique(), reverse=True)
    stepped = per_size(rows, "cols")

    def draw(data: pd.DataFrame, **_: object) -> None:
        ax = plt.gca()
        for (impl, variant), line in data.groupby(["impl", "variant"]):
            line = line.groupby("cols", as_index=False)["effective"].median()
            ls, marker = STYLE.get(variant, ("-.", "D"))
            ax.plot(line["cols"], line["effective"], ls=ls, marker=marker, color=colors[impl], ms=5)
        draw_ceilings(ax, data, "cols", stepped)
        _mark_tiles(ax, data)

    legend = {
        **{i: Line2D([], [], color=c, lw=2.5) for i, c in colors.items()},
        **{
            v: Line2D([], [], color="0.2", ls=STYLE.get(v, ("-.", "D"))[0], marker=STYLE.get(v, ("-.", "D"))[1])
            for v in sorted(rows["variant"].unique())
        },
        **ceiling_legend(rows, "cols", stepped),
        "tile: wider rows are read twice by fused": Line2D([], [], color="0.5", ls="--", lw=1.1),
    }
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.9):
        grid = sns.FacetGrid(
            rows,
            col="case",
            row="dtype" if len(dtypes) > 1 else None,
            col_order=cases,
            row_order=dtypes if len(dtypes) > 1 else None,
            height=3.3,
            aspect=1.3,
            margin_titles=True,
            sharey=True,
            despine=False,
        )
        grid.map_dataframe(draw)
        grid.set_titles(col_template="{col_name}", row_template="{row_name}")
        for ax in grid.axes.flat:
            count_axis(ax, cols)
            ax.set_ylim(bottom=0)
        scale = ", log scale" if cols.max() >= 4 * cols.min() else ""  # see `count_axis`
        grid.set_axis_labels(f"cols (elements per row{scale})", "effective bandwidth (GB/s)")
        grid.add_legend(legend_data=legend, title="")
        only = "" if len(dtypes) > 1 else f" [{dtypes[0]}]"
        title = f"{scenario}: effective bandwidth, minimal bytes (x once, y once) / median time{only}"
        grid.figure.suptitle(title, fontsize=12)  # wrapped and placed when saved (`fit`)
    return [save(grid.figure, Path(outdir) / f"effective_bandwidth_{scenario}.png")]  # laid out to fit
