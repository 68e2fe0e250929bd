"""The tables of a scenario's part of report.md: speedup against prediction, crossover, timings and the ledger.

Each takes the tidy rows (or the fused/unfused pairs) of one scenario and returns GitHub markdown; long tables
fold into <details>. Numbers are formatted here, once, for every table.
"""

from __future__ import annotations

import pandas as pd

from suite.kit.markdown import details, table
from suite.kit.tidy import BASELINE, crossovers, fmt_size, fmt_x
from suite.report import boundary

ORDER = ["scenario", "series_rank", "size", "dtype_rank", "impl", "variant"]
"""How the timings table sorts its rows: by series, size, dtype, then implementation."""


def crossover_table(pairs: pd.DataFrame) -> str:
    """Per case swept over size: the smallest size from which the variant pays at every larger size."""
    found = crossovers(pairs)
    if found.empty:
        return "No case was swept over more than one size."
    rows = [
        [
            r.series,
            r.dtype,
            r.impl,
            f"{r.variant} vs {r.baseline}",
            f"{r.size_axis} ≥ {fmt_size(r.pays_from)}"
            if pd.notna(r.pays_from)
            else f"never (up to {fmt_size(r.largest)})",
        ]
        for r in found.itertuples()
    ]
    return table(["case", "dtype", "backend/device", "comparison", "fusion pays from"], rows)


def speedup_table(pairs: pd.DataFrame, axis: str) -> str:
    head = [
        "case",
        axis,
        "dtype",
        "backend/device",
        "variant",
        "baseline",
        "baseline ms",
        "variant ms",
        "measured (95% interval)",
        "predicted",
        "verdict",
    ]
    rows = [
        [
            r.series,
            fmt_size(r.size),
            r.dtype,
            r.impl,
            r.variant,
            r.baseline,
            _num(r.time_ms_base),
            _num(r.time_ms),
            f"{fmt_x(r.speedup)} ({fmt_x(r.speedup_lo)}–{fmt_x(r.speedup_hi)})",
            fmt_x(r.predicted) + (" (upper bound: cache-resident)" if boundary.resident(r) else ""),
            r.verdict,
        ]
        for r in pairs.itertuples()
    ]
    return table(head, rows) if rows else "No pair of variants was timed on the same case."


def summary_table(rows: pd.DataFrame, axis: str) -> str:
    head = [
        "case",
        axis,
        "dtype",
        "backend/device",
        "variant",
        "mode",
        "time ms",
        "GB/s",
        "% of ceiling",
        "max rel err",
        "status",
    ]
    body = [
        [
            r.series,
            fmt_size(r.size) if r.size == r.size else "",
            r.dtype,
            r.impl,
            r.variant,
            r.mode,
            _num(r.time_ms),
            _num(r.gbps),
            _num(r.pct_of_ceiling, "{:.0f}"),
            _num(r.max_rel_err, "{:.1e}"),
            r.status,
        ]
        for r in rows.sort_values(ORDER).itertuples()
    ]
    return table(head, body)


def ledger_table(rows: pd.DataFrame, axis: str) -> str:
    """Per case, dtype and store model: what each variant moves and launches, and what fusion removed."""
    keys = ["series_rank", "series", "size", "dtype_rank", "dtype", "store_model"]
    led = rows.dropna(subset=["bytes_modeled"]).groupby([*keys, "variant"], as_index=False).first()
    led["bytes_modeled"] += led["bytes_kept"].fillna(0) if "bytes_kept" in led else 0
    base = led[led["variant"] == BASELINE][[*keys, "bytes_modeled", "launches"]]
    pairs = led[led["variant"] != BASELINE].merge(base, on=keys, suffixes=("", "_base"))
    head = [
        "case",
        axis,
        "dtype",
        "store model",
        "variant",
        "launches",
        "bytes moved",
        "intermediates removed",
        "saved by fusion (Σ 2·N·s)",
        "intermediates vs last-level cache",
        "predicted",
    ]
    body = [
        [
            r.series,
            fmt_size(r.size),
            r.dtype,
            r.store_model,
            r.variant,
            f"{_int(r.launches_base)} → {_int(r.launches)}",
            f"{_bytes(r.bytes_modeled_base)} → {_bytes(r.bytes_modeled)}",
            _int(r.intermediates_removed),
            _bytes(r.bytes_saved),
            boundary.fit(r),
            fmt_x(r.bytes_modeled_base / r.bytes_modeled) + (" (upper bound)" if boundary.resident(r) else ""),
        ]
        for r in pairs.sort_values(keys).itertuples()
    ]
    note = (
        "Bytes moved follow the device's store model; the saving counts one write and one read per "
        "removed intermediate (ΔQ = 2·N·s); under write-allocate each one also avoids an allocate read. A "
        "compiled variant's bytes add the buffers its generated code kept between kernels, each written and read "
        "once (and allocate-read under write-allocate). Cache-resident: the intermediates removed (half of ΔQ) "
        "fit in the last-level cache the row recorded, so the unfused kernels may never send them to memory and "
        "the ledger's bytes, and the prediction, are an upper bound on the traffic crossing the memory boundary."
    )
    return (note + "\n\n" + details(f"{len(body)} cases", table(head, body))) if body else "No ledger rows."


def _num(value: float, fmt: str = "{:.4g}") -> str:
    return "" if value is None or value != value else fmt.format(value)


def _int(value: float) -> str:
    return "" if value != value else f"{int(value)}"


def _bytes(value: float) -> str:
    if value != value:
        return ""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{int(value)} B"
