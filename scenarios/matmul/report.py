"""Matmul's report section: what tiling bought, what fusing the epilogue bought, how far a library still is.

The generic verdict pairs each variant with its baseline at one tile; a tile sweep asks which tile was best and
how close the best hand kernel came to the library's rate on the same inputs. Rates are the ledger's FLOPs over
the median time (see `charts.rows_of`). Used by `Matmul.report_sections`; reads tidy rows, never runs a kernel.
"""

from __future__ import annotations

import pandas as pd

from scenarios.matmul.charts import TILED, per_case, rows_of
from suite.kit.markdown import table
from suite.kit.tidy import dtype_rank, fmt_x, timed


def matmul_section(frame: pd.DataFrame) -> str:
    """What tiling bought, what fusing the epilogue bought, and how far the hand kernels stand from a library."""
    done = rows_of(timed(frame))
    if done.empty:
        return "### Tiling\n\nNothing was timed natively: the ledger below still gives each variant's traffic."
    free = per_case(done)
    lines = ["### Tiling, fusion and the library", _takeaways(done, free), "#### Tile sweep", _sweep_table(done, free)]
    return "\n\n".join(lines)


def _takeaways(done: pd.DataFrame, free: pd.DataFrame) -> str:
    out = []
    for (impl, dtype, case), g in done[done["variant"].isin(TILED)].groupby(["impl", "dtype", "case"]):
        same = free[(free["case"] == case) & (free["dtype"] == dtype)]
        lib = same[(same["variant"] == "library") & (same["device"] == g["device"].iloc[0])]
        for variant, base in (("tiled", "unblocked"), ("fused", "unfused")):
            best = g[g["variant"] == variant].sort_values("time_ms").head(1)
            if best.empty:
                continue
            b = best.iloc[0]
            if base == "unblocked":
                ref = same[(same["impl"] == impl) & (same["variant"] == base)]
                ref_ms, ref_bytes = ref["time_ms"].median(), ref["bytes_modeled"].median()
            else:
                ref = g[(g["variant"] == base) & (g["tile"] == b["tile"])]
                ref_ms, ref_bytes = ref["time_ms"].median(), ref["bytes_modeled"].median()
            text = f"- **{impl}, {dtype}, {case}**: {variant} at its best tile ({b['tile']}) ran {_rate(b['gflops'])}"
            if ref_ms == ref_ms:
                text += (
                    f", {fmt_x(ref_ms / b['time_ms'])} the speed of {base} "
                    f"(ledger traffic {fmt_x(ref_bytes / b['bytes_modeled'])} smaller)"
                )
            if not lib.empty:
                top = lib.sort_values("gflops").iloc[-1]
                text += (
                    f"; {100 * b['gflops'] / top['gflops']:.0f}% of the library ({top['impl']}, {_rate(top['gflops'])})"
                )
            out.append(text + ".")
    return "\n".join(out) or "No tiled variant was timed natively."


def _rate(gflops: float) -> str:
    """A rate as people read it: 43.6 GFLOP/s on a CPU, 25.3 TFLOP/s on a GPU."""
    return f"{gflops / 1e3:,.1f} TFLOP/s" if gflops >= 1e3 else f"{gflops:,.1f} GFLOP/s"


def _sweep_table(done: pd.DataFrame, free: pd.DataFrame) -> str:
    head = [
        "case",
        "dtype",
        "backend/device",
        "variant",
        "tile",
        "ledger MB",
        "FLOP/byte",
        "ms",
        "GFLOP/s",
        "% of library",
    ]
    body = []
    order = ["case", "dtype_rank", "impl", "variant", "tile_key"]
    tiled = done[done["variant"].isin(TILED)].assign(dtype_rank=lambda d: d["dtype"].map(dtype_rank))
    for r in tiled.sort_values(order).itertuples():
        lib = free[(free["case"] == r.case) & (free["dtype"] == r.dtype) & (free["device"] == r.device)]
        lib = lib.loc[lib["variant"] == "library", "gflops"].max()
        pct = f"{100 * r.gflops / lib:.0f}" if lib == lib else ""
        body.append(
            [
                r.case,
                r.dtype,
                r.impl,
                r.variant,
                r.tile,
                f"{r.bytes_modeled / 1e6:,.1f}",
                f"{r.intensity:.1f}",
                f"{r.time_ms:.3g}",
                f"{r.gflops:,.1f}",
                pct,
            ]
        )
    for r in free.itertuples():
        body.append(
            [
                r.case,
                r.dtype,
                r.impl,
                r.variant,
                "–",
                f"{r.bytes_modeled / 1e6:,.1f}",
                f"{r.intensity:.1f}",
                f"{r.time_ms:.3g}",
                f"{r.gflops:,.1f}",
                "",
            ]
        )
    return table(head, body)
