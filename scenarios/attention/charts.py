"""Attention's own charts: TFLOP/s and ledger traffic (with each variant's footprint) against seq_len.

The generic charts show time and bandwidth; attention is judged by throughput, and its unfused variant's cost is
the L×L S and P it writes, reads and holds. TFLOP/s is the ledger's FLOPs (the two matmuls) over the median
time, so fused, unfused and library are measured against the same work; footprints come from the scenario's
model (`Attention.footprint_bytes`, the scenario the chart is drawn for). Used by `Attention.charts`; reads tidy rows, never runs a kernel.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D

from suite.core.scenario import Scenario
from suite.kit.chartkit import STYLE, count_axis, plain_log_y, save
from suite.kit.size_ticks import dodged
from suite.kit.tidy import json_dict, timed

SCENARIO = "attention"
VARIANTS = ("fused", "unfused", "library", "eager", "compiled")
"""The order variants are drawn in; one not listed here (a plug-in's) follows them."""
MAX_COLS = 4
FOOTPRINT_SKIP = "unfused needs "
"""How a row skipped by the footprint guard (suite.run.footprint) starts its reason."""


def _case_labels(data: pd.DataFrame) -> pd.Series:
    """Each row's case without seq_len, naming only the parameters that vary in this table ('causal=True')."""
    parsed = data["params"].map(json_dict)
    keys = sorted({k for p in parsed for k in p} - {"seq_len"})
    varying = [k for k in keys if len({json.dumps(p.get(k)) for p in parsed}) > 1]
    shown = varying or [k for k in keys if k in ("heads", "head_dim", "causal")]
    return parsed.map(lambda p: ", ".join(f"{k}={p.get(k)}" for k in shown) or "all")


def prepare(frame: pd.DataFrame) -> pd.DataFrame:
    data = frame[frame["scenario"] == SCENARIO].copy()
    data["case"] = _case_labels(data) if len(data) else []
    data["seq_len"] = data["params"].map(lambda t: json_dict(t).get("seq_len", math.nan)).astype(float)
    return data


def _facets(
    data: pd.DataFrame,
    draw: Callable[[pd.DataFrame], None],
    title: str,
    ylabel: str,
    legend: dict,
    row: str,
    dodge: tuple[str, ...] = ("impl", "variant"),
) -> plt.Figure:
    """Cases in columns (at most MAX_COLS), `row` in rows; the look of suite.report.plots (whitegrid, log2 x; one
    seq_len a category, the lines told apart by `dodge` set side by side at it)."""
    cases = sorted(data["case"].unique())[:MAX_COLS]
    data = data[data["case"].isin(cases)]
    values = data["seq_len"]
    data = dodged(data, "seq_len", dodge)  # one seq_len: the lines' points side by side at it
    rows = sorted(data[row].unique())
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.9):
        grid = sns.FacetGrid(
            data,
            col="case",
            row=row if len(rows) > 1 else None,
            col_order=cases,
            row_order=rows if len(rows) > 1 else None,
            height=3.3,
            aspect=1.3,
            margin_titles=True,
            sharey=True,
            despine=False,
        )
        grid.map_dataframe(lambda data, **_: draw(data))
        grid.set_titles(col_template="{col_name}", row_template="{row_name}")
        for ax in grid.axes.flat:
            count_axis(ax, values)
            ax.set_yscale("log")
            plain_log_y(ax)
        grid.set_axis_labels("seq_len (keys = queries per head)", ylabel)
        grid.add_legend(legend_data=legend, title="")
        only = "" if len(rows) > 1 or "[" in title else f" [{', '.join(map(str, rows))}]"
        grid.figure.suptitle(title + only, fontsize=12)  # wrapped and placed when saved (`fit`)
    return grid.figure


def _variant_handles(variants: list[str], color: str = "0.2") -> dict[str, Line2D]:
    return {
        v: Line2D([], [], color=color, ls=STYLE.get(v, ("-.", "D"))[0], marker=STYLE.get(v, ("-.", "D"))[1])
        for v in variants
    }


def tflops_chart(frame: pd.DataFrame, outdir: Path) -> list[Path]:
    """TFLOP/s (ledger FLOPs / median time) against seq_len, per backend/device and variant."""
    rows = timed(prepare(frame))
    if rows.empty:
        return []
    rows = rows.assign(tflops=rows["flops_modeled"] / (rows["time_ms"] * 1e9))
    impls = sorted(rows["impl"].unique())
    colors = dict(zip(impls, sns.color_palette("colorblind", len(impls)), strict=False))

    def draw(data: pd.DataFrame) -> None:
        ax = plt.gca()
        for (impl, variant), line in data.groupby(["impl", "variant"]):
            line = line.groupby("seq_len", as_index=False)["tflops"].median()
            ls, marker = _style(variant)
            ax.plot(line["seq_len"], line["tflops"], ls=ls, marker=marker, color=colors[impl], ms=5)

    legend = {
        **{i: Line2D([], [], color=c, lw=2.5) for i, c in colors.items()},
        **_variant_handles(sorted(rows["variant"].unique())),
    }
    title = "attention: throughput, 4·B·H·L²·d FLOPs (half under the mask) / median time"
    fig = _facets(rows, draw, title, "TFLOP/s (log scale)", legend, row="dtype")
    return [save(fig, Path(outdir) / f"tflops_{SCENARIO}.png")]


def _footprint(scn: Scenario, params: dict, dtype: str, variant: str) -> float:
    try:
        return float(scn.footprint_bytes(params, dtype, variant))
    except (KeyError, TypeError, ValueError):  # a table written by another version of the scenario
        return math.nan


def _style(variant: str) -> tuple[str, str]:
    """Line style and marker of a variant; a plug-in's own variant gets a dash-dot line."""
    return STYLE.get(variant, ("-.", "D"))


def traffic_chart(frame: pd.DataFrame, outdir: Path, scn: Scenario) -> list[Path]:
    """Ledger bytes moved per run (solid) and bytes held (footprint, thin) against seq_len, per variant."""
    data = prepare(frame).dropna(subset=["bytes_modeled", "seq_len"])
    data = data[data["store_model"] != ""]
    if data.empty:
        return []
    dtype = max(data["dtype"].unique(), key=lambda d: np.dtype(d).itemsize)  # bytes scale with the itemsize
    data = data[data["dtype"] == dtype]
    held = [_footprint(scn, json_dict(p), dtype, v) for p, v in zip(data["params"], data["variant"], strict=True)]
    data = data.assign(
        moved_gb=data["bytes_modeled"] / 1e9,
        held_gb=[h / 1e9 for h in held],
        model=data["device"] + " (" + data["store_model"] + ")",
    )
    present = set(data["variant"])
    variants = [v for v in VARIANTS if v in present] + sorted(present - set(VARIANTS))
    colors = dict(zip(variants, sns.color_palette("deep", len(variants)), strict=False))

    def draw(sub: pd.DataFrame) -> None:
        ax = plt.gca()
        for variant, line in sub.groupby("variant"):
            line = line.groupby("seq_len", as_index=False)[["moved_gb", "held_gb"]].first()
            ls, marker = _style(variant)
            ax.plot(line["seq_len"], line["moved_gb"], ls=ls, marker=marker, color=colors[variant], ms=5)
            if variant != "library":  # the library's workspace is not modeled
                ax.plot(line["seq_len"], line["held_gb"], ls=(0, (1, 2)), color=colors[variant], lw=1.2)
        for length in sub.loc[sub["reason"].str.startswith(FOOTPRINT_SKIP), "seq_len"].unique()[:1]:
            ax.axvline(length, color="0.3", ls="--", lw=1)
            ax.annotate(" unfused skipped: too big", (length, 0.95), xycoords=("data", "axes fraction"), fontsize=8)

    legend = {
        f"{v}: bytes moved": Line2D([], [], color=c, ls=_style(v)[0], marker=_style(v)[1]) for v, c in colors.items()
    }
    legend |= {f"{v}: footprint": Line2D([], [], color=c, ls=(0, (1, 2))) for v, c in colors.items() if v != "library"}
    title = f"attention: ledger traffic per run and memory footprint per variant [{dtype}]"
    fig = _facets(data, draw, title, "GB (log scale)", legend, row="model", dodge=("variant",))
    return [save(fig, Path(outdir) / f"traffic_{SCENARIO}.png")]
