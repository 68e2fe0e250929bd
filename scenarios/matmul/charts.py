"""Matmul's own charts: traffic and time against tile size, GFLOP/s against the library, and a roofline.

The generic charts put size on x; for matmul the arithmetic is fixed and the question is what the tile does to
the traffic, and how far each variant stands from the library and from the measured roofs. All three read the
ledger columns and medians of the results table. A case here is (M, N, K, epilogue) without its tile:
unblocked and library rows do not depend on the tile, so where a sweep repeated them once per tile their
medians over the tiles are used. GFLOP/s is the ledger's FLOPs over the median time; arithmetic intensity is
FLOPs over the ledger's bytes under the device's store model. The roofline's roofs are both measured in the
run: the copy bandwidth (`ceiling_gbps`) and the best library rate on that device. Used by `Matmul.charts`;
reads tidy rows, never runs a kernel.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter, NullFormatter

from scenarios.matmul.config import VARIANTS_BY_EPILOGUE
from suite.kit.chartkit import DPI, STYLE, palette
from suite.kit.tidy import chart_name, dtype_rank, timed

STYLE_MM = STYLE
"""The variants drawn as in every other chart: a marker means one variant throughout a report."""
TILED = ("tiled", "unfused", "fused")
GREYS = {"cpu": "0.25", "cuda": "0.6"}
"""Ledger lines per device (its store model): dark for the CPU, light for CUDA."""
MAX_CASES = 4


def rows_of(frame: pd.DataFrame) -> pd.DataFrame:
    """Matmul rows with their params unpacked: case, tile label, GFLOP/s and arithmetic intensity.

    Only the variants a case compares are kept (`Matmul.variants_for`): a run that asked every variant of
    every case also has, say, `fused` without an epilogue, which is the tiled kernel under another name.
    """
    params = frame["params"].map(json.loads)
    out = frame[[v in VARIANTS_BY_EPILOGUE[p["epilogue"]] for v, p in zip(frame["variant"], params, strict=True)]]
    out = out.copy()
    params = out["params"].map(json.loads)
    out["case"] = [f"{p['m']}×{p['n']}×{p['k']}, {p['epilogue']}" for p in params]
    out["tile"] = ["×".join(map(str, p["tile"])) for p in params]
    out["tile_key"] = [(1 / p["tile"][0] + 1 / p["tile"][1], -p["tile"][2]) for p in params]
    out["gflops"] = out["flops_modeled"] / out["time_ms"] / 1e6
    out["intensity"] = out["flops_modeled"] / out["bytes_modeled"]
    return out


def per_case(rows: pd.DataFrame) -> pd.DataFrame:
    """Tile-independent variants (unblocked, library) reduced to one median row per case and implementation."""
    free = rows[~rows["variant"].isin(TILED)]
    keys = ["case", "dtype", "impl", "device", "variant"]
    return free.groupby(keys, as_index=False)[["time_ms", "gflops", "intensity", "bytes_modeled"]].median()


def _cases(rows: pd.DataFrame) -> list[str]:
    """Up to MAX_CASES cases, those with the most tiles (then the most arithmetic) first."""
    rank = rows.groupby("case").agg(tiles=("tile", "nunique"), flops=("flops_modeled", "max"))
    return rank.sort_values(["tiles", "flops"], ascending=False).index[:MAX_CASES].tolist()


def matmul_charts(frame: pd.DataFrame, outdir: Path) -> list[Path]:
    rows = rows_of(frame[frame["bytes_modeled"].notna()])
    done = rows_of(timed(frame))
    if done.empty:
        return []
    colors = palette(sorted(done["impl"].unique()))
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.9):
        figures = {"tile_sweep": tile_chart(rows, done, colors), "gflops": rate_chart(done, colors)}
        figures["roofline"] = roofline_chart(done, colors)
    written = []
    for kind, fig in figures.items():
        path = Path(outdir) / chart_name(kind, "matmul")
        fig.savefig(path, dpi=DPI, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written


def tile_chart(rows: pd.DataFrame, done: pd.DataFrame, colors: dict[str, tuple]) -> plt.Figure:
    """Top: the ledger's traffic per tile; bottom: median time per tile; dashed: the tile-free variants."""
    cases = [(c, d) for c in _cases(done) for d in sorted(done["dtype"].unique(), key=dtype_rank)]
    cases = [(c, d) for c, d in cases if ((done["case"] == c) & (done["dtype"] == d)).any()][:MAX_CASES]
    fig, axes = plt.subplots(2, len(cases), figsize=(4.2 * len(cases), 6.4), squeeze=False, sharex="col")
    for col, (case, dtype) in enumerate(cases):
        model, timing = (r[(r["case"] == case) & (r["dtype"] == dtype)] for r in (rows, done))
        model = model[model["device"].isin(timing["device"].unique())]
        tiles = model.drop_duplicates("tile").sort_values("tile_key", ascending=False)["tile"].tolist()
        x = {t: i for i, t in enumerate(tiles)}
        top, bottom = axes[0, col], axes[1, col]
        for (device, variant), g in model.groupby(["device", "variant"]):
            ls, marker = STYLE_MM.get(variant, ("-.", "D"))
            mb = g.groupby("tile")["bytes_modeled"].median() / 1e6
            if variant in TILED:
                top.plot([x[t] for t in mb.index], mb.values, ls=ls, marker=marker, color=GREYS.get(device, "0.3"))
            else:
                top.axhline(mb.median(), ls=ls, color=GREYS.get(device, "0.3"), lw=1.2)
                top.annotate(
                    f"{variant} ({device})",
                    (0.02, mb.median()),
                    xycoords=("axes fraction", "data"),
                    fontsize=7,
                    color="0.3",
                    va="bottom",
                )
        for (impl, variant), g in timing.groupby(["impl", "variant"]):
            ls, marker = STYLE_MM.get(variant, ("-.", "D"))
            t = g.groupby("tile")["time_ms"].median()
            if variant in TILED:
                pts = sorted((x[k], v) for k, v in t.items())
                bottom.plot(*zip(*pts, strict=True), ls=ls, marker=marker, color=colors[impl], ms=5)
            else:
                bottom.axhline(t.median(), ls=ls, color=colors[impl], lw=1.2)
        top.set_title(f"{case} [{dtype}]", fontsize=10)
        for ax in (top, bottom):
            ax.set_yscale("log")
            _plain(ax)
        bottom.set_xticks(range(len(tiles)), tiles, rotation=35, ha="right", fontsize=8)
        bottom.set_xlabel("tile BM×BN×BK (less traffic →)")
    axes[0, 0].set_ylabel("modeled traffic (MB)")
    axes[1, 0].set_ylabel("median time (ms)")
    fig.legend(handles=_handles(colors, done["variant"]), loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.suptitle("matmul: modeled traffic and measured time against tile size, at fixed arithmetic (2·M·N·K)")
    fig.tight_layout()
    return fig


def rate_chart(done: pd.DataFrame, colors: dict[str, tuple]) -> plt.Figure:
    """GFLOP/s of every hand variant and tile, bars per implementation, the libraries' rates as lines."""
    cases = _cases(done)
    dtypes = sorted(done["dtype"].unique(), key=dtype_rank)
    fig, axes = plt.subplots(len(dtypes), len(cases), figsize=(4.6 * len(cases), 3.6 * len(dtypes)), squeeze=False)
    free = per_case(done)
    for (r, dtype), (c, case) in ((rd, cc) for rd in enumerate(dtypes) for cc in enumerate(cases)):
        ax = axes[r, c]
        sub = done[(done["case"] == case) & (done["dtype"] == dtype) & done["variant"].isin(TILED)]
        hand = free[(free["case"] == case) & (free["dtype"] == dtype)]
        bars = pd.concat(
            [
                hand[hand["variant"] == "unblocked"].assign(label="unblocked"),
                sub.assign(label=sub["variant"] + " " + sub["tile"]),
            ]
        )
        bars = bars.groupby(["label", "impl"], as_index=False)["gflops"].median()
        labels = sorted(bars["label"].unique(), key=lambda s: (s != "unblocked", s))
        impls = sorted(bars["impl"].unique())
        width = 0.8 / max(len(impls), 1)
        for i, impl in enumerate(impls):
            g = bars[bars["impl"] == impl].set_index("label").reindex(labels)
            ax.bar(np.arange(len(labels)) + i * width, g["gflops"], width, color=colors[impl])
        for lib in hand[hand["variant"] == "library"].itertuples():
            ax.axhline(lib.gflops, color=colors[lib.impl], ls=":", lw=1.8)
            ax.annotate(
                f"library {lib.impl}: {lib.gflops:,.1f}",
                (0.02, lib.gflops),
                fontsize=7,
                xycoords=("axes fraction", "data"),
                va="bottom",
            )
        ax.set_xticks(np.arange(len(labels)) + 0.4 - width / 2, labels, rotation=35, ha="right", fontsize=8)
        ax.set_yscale("log")
        _plain(ax)
        ax.set_title(f"{case} [{dtype}]", fontsize=10)
    for ax in axes[:, 0]:
        ax.set_ylabel("GFLOP/s (2·M·N·K / median time)")
    handles = [plt.Line2D([], [], color=c, lw=6) for c in colors.values()]
    fig.legend(handles, list(colors), loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.suptitle("matmul: achieved GFLOP/s per variant and tile; dotted: the library on the same inputs")
    fig.tight_layout()
    return fig


def roofline_chart(done: pd.DataFrame, colors: dict[str, tuple]) -> plt.Figure:
    """Every (implementation, variant, tile) as a point; roofs: measured copy bandwidth and library rate."""
    panels = sorted(done.groupby(["device", "dtype"]).groups, key=lambda p: (p[0], dtype_rank(p[1])))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.4), squeeze=False)
    for ax, (device, dtype) in zip(axes[0], panels, strict=True):
        sub = done[(done["device"] == device) & (done["dtype"] == dtype)]
        sub = sub.assign(tile=sub["tile"].where(sub["variant"].isin(TILED), "–"))
        pts = sub.groupby(["impl", "variant", "tile", "case"], as_index=False)[["intensity", "gflops"]].median()
        for p in pts.itertuples():
            marker, hollow = STYLE_MM.get(p.variant, ("", "D"))[1], p.case.endswith("bias_gelu")
            face = "none" if hollow else colors[p.impl]
            ax.scatter(p.intensity, p.gflops, marker=marker, s=42, facecolors=face, edgecolors=colors[p.impl])
        span = np.geomspace(pts["intensity"].min() / 3, pts["intensity"].max() * 3, 100)
        bw = sub["ceiling_gbps"].median()
        lib = pts.loc[pts["variant"] == "library", "gflops"].max()
        if bw == bw:
            ax.plot(span, bw * span, color="0.25", ls=":", lw=1.5, label=f"copy bandwidth {bw:,.0f} GB/s")
        if lib == lib:
            ax.axhline(lib, color="0.25", ls="--", lw=1.2, label=f"best library {lib:,.1f} GFLOP/s")
        if bw == bw and lib == lib:
            ax.plot(span, np.minimum(bw * span, lib), color="0.1", lw=2.2, alpha=0.35)
        ax.set(
            xscale="log", yscale="log", title=f"{device} [{dtype}]", xlabel="arithmetic intensity (FLOP/byte, ledger)"
        )
        ax.set_ylim(pts["gflops"].min() / 3, max(pts["gflops"].max(), lib if lib == lib else 0) * 3)
        _plain(ax, "x")
        _plain(ax, "y")
        ax.legend(fontsize=7, loc="lower right")
    axes[0, 0].set_ylabel("achieved GFLOP/s")
    fig.legend(handles=_handles(colors, done["variant"]), loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.suptitle("matmul roofline: each variant and tile a point under the measured roofs (hollow: bias_gelu epilogue)")
    fig.tight_layout()
    return fig


def _plain(ax: plt.Axes, which: str = "y") -> None:
    """Log-axis ticks as plain numbers (20, not 2×10¹); on a short axis (< 20×) minor ticks at 2 and 5 too."""
    axis = ax.yaxis if which == "y" else ax.xaxis
    low, high = ax.get_ylim() if which == "y" else ax.get_xlim()
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    short = low > 0 and high / low < 20
    minor = FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "25" else "")
    axis.set_minor_formatter(minor if short else NullFormatter())


def _handles(colors: dict[str, tuple], variants: pd.Series) -> list[plt.Line2D]:
    out = [plt.Line2D([], [], color=c, lw=2.5, label=impl) for impl, c in colors.items()]
    for v in sorted(variants.unique()):
        ls, marker = STYLE_MM.get(v, ("-.", "D"))
        out.append(plt.Line2D([], [], color="0.2", ls=ls, marker=marker, label=v))
    return out
