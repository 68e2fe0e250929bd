"""The chain's own chart: speedup against chain length at the largest size, one line per chain family.

The generic charts put size on x; what the chain adds is how fusion's gain grows with the number of ops fused,
which the ledger predicts to be linear while the chain stays memory-bound. Chains with a transcendental op
(tanh, exp) can turn compute-bound and follow their own curve, so they form a family of their own rather than
being averaged with cheap chains of the same length. Reads tidy rows (suite.kit.tidy); never runs a kernel.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from scenarios.elementwise_chain.ops import TRANSCENDENTAL
from suite.kit.chartkit import (
    STYLE,
    comparisons,
    grid,
    impl_handles,
    measured_handles,
    palette,
    predicted,
    predicted_handles,
    ratio_axis,
    save,
    scenario,
)
from suite.kit.tidy import chart_name, json_dict, speedups, timed

FAMILIES = {"cheap ops only": ("-", None), "with tanh/exp": ("-.", "white")}
"""Line style and marker face per chain family on the speedup-vs-chain chart (None: the line's colour); a family
with one length is a lone point, so its hollow marker has to tell it apart."""


def chain_charts(rows: pd.DataFrame, outdir: Path) -> list[Path]:
    """The chain-length chart of one scenario's tidy rows, when chains of more than one length were timed."""
    pairs = speedups(rows)
    if pairs["order"].nunique() <= 1:
        return []
    colors = palette(sorted(timed(rows)["impl"].unique()))
    name = scenario(pairs)
    return [save(chain_chart(pairs, colors), Path(outdir) / chart_name("speedup_vs_chain", name))]


def chain_chart(pairs: pd.DataFrame, colors: dict[str, tuple]) -> plt.Figure:
    """Speedup against chain length at each implementation's largest size, measured vs predicted.

    One line per chain family (see FAMILIES): the cheap chains that extend one another form a line, the chains
    with transcendentals another, so two chains of one length but different cost are not averaged into a point.
    """
    largest = pairs.groupby("impl")["size"].transform("max")
    top = pairs[pairs["size"] == largest].assign(family=lambda d: d["params"].map(family))

    def draw(data: pd.DataFrame, **_: object) -> None:
        ax = plt.gca()
        for (impl, variant, fam), line in data.groupby(["impl", "variant", "family"]):
            line = line.groupby("order", as_index=False)[["speedup", "speedup_lo", "speedup_hi"]].median()
            _, marker = STYLE.get(variant, ("-.", "D"))
            ls, face = FAMILIES[fam]
            ax.plot(line["order"], line["speedup"], ls=ls, marker=marker, mfc=face, color=colors[impl], ms=6)
            ax.fill_between(line["order"], line["speedup_lo"], line["speedup_hi"], color=colors[impl], alpha=0.2)
        for _, same in data.groupby("family"):  # a prediction joins chains of one family, as the measured lines
            predicted(ax, same, "order", colors)

    at = {i: _sizes_text(top.loc[top["impl"] == i, ["size_axis", "size"]]) for i in colors}
    impls = {f"{i} ({at[i]})": h for i, h in impl_handles(colors).items() if i in set(top["impl"])}
    legend = {**impls, **measured_handles(pairs), **_family_handles(top["family"]), **predicted_handles(pairs)}
    title = f"{scenario(pairs)}: speedup of {comparisons(top)} vs chain length at the largest size"
    ylabel = "speedup (baseline time / variant time)"
    xlabel = "chain length (ops fused into one kernel)"
    return ratio_axis(grid(top, draw, title, ylabel, legend, x="order", col="dtype", row=None, xlabel=xlabel), top)


def family(params: str) -> str:
    """The chain family of a case from its params JSON: cheap ops only, or with a transcendental op."""
    ops = json_dict(params).get("ops", [])
    return "with tanh/exp" if TRANSCENDENTAL.intersection(ops) else "cheap ops only"


def _family_handles(families: pd.Series) -> dict[str, Line2D]:
    out = {}
    for fam, (ls, face) in FAMILIES.items():
        if fam in set(families):
            out[f"chain: {fam}"] = Line2D([], [], color="0.2", ls=ls, marker="o", mfc=face)
    return out


def _sizes_text(sizes: pd.DataFrame) -> str:
    if sizes.empty:
        return ""
    axis, size = sizes.iloc[0]
    exponent = round(math.log2(size))
    return f"{axis} = $2^{{{exponent}}}$" if size == 2**exponent else f"{axis} = {size:,.0f}"
