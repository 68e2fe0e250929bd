"""The chart against the compiler: every timed variant's time over the compiled variant's on the same case.

The compiled row (the unfused decomposition through the compiler) is what a user gets without writing a kernel,
so it is the line every hand-written kernel has to get under: below 1 a variant is faster than the compiler.
The reference is whichever backend provides the `compiled` variant on that device; its own rows are the line at
1. Plots read results; they never run kernels.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from suite.kit.chartkit import STYLE, grid, impl_handles, ratio_axis, scenario, variant_handles

REFERENCE = "compiled"
"""The variant every other one is divided by."""
KEYS = ["scenario", "params", "dtype", "device"]
"""A variant is compared with the reference of the same case, dtype and device."""


def normalised(rows: pd.DataFrame) -> pd.DataFrame:
    """Timed rows other than the reference, with ratio (time / the reference's median time) and its band
    (the row's quartiles over the same median); rows without a reference on their case are dropped."""
    ref = rows[rows["variant"] == REFERENCE].groupby(KEYS)["time_ms"].median().rename("ref_ms")
    out = rows[rows["variant"] != REFERENCE].join(ref, on=KEYS, how="inner")
    out["ratio"] = out["time_ms"] / out["ref_ms"]
    out["ratio_lo"] = (out["time_q1_ms"] / out["ref_ms"]).fillna(out["ratio"])
    out["ratio_hi"] = (out["time_q3_ms"] / out["ref_ms"]).fillna(out["ratio"])
    return out


def rival_chart(rows: pd.DataFrame, colors: dict[str, tuple]) -> plt.Figure | None:
    """Time over the compiler's against size, one facet per case, hue per implementation, style per variant;
    None when no timed row shares a case with a compiled one."""
    ratios = normalised(rows)
    if ratios.empty:
        return None

    def draw(data: pd.DataFrame, **_: object) -> None:
        ax = plt.gca()
        for (impl, variant), line in data.groupby(["impl", "variant"]):
            line = line.groupby("size", as_index=False)[["ratio", "ratio_lo", "ratio_hi"]].median()
            ls, marker = STYLE.get(variant, ("-.", "D"))
            ax.plot(line["size"], line["ratio"], ls=ls, marker=marker, color=colors[impl], ms=5)
            ax.fill_between(line["size"], line["ratio_lo"], line["ratio_hi"], color=colors[impl], alpha=0.15)
        ax.axhline(1.0, color="0.1", lw=1.2)
        ax.annotate(
            "compiler",
            (0.99, 1.0),
            xycoords=("axes fraction", "data"),
            xytext=(0, 3),
            textcoords="offset points",
            ha="right",
            va="bottom",
            fontsize=8,
            color="0.1",
        )

    shown = {impl: c for impl, c in colors.items() if impl in set(ratios["impl"])}
    legend = {**impl_handles(shown), **variant_handles(ratios["variant"])}
    legend[f"1 = {REFERENCE} (the compiler)"] = Line2D([], [], color="0.1", lw=1.2)
    title = f"{scenario(ratios)}: time over the {REFERENCE} variant's (same case, dtype, device; below 1: faster)"
    facets = grid(ratios, draw, title, f"time / {REFERENCE} time (log)", legend)
    bounds = ratios[["ratio_lo", "ratio_hi", "ratio"]].set_axis(["speedup_lo", "speedup_hi", "predicted"], axis=1)
    return ratio_axis(facets, bounds)  # the speedup charts' log2 axis, its bounds taken from the ratios
