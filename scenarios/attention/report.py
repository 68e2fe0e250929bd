"""Attention's report section: where the unfused variant stops competing and stops fitting in memory.

Fusion's case for attention is the L×L S and P the unfused variant writes, reads and holds: its traffic and
footprint grow as seq_len², the fused kernel's as seq_len. So the section names, per case and backend, the
seq_len from which unfused is slower than fused, the one at which the footprint guard skipped it, and how the
fused kernel stands against the library's on the same device. Used by `Attention.report_sections`; reads tidy
rows, never runs a kernel.
"""

from __future__ import annotations

import pandas as pd

from scenarios.attention.charts import FOOTPRINT_SKIP, prepare
from suite.kit.markdown import table
from suite.kit.tidy import fmt_size, timed


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


def fitting_section(frame: pd.DataFrame) -> str:
    """Per case, dtype and hand-written backend: where unfused stops competing and stops fitting, and how the
    fused kernel compares with the library's on the same device."""
    data = prepare(frame)
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
        body.append(
            [
                case,
                dtype,
                impl,
                _slower_from(paired) if len(paired) else "not timed",
                _stops_fitting(rows),
                _against_library(times, library) if "fused" in times else "–",
            ]
        )
    if not body:
        return ""
    head = [
        "case",
        "dtype",
        "backend/device",
        "unfused slower than fused from",
        "unfused stops fitting at",
        "fused time / library time (same device)",
    ]
    intro = (
        "The unfused variant writes and reads S and P, L×L per head each, and holds them: its traffic and "
        "footprint grow as seq_len², the fused kernel's as seq_len (plus K and V re-read once per query tile). "
        "A case whose unfused footprint exceeds the device's free memory is skipped before it runs."
    )
    return "### Where unfused stops fitting or competing\n\n" + intro + "\n\n" + table(head, body)
