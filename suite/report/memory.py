"""The report's "Memory" section and chart: fusion's second payoff, the peak memory each variant needs.

Every row carries the peak the ledger models from its live buffers (`peak_bytes_modeled`) and, where it ran
natively, the peak measured around one untimed call (`peak_bytes`, suite.run.peak_memory: the resident set's growth
on a CPU, the device memory in use on CUDA). The section lays them side by side per case with the memory verdict
against the same baseline as the time verdict; the chart draws peak memory against size, the variants side by
side, measured solid and modeled dashed, so a gap between them (an implementation that holds more than its
decomposition needs, a compiler that leaves an intermediate behind) shows at a glance.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from suite.kit.chartkit import grid, save, scenario
from suite.kit.markdown import details, table
from suite.kit.size_ticks import size_labels
from suite.kit.tidy import chart_name, fmt_size

MIB = 2**20
KIND = "memory"
CAPTION = (
    "Peak memory per size, variants side by side: measured (bars) and modeled from the ledger's live buffers (ticks)"
)
FOLD = 12


def has_memory(rows: pd.DataFrame) -> bool:
    return bool(rows["peak_bytes_modeled"].notna().any() or rows["peak_bytes"].notna().any())


def section(rows: pd.DataFrame) -> str | None:
    """Markdown for one scenario's tidy rows; None where no row has a peak, modeled or measured."""
    ok = rows[(rows["status"] == "ok") & (rows["peak_bytes_modeled"].notna() | rows["peak_bytes"].notna())]
    if ok.empty:
        return None
    body = []
    ordered = ok.sort_values(["dtype_rank", "series_rank", "size", "impl", "variant"])
    for r in ordered.itertuples():
        body.append(
            [
                r.dtype,
                r.series,
                fmt_size(r.size),
                r.impl,
                r.variant,
                _mib(r.peak_bytes_modeled),
                _mib(r.peak_bytes),
                _fit(r.peak_bytes, r.peak_bytes_modeled),
                _against(r),
            ]
        )
    head = [
        "dtype",
        "case",
        rows["size_axis"].iloc[0],
        "implementation",
        "variant",
        "peak modeled (MiB)",
        "peak measured (MiB)",
        "measured / modeled",
        "against the baseline",
    ]
    text = table(head, body)
    parts = [
        "### Memory",
        "The most memory each variant holds at once. Modeled: the ledger's live buffers (inputs and outputs "
        "throughout, each intermediate from the kernel that writes it to the last that reads it; for the "
        "compiler, the buffers its generated code allocates). Measured: around one untimed call on fresh "
        "buffers, the inputs' copies, the output and everything the implementation allocates (the resident "
        "set's growth on a CPU, device memory in use on CUDA). The ratio is the baseline's peak over the row's "
        "(above 1: less memory), measured where both were, else modeled; a verdict needs the saving beyond 5% "
        "of the baseline and 1 MiB.",
        _verdicts(ok),
        details(f"All {len(body)} rows", text) if len(body) > FOLD else text,
    ]
    return "\n\n".join(parts)


def _verdicts(ok: pd.DataFrame) -> str:
    judged = ok[ok["memory_verdict"] != ""]
    if judged.empty:
        return "No variant was compared with a baseline on memory."
    lines = []
    for (impl, variant, baseline), g in judged.groupby(["impl", "variant", "baseline"]):
        counts = g["memory_verdict"].value_counts()
        said = ", ".join(f"{counts[w]} {w}" for w in ("pays", "neutral", "loses") if w in counts)
        best = g.loc[g["memory_saved_mib"].idxmax()]
        lines.append(
            f"- {impl} {variant} against {baseline or 'its baseline'}: {said}; {_best(best)} "
            f"({best['series']}, {best['size_axis']} = {fmt_size(best['size'])})."
        )
    return "\n".join(lines)


def _best(row: pd.Series) -> str:
    """The row's saving in words: where even the best case holds more than its baseline, say so, not a
    "saving" below 1× of a negative size."""
    ratio, saved = float(row["memory_ratio"]), float(row["memory_saved_mib"])
    if saved < 0:
        return f"at best {1 / ratio:.2f}× the memory of its baseline, {-saved:,.1f} MiB more"
    return f"at most {ratio:.2f}× less memory, {saved:,.1f} MiB saved"


def _mib(value: float) -> str:
    return "" if pd.isna(value) else f"{value / MIB:,.1f}"


def _fit(measured: float, modeled: float) -> str:
    return "" if pd.isna(measured) or pd.isna(modeled) or not modeled else f"{measured / modeled:.2f}"


def _against(r: object) -> str:
    ratio = getattr(r, "memory_ratio", None)
    if ratio is None or pd.isna(ratio):
        return ""
    return f"{ratio:.2f}× {getattr(r, 'memory_verdict', '')} ({getattr(r, 'memory_saved_mib', 0):,.1f} MiB)"


def chart(rows: pd.DataFrame, outdir: Path) -> Path | None:
    """Peak memory per size, the variants side by side as bars (one facet per case): the bar is the measured
    peak (hatched where only the model is known), the black tick on it the modeled peak; None where no row has
    a peak."""
    peaks = rows[(rows["status"] == "ok") & (rows["peak_bytes_modeled"].notna() | rows["peak_bytes"].notna())]
    if peaks.empty:
        return None
    peaks = peaks.assign(bar=peaks["impl"] + " " + peaks["variant"])
    bars = sorted(peaks["bar"].unique())
    colors = dict(zip(bars, sns.color_palette("tab20", len(bars)), strict=True))
    width = 0.8 / len(bars)

    def draw(data: pd.DataFrame, **_: object) -> None:
        ax = plt.gca()
        sizes = sorted(data["size"].unique())
        for j, bar in enumerate(bars):
            for i, size in enumerate(sizes):
                hit = data[(data["bar"] == bar) & (data["size"] == size)]
                if hit.empty:
                    continue
                x = i - 0.4 + (j + 0.5) * width
                measured, modeled = hit["peak_bytes"].median(), hit["peak_bytes_modeled"].median()
                height = measured if pd.notna(measured) else modeled
                ax.bar(
                    x,
                    height / MIB,
                    width,
                    color=colors[bar],
                    hatch="" if pd.notna(measured) else "//",
                    edgecolor="white" if pd.notna(measured) else "0.4",
                )
                if pd.notna(modeled):
                    ax.plot([x - width / 2, x + width / 2], [modeled / MIB] * 2, color="black", lw=1.5)
        ax.set_xticks(range(len(sizes)), size_labels(sizes))

    legend = {bar: Patch(color=colors[bar]) for bar in bars}
    if peaks["peak_bytes_modeled"].notna().any():
        legend["modeled peak"] = Line2D([], [], color="black", lw=1.5)
    if peaks["peak_bytes"].isna().any():  # a bar drawn from the model alone, hatched
        legend["model only (not measured)"] = Patch(facecolor="white", edgecolor="0.4", hatch="//")
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.9):
        title = f"{scenario(peaks)}: peak memory, measured (bars) and modeled (ticks)"
        axis = rows["size_axis"].iloc[0]
        figure = grid(
            peaks.assign(slot=1),
            draw,
            title,
            "peak memory (MiB)",
            legend,
            x="slot",
            xlabel=f"problem size {axis}",
            xticks="drawn",
        ).figure
    return save(figure, Path(outdir) / chart_name(KIND, scenario(peaks)))
