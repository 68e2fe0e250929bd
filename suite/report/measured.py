"""The report's measured-traffic section: the DRAM bytes Nsight Compute counted, beside the bytes the ledger models.

With `profile=ncu` (suite.run.profile) every CUDA row timed natively carries `bytes_measured`, the DRAM bytes all
of a variant's kernels read and wrote in one launch, and `ledger_residual` = measured / modeled - 1. Within ±10%
the ledger's account of the variant holds on that GPU; beyond it the row is flagged: below, traffic the model
counts never reached DRAM (an intermediate the L2 kept); above, traffic the model leaves out (re-reads, spills,
a library's workspace). The chart sets every variant's measured bytes against its modeled bytes about the y = x
line, every variant of the family included (matmul's unblocked and tiled beside fused and unfused). Rows ncu
could not measure are listed with the reason their `extra["ncu"]` recorded.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from suite.kit.chartkit import STYLE, grid, impl_handles, palette, save, scenario, variant_handles
from suite.kit.markdown import details, table
from suite.kit.tidy import chart_name, fmt_size, json_dict

FLAG = 0.10
"""|ledger_residual| above this flags a row: the ledger is more than 10% off what the GPU moved."""
KIND = "measured_bytes"
CAPTION = "DRAM bytes measured by Nsight Compute against the ledger's model (line: y = x; band: ±10%)"
HEAD = ["case", "size", "dtype", "backend/device", "variant", "modeled bytes", "measured bytes", "residual"]


def measured(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows with bytes_measured, its columns numeric, with `residual` (ledger_residual, or worked out from
    the bytes where a table lacks it) and `flagged`."""
    out = rows.copy()
    for col in ("bytes_measured", "bytes_modeled", "ledger_residual"):
        out[col] = pd.to_numeric(out[col], errors="coerce") if col in out else float("nan")
    out = out[out["bytes_measured"].notna()]
    worked_out = out["bytes_measured"] / out["bytes_modeled"].where(out["bytes_modeled"] > 0) - 1.0
    out["residual"] = out["ledger_residual"].fillna(worked_out)
    out["flagged"] = flagged(out["residual"])
    return out


def flagged(residual: pd.Series) -> pd.Series:
    """|residual| > FLAG, compared at 1e-9 so that exactly 10% (1100 bytes for 1000 modeled) is not flagged."""
    return residual.abs().round(9) > FLAG


def section(rows: pd.DataFrame, charts: list[Path], outdir: Path) -> str:
    """Markdown for one scenario's rows: flagged rows, the chart (drawn beside the other charts), every
    measured row folded, and why ncu measured nothing where it did not; "" when profile=ncu never ran."""
    found, failed = measured(rows), failures(rows)
    if found.empty and failed.empty:
        return ""
    parts = ["### Measured DRAM traffic (Nsight Compute)"]
    if not found.empty:
        bad = found[found["flagged"]]
        parts.append(
            f"{len(found)} rows were rerun once under Nsight Compute (`profile=ncu`): measured is the DRAM "
            "bytes read and written by all of a variant's kernels in one launch, modeled the ledger's "
            f"bytes_modeled. More than {FLAG:.0%} off the ledger: {len(bad)} of {len(found)}"
            + (":" if len(bad) else ".")
        )
        if len(bad):
            parts.append(table(HEAD, [_cells(r) for r in _sorted(bad).itertuples()]))
        if (path := chart(found, _chart_dir(charts, outdir))) is not None:
            parts.append(f"![{CAPTION}]({Path(os.path.relpath(path, outdir)).as_posix()})")
        body = [[*_cells(r), *_split(r.extra)] for r in _sorted(found).itertuples()]
        parts.append(details(f"Every measured row ({len(found)})", table([*HEAD, "read", "written"], body)))
    if not failed.empty:
        parts.append(f"Nsight Compute measured nothing for {len(failed)} rows (their timings stand):")
        reasons = [
            [reason, str(len(g)), ", ".join(sorted(set(g["impl"] + " " + g["variant"])))]
            for reason, g in failed.groupby("ncu")
        ]
        parts.append(table(["reason", "rows", "implementations"], reasons))
    return "\n\n".join(parts)


def failures(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows whose extra["ncu"] is a reason (a string) rather than what ncu measured, with column `ncu`."""
    if "extra" not in rows:
        return rows.iloc[0:0].assign(ncu="")
    said = [json_dict(text).get("ncu") for text in rows["extra"]]
    reasons = pd.Series([v if isinstance(v, str) else None for v in said], index=rows.index, dtype=object)
    keep = reasons.notna().to_numpy()
    return rows[keep].assign(ncu=reasons[keep].to_numpy())  # plain values: a Series would grow an empty frame


def chart(found: pd.DataFrame, outdir: Path) -> Path | None:
    """Measured against modeled bytes, log-log, one facet per dtype: hue per implementation, marker per variant,
    the y = x line and its ±10% band, flagged rows ringed; None when no measured row has modeled bytes."""
    data = found[found["bytes_modeled"] > 0]
    if data.empty:
        return None
    colors = palette(sorted(data["impl"].unique()))
    low = min(data["bytes_modeled"].min(), data["bytes_measured"].min()) / 1.5
    high = max(data["bytes_modeled"].max(), data["bytes_measured"].max()) * 1.5

    def draw(data: pd.DataFrame, **_: object) -> None:
        ax = plt.gca()
        ax.fill_between(
            [low, high],
            [low * (1 - FLAG), high * (1 - FLAG)],
            [low * (1 + FLAG), high * (1 + FLAG)],
            color="0.5",
            alpha=0.18,
            lw=0,
        )
        ax.plot([low, high], [low, high], color="0.1", lw=0.9)
        for (impl, variant), points in data.groupby(["impl", "variant"]):
            marker = STYLE.get(variant, ("-.", "D"))[1]
            ax.scatter(
                points["bytes_modeled"], points["bytes_measured"], color=colors[impl], marker=marker, s=36, zorder=3
            )
        off = data[data["flagged"]]
        ax.scatter(
            off["bytes_modeled"],
            off["bytes_measured"],
            facecolors="none",
            edgecolors="crimson",
            s=150,
            lw=1.2,
            zorder=4,
        )

    legend = {**impl_handles(colors), **_markers(data["variant"])}
    legend["y = x (measured = modeled)"] = Line2D([], [], color="0.1", lw=0.9)
    legend[f"±{FLAG:.0%}"] = Patch(color="0.5", alpha=0.18)
    legend[f"flagged: |residual| > {FLAG:.0%}"] = Line2D([], [], ls="", marker="o", ms=10, mfc="none", mec="crimson")
    title = f"{scenario(data)}: DRAM bytes measured by Nsight Compute against the ledger's model"
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.9):
        facets = grid(
            data,
            draw,
            title,
            "measured DRAM bytes (ncu, log)",
            legend,
            x="bytes_modeled",
            col="dtype",
            row=None,
            xlabel="modeled bytes (ledger, log)",
            xticks="drawn",
        )
        for ax in facets.axes.flat:
            ax.set_xscale("log")  # bytes span decades: a log10 axis, its default ticks (grid's is log2)
            ax.set_yscale("log")
            ax.set_xlim(low, high)
            ax.set_ylim(low, high)
        outdir.mkdir(parents=True, exist_ok=True)
        return save(facets.figure, outdir / chart_name(KIND, scenario(data)))


def _markers(variants: pd.Series) -> dict[str, Line2D]:
    """The variant handles as markers only: the chart draws points, not lines."""
    return {v: Line2D([], [], ls="", marker=h.get_marker(), color="0.2") for v, h in variant_handles(variants).items()}


def _chart_dir(charts: list[Path], outdir: Path) -> Path:
    """Beside the run's other charts (a merged report keeps one folder per label), else outdir/charts."""
    return charts[0].parent if charts else outdir / "charts"


def _sorted(rows: pd.DataFrame) -> pd.DataFrame:
    return rows.sort_values(["series_rank", "size", "dtype_rank", "impl", "variant"])


def _cells(r: Any) -> list[str]:
    residual = "" if pd.isna(r.residual) else f"{r.residual:+.1%}" + (" (flagged)" if r.flagged else "")
    return [
        r.series,
        fmt_size(r.size),
        r.dtype,
        r.impl,
        r.variant,
        _bytes(r.bytes_modeled),
        _bytes(r.bytes_measured),
        residual,
    ]


def _split(extra: str) -> list[str]:
    """DRAM bytes read and written, as ncu counted them (`extra["ncu"]`)."""
    found = json_dict(extra).get("ncu")
    found = found if isinstance(found, dict) else {}
    return [_bytes(found.get("dram_read_bytes")), _bytes(found.get("dram_write_bytes"))]


def _bytes(value: object) -> str:
    return "" if value is None or pd.isna(value) else f"{int(value):,}"
