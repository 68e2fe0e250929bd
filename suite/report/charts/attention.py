"""Attention's own charts and report section: TFLOP/s and ledger traffic against seq_len, and where unfused
stops fitting in memory or stops competing with the fused kernel and the library's.

Registered with `suite.report.extras`; every function reads the tidy rows of the attention scenario and never runs a
kernel. TFLOP/s is the ledger's FLOPs (the two matmuls) over the median time, so fused, unfused and library
are measured against the same work. Footprints come from the scenario's model (`footprint_bytes`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from suite.report.extras import charts_for, section_for
from suite.report.frames import fmt_size, json_dict, timed
from suite.report.markdown import table
from suite.report.plots import DPI, STYLE

SCENARIO = "attention"
VARIANTS = ("fused", "unfused", "library")
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


def _prepare(frame: pd.DataFrame) -> pd.DataFrame:
    data = frame[frame["scenario"] == SCENARIO].copy()
    data["case"] = _case_labels(data) if len(data) else []
    data["seq_len"] = data["params"].map(lambda t: json_dict(t).get("seq_len", math.nan)).astype(float)
    return data


def _log2_x(ax: plt.Axes, values: pd.Series) -> None:
    ax.set_xscale("log", base=2)
    span = math.log2(max(values.max(), 2)) - math.log2(max(values.min(), 1))
    ax.xaxis.set_major_locator(LogLocator(base=4 if span >= 8 else 2))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _facets(data: pd.DataFrame, draw: Callable[[pd.DataFrame], None], title: str, ylabel: str, legend: dict,
            row: str) -> plt.Figure:  # fmt: skip
    """Cases in columns (at most MAX_COLS), `row` in rows; the look of suite.report.plots (whitegrid, log2 x)."""
    cases = sorted(data["case"].unique())[:MAX_COLS]
    data = data[data["case"].isin(cases)]
    rows = sorted(data[row].unique())
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.9):
        grid = sns.FacetGrid(data, col="case", row=row if len(rows) > 1 else None, col_order=cases,
                             row_order=rows if len(rows) > 1 else None, height=3.3, aspect=1.3,
                             margin_titles=True, sharey=True, despine=False)  # fmt: skip
        grid.map_dataframe(lambda data, **_: draw(data))
        grid.set_titles(col_template="{col_name}", row_template="{row_name}")
        for ax in grid.axes.flat:
            _log2_x(ax, data["seq_len"])
            ax.set_yscale("log")
        grid.set_axis_labels("seq_len (keys = queries per head)", ylabel)
        grid.add_legend(legend_data=legend, title="")
        only = "" if len(rows) > 1 or "[" in title else f" [{', '.join(map(str, rows))}]"
        grid.figure.suptitle(title + only, y=1.0, va="bottom", fontsize=12)
    return grid.figure


def _variant_handles(variants: list[str], color: str = "0.2") -> dict[str, Line2D]:
    return {v: Line2D([], [], color=color, ls=STYLE.get(v, ("-.", "D"))[0], marker=STYLE.get(v, ("-.", "D"))[1])
            for v in variants}  # fmt: skip


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path


@charts_for(SCENARIO)
def tflops_chart(frame: pd.DataFrame, outdir: Path) -> list[Path]:
    """TFLOP/s (ledger FLOPs / median time) against seq_len, per backend/device and variant."""
    rows = timed(_prepare(frame))
    if rows.empty:
        return []
    rows = rows.assign(tflops=rows["flops_modeled"] / (rows["time_ms"] * 1e9))
    impls = sorted(rows["impl"].unique())
    colors = dict(zip(impls, sns.color_palette("colorblind", len(impls)), strict=False))

    def draw(data: pd.DataFrame) -> None:
        ax = plt.gca()
        for (impl, variant), line in data.groupby(["impl", "variant"]):
            line = line.groupby("seq_len", as_index=False)["tflops"].median()
            ls, marker = STYLE.get(variant, ("-.", "D"))
            ax.plot(line["seq_len"], line["tflops"], ls=ls, marker=marker, color=colors[impl], ms=5)

    legend = {**{i: Line2D([], [], color=c, lw=2.5) for i, c in colors.items()},
              **_variant_handles(sorted(rows["variant"].unique()))}  # fmt: skip
    title = "attention: throughput, 4·B·H·L²·d FLOPs (half under the mask) / median time"
    fig = _facets(rows, draw, title, "TFLOP/s (log scale)", legend, row="dtype")
    return [_save(fig, Path(outdir) / f"tflops_{SCENARIO}.png")]


def _footprint(scn: object, params: dict, dtype: str, variant: str) -> float:
    try:
        return float(scn.footprint_bytes(params, dtype, variant))  # type: ignore[attr-defined]
    except (KeyError, TypeError, ValueError):  # a table written by another version of the scenario
        return math.nan


@charts_for(SCENARIO)
def traffic_chart(frame: pd.DataFrame, outdir: Path) -> list[Path]:
    """Ledger bytes moved per run (solid) and bytes held (footprint, thin) against seq_len, per variant."""
    from suite.core.scenario import get

    data = _prepare(frame).dropna(subset=["bytes_modeled", "seq_len"])
    data = data[data["store_model"] != ""]
    if data.empty:
        return []
    dtype = max(data["dtype"].unique(), key=lambda d: np.dtype(d).itemsize)  # bytes scale with the itemsize
    data = data[data["dtype"] == dtype]
    scn = get(SCENARIO)
    held = [_footprint(scn, json_dict(p), dtype, v) for p, v in zip(data["params"], data["variant"], strict=True)]
    data = data.assign(moved_gb=data["bytes_modeled"] / 1e9, held_gb=[h / 1e9 for h in held],
                       model=data["device"] + " (" + data["store_model"] + ")")  # fmt: skip
    variants = [v for v in VARIANTS if v in set(data["variant"])]
    colors = dict(zip(variants, sns.color_palette("deep", len(variants)), strict=False))

    def draw(sub: pd.DataFrame) -> None:
        ax = plt.gca()
        for variant, line in sub.groupby("variant"):
            line = line.groupby("seq_len", as_index=False)[["moved_gb", "held_gb"]].first()
            ls, marker = STYLE.get(variant, ("-.", "D"))
            ax.plot(line["seq_len"], line["moved_gb"], ls=ls, marker=marker, color=colors[variant], ms=5)
            if variant != "library":  # the library's workspace is not modeled
                ax.plot(line["seq_len"], line["held_gb"], ls=(0, (1, 2)), color=colors[variant], lw=1.2)
        for length in sub.loc[sub["reason"].str.startswith(FOOTPRINT_SKIP), "seq_len"].unique()[:1]:
            ax.axvline(length, color="0.3", ls="--", lw=1)
            ax.annotate(" unfused skipped: too big", (length, 0.95), xycoords=("data", "axes fraction"), fontsize=8)

    legend = {
        f"{v}: bytes moved": Line2D([], [], color=c, ls=STYLE[v][0], marker=STYLE[v][1]) for v, c in colors.items()
    }
    legend |= {f"{v}: footprint": Line2D([], [], color=c, ls=(0, (1, 2))) for v, c in colors.items() if v != "library"}
    title = f"attention: ledger traffic per run and memory footprint per variant [{dtype}]"
    fig = _facets(data, draw, title, "GB (log scale)", legend, row="model")
    return [_save(fig, Path(outdir) / f"traffic_{SCENARIO}.png")]


def _slower_from(line: pd.DataFrame) -> str:
    """The smallest seq_len from which unfused is slower than fused at every larger size."""
    line = line.sort_values("seq_len")
    slower = (line["unfused"] > line["fused"]).tolist()
    if not slower[-1]:
        return f"never (up to {fmt_size(line['seq_len'].iloc[-1])})"
    first = len(slower)
    while first > 0 and slower[first - 1]:
        first -= 1
    return f"seq_len ≥ {fmt_size(line['seq_len'].iloc[first])}"


def _stops_fitting(rows: pd.DataFrame) -> str:
    """The smallest seq_len whose unfused row the footprint guard skipped, with its reason."""
    skipped = rows[(rows["variant"] == "unfused") & rows["reason"].str.startswith(FOOTPRINT_SKIP)]
    if not skipped.empty:
        first = skipped.sort_values("seq_len").iloc[0]
        return f"seq_len = {fmt_size(first['seq_len'])} ({first['reason']})"
    ran = rows.loc[(rows["variant"] == "unfused") & (rows["status"] == "ok"), "seq_len"]
    return f"fits up to {fmt_size(ran.max())}" if len(ran) else "–"


def _against_library(line: pd.DataFrame, library: pd.Series) -> str:
    """Fused time over the library's (same device, case, dtype) at the largest seq_len both ran."""
    both = line.dropna(subset=["fused"]).join(library.rename("library"), on="seq_len").dropna(subset=["library"])
    if both.empty:
        return "–"
    last = both.iloc[-1]
    return f"{last['fused'] / last['library']:.2f}× at seq_len {fmt_size(last['seq_len'])}"


@section_for(SCENARIO)
def fitting_section(frame: pd.DataFrame) -> str:
    """Per case, dtype and hand-written backend: where unfused stops competing and stops fitting, and how the
    fused kernel compares with the library's on the same device."""
    data = _prepare(frame)
    if data.empty:
        return ""
    keys = ["case", "dtype", "device"]
    med = timed(data).groupby([*keys, "impl", "variant", "seq_len"], as_index=False)["time_ms"].median()
    body = []
    for (case, dtype, device, impl), rows in data.groupby([*keys, "impl"]):
        mine = med[(med["case"] == case) & (med["dtype"] == dtype) & (med["device"] == device)]
        times = mine[mine["impl"] == impl].pivot_table(index="seq_len", columns="variant", values="time_ms")
        skipped = rows["reason"].str.startswith(FOOTPRINT_SKIP).any()
        if not {"fused", "unfused"} & set(rows["variant"]) or (times.empty and not skipped):
            continue  # the library's own rows, or emulated and compile-only ones: numerics, no times
        times = times.reset_index()
        paired = times.dropna(subset=["fused", "unfused"]) if {"fused", "unfused"} <= set(times) else times[:0]
        library = mine[mine["variant"] == "library"].groupby("seq_len")["time_ms"].min()
        body.append([case, dtype, impl, _slower_from(paired) if len(paired) else "not timed", _stops_fitting(rows),
                     _against_library(times, library) if "fused" in times else "–"])  # fmt: skip
    if not body:
        return ""
    head = ["case", "dtype", "backend/device", "unfused slower than fused from", "unfused stops fitting at",
            "fused time / library time (same device)"]  # fmt: skip
    intro = (
        "The unfused variant writes and reads S and P, L×L per head each, and holds them: its traffic and "
        "footprint grow as seq_len², the fused kernel's as seq_len (plus K and V re-read once per query tile). "
        "A case whose unfused footprint exceeds the device's free memory is skipped before it runs."
    )
    return "### Where unfused stops fitting or competing\n\n" + intro + "\n\n" + table(head, body)
