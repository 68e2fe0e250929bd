"""decoder_layer's own chart: each variant's time per launch as one stacked horizontal bar, split by what ran.

The generic charts give each variant's total time; the layer's question is where that time goes. So each
variant's bar is stacked from its fusable ops' times (one colour per op family, add_rmsnorm's runs together,
the LM head's linear_cross_entropy one more where the case has the head), then the GEMMs' and the copies' (one
segment each), from the medians `suite.kit.layer.compose` kept in the row's `extra.steps_ms`. A variant without
step times (torch's `eager` and `compiled`, Liger's `library`, a GPU row) is one grey bar of its median time. A
black tick on every bar marks the variant's median launch: the steps' medians sum to less than a whole launch
(a launch held up in one step and another in the next), so a stacked bar alone would set a split variant short
against a grey one. One panel per case and device (every backend's bars in it), at most MAX_PANELS.
Reads tidy rows, never runs a kernel.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from scenarios.decoder_layer.chain import ALL_OPS, VARIANTS
from scenarios.decoder_layer.report import SCENARIO, case_name
from scenarios.decoder_layer.split import COPY, GEMM, family, kind, step_times
from suite.kit.chartkit import save
from suite.kit.tidy import chart_name, tidy, timed

ORDER = ("unfused", "fused", "compiled", "eager", "library", *(v for v in VARIANTS if v.startswith("fused_")))
"""Bars from the top: the two ends, torch's, Liger's, then each op fused alone; a variant not listed follows them."""
SEGMENTS = (*ALL_OPS, GEMM, COPY)
"""Each op family (the head's where a case has it: a case without it draws no such segment), GEMMs, copies."""
WHOLE = "whole layer (not split)"
LAUNCH = "median launch"
PANEL = ["params", "dtype", "device"]
"""A panel per case on one device: the hand-written backend's variants and torch's side by side."""
MAX_PANELS = 4


def segments(times: dict[str, float]) -> dict[str, float]:
    """A variant's step times summed per segment: each op family, all the GEMMs, all the copies."""
    out = dict.fromkeys(SEGMENTS, 0.0)
    for label, ms in times.items():
        out[family(label) or kind(label)] += ms
    return out


def _bars(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per variant and backend of a case: its segments' ms (WHOLE: a variant without step times),
    labelled by the variant, and by its backend too where two backends share a variant's name."""
    out = []
    shared = rows.groupby("variant")["backend"].nunique()
    rank = {v: i for i, v in enumerate(ORDER)}
    for (variant, backend), same in rows.groupby(["variant", "backend"]):
        times = step_times(same.iloc[0])
        split = segments(times) if times else {WHOLE: float(same["time_ms"].median())}
        label = f"{variant} ({backend})" if shared[variant] > 1 else variant
        launch = float(same["time_ms"].median())
        out.append({"label": label, "rank": (rank.get(variant, len(ORDER)), backend), LAUNCH: launch, **split})
    return pd.DataFrame(out).fillna(0.0).sort_values("rank", ignore_index=True)


def steps_chart(frame: pd.DataFrame, outdir: Path) -> list[Path]:
    """The stacked bars of every case (at most MAX_PANELS), one panel each; [] where nothing was timed."""
    data = timed(frame if "impl" in frame else tidy(frame))
    data = data[data["scenario"] == SCENARIO]
    if data.empty:
        return []
    cases = list(data.groupby(PANEL, sort=True))[:MAX_PANELS]
    colors = dict(zip(SEGMENTS, sns.color_palette("colorblind", len(SEGMENTS)), strict=True))
    colors[WHOLE] = (0.6, 0.6, 0.6)
    drawn: set[str] = set()
    heights = [0.5 + 0.35 * len(rows.groupby(["variant", "backend"])) for _, rows in cases]
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.9):
        fig, axes = plt.subplots(len(cases), 1, figsize=(8, 0.8 + sum(heights)), squeeze=False,
                                 gridspec_kw={"height_ratios": heights})  # fmt: skip
        for ax, (_, rows) in zip(axes[:, 0], cases, strict=True):
            bars = _bars(rows)
            left = pd.Series(0.0, index=bars.index)
            for segment in [*SEGMENTS, WHOLE]:
                if segment not in bars or not (bars[segment] > 0).any():
                    continue
                ax.barh(bars["label"], bars[segment], left=left, color=colors[segment], height=0.7)
                left += bars[segment]
                drawn.add(segment)
            ax.scatter(bars[LAUNCH], bars["label"], marker="|", s=250, linewidths=2, color="black", zorder=3)
            ax.invert_yaxis()  # the first variant on top
            first = rows.iloc[0]
            ax.set_title(f"{case_name(first)}, {first['dtype']}, {first['device']}", fontsize=10)
            whole = ", or the whole layer's" if WHOLE in bars and (bars[WHOLE] > 0).any() else ""
            ax.set_xlabel(f"ms per launch (each step's median inside the layer{whole})")
        handles: list = [Patch(color=colors[s], label=s) for s in [*SEGMENTS, WHOLE] if s in drawn]
        handles.append(Line2D([], [], marker="|", markersize=12, mew=2, color="black", ls="none", label=LAUNCH))
        fig.suptitle("decoder_layer: where each variant's time goes, op by op", fontsize=12)
        fig.tight_layout(rect=(0.0, 0.0, 0.78, 1.0))
        fig.legend(handles=handles, loc="center left", bbox_to_anchor=(0.78, 0.5), frameon=False)
    return [save(fig, outdir / chart_name("steps", SCENARIO))]
