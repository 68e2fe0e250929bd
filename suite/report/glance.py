"""The report's first screen: does fusion pay, in time and in memory, against the unfused kernels, the compiler
and the library — one line per family, device and hand-written implementation, before any detail.

Each line is the family's headline case (its largest timed size; for a model, the model's one shape): the fused
kernel's paired speedup over the unfused one with its 95% interval and verdict, its memory ratio and saving, its
paired speedup over torch.compile (the rival, from the same interleaved rounds) with interval and verdict, and
its time against the library's (a ratio of medians: the two are not paired, so no interval). Every figure is in
the rows below it; this only chooses which to show first. A run of a training step's phases (backward, train)
has a line per phase, and the bytes its forward keeps for the backward pass against the unfused variant's.
"""

from __future__ import annotations

import pandas as pd

from suite.kit.markdown import table
from suite.kit.tidy import fmt_size

CANDIDATE = "fused"
NO_LIBRARY = "no library op"
"""The library column's cell where the run timed a library op for another family but not this one; a run that
timed none has no such column."""


def section(data: pd.DataFrame) -> str | None:
    """Markdown for the whole run's tidy rows; None where no fused row was timed."""
    timed = data[(data["status"] == "ok") & data["time_ms"].notna()]
    fused = timed[timed["variant"] == CANDIDATE]
    if fused.empty:
        return None
    with_model = bool((data["model"] != "").any())
    staged = bool((data["phase"] != "forward").any())
    keys = ["scenario", "phase", "device", "dtype", "impl"]
    keys = ["model", *keys] if with_model else keys
    has_library = bool((timed["variant"] == "library").any())
    rival = bool(fused["rival_speedup"].notna().any())  # no column of blanks where torch.compile never ran
    body = []
    for _, lines in fused.groupby(keys, sort=True):
        row = lines.sort_values(["size", "series_rank"]).iloc[-1]
        cells = [
            row["scenario"],
            *([row["phase"]] if staged else []),
            f"{row['series']}, {row['size_axis']} = {fmt_size(row['size'])}",
            row["impl"],
            row["dtype"],
            ratio(row["speedup"], row["speedup_lo"], row["speedup_hi"], row["verdict"]),
            _memory(row),
            *([saved(row, data)] if staged else []),
            *([ratio(row["rival_speedup"], row["rival_lo"], row["rival_hi"], row["rival_verdict"])] if rival else []),
            *([library_ratio(row, timed) or NO_LIBRARY] if has_library else []),
        ]
        body.append([*([row["model"] or "synthetic", row["layer"]] if with_model else []), *cells])
    head = [
        "family",
        *(["phase"] if staged else []),
        "case",
        "fused kernel",
        "dtype",
        "time vs unfused",
        "memory vs unfused",
        *(["kept for backward vs unfused"] if staged else []),
        *(["time vs torch.compile"] if rival else []),
        *(["time vs library (medians)"] if has_library else []),
    ]
    head = [*(["model", "layer"] if with_model else []), *head]
    intro = (
        "Per family, device and hand-written kernel, at the largest size timed: the fused kernel's speedup over "
        "its unfused decomposition"
        + (" and over torch.compile of it" if rival else " (torch.compile was not timed in this run)")
        + " (paired rounds, 95% interval, verdict), the "
        "memory it saves (baseline peak / fused peak, measured where both were)"
        + (", and the library's time over its own" if has_library else "; no library op was timed in this run")
        + ". Above 1 the fused kernel is faster or smaller. Details per family follow."
    )
    return "\n\n".join(["## At a glance", intro, table(head, body)])


def ratio(value: float, lo: float, hi: float, verdict: str) -> str:
    """'1.72× [1.62–1.83] pays': a paired speedup with its 95% interval and verdict; '' where none was measured."""
    if pd.isna(value):
        return ""
    interval = f" [{lo:.2f}–{hi:.2f}]" if pd.notna(lo) and pd.notna(hi) else ""
    return f"{value:.2f}×{interval} {verdict}".rstrip()


def library_ratio(row: pd.Series, timed: pd.DataFrame) -> str:
    """The library's median time over the fused row's, for the same case on the same device ('' where the library
    was not timed): a ratio of medians, since the two are not timed as a pair, so no interval. Where several
    libraries were timed (torch's GEMM and NumPy's), each gets its own ratio, named: a median across libraries
    would be neither's."""
    library = timed[
        (timed["scenario"] == row["scenario"])
        & (timed["params"] == row["params"])
        & (timed["phase"] == row["phase"])
        & (timed["dtype"] == row["dtype"])
        & (timed["device"] == row["device"])
        & (timed["variant"] == "library")
    ]
    medians = library.groupby("impl")["time_ms"].median().sort_values()
    if len(medians) == 1:
        return f"{medians.iloc[0] / row['time_ms']:.2f}×"
    return ", ".join(f"{t / row['time_ms']:.2f}× ({impl.split('/')[0]})" for impl, t in medians.items())


def _memory(row: pd.Series) -> str:
    if pd.isna(row["memory_ratio"]):
        return ""
    return f"{row['memory_ratio']:.2f}× {row['memory_verdict']}, {row['memory_saved_mib']:,.0f} MiB saved"


def saved(row: pd.Series, data: pd.DataFrame) -> str:
    """The bytes the fused variant's forward keeps for the backward pass against the unfused one's, measured
    (each implementation's own allocations) where both were, else modeled."""
    same = (data["scenario"] == row["scenario"]) & (data["params"] == row["params"]) & (data["phase"] == row["phase"])
    base = data[same & (data["dtype"] == row["dtype"]) & (data["impl"] == row["impl"]) & (data["variant"] == "unfused")]
    for column, basis in (("saved_bytes", "measured"), ("saved_bytes_modeled", "modeled")):
        mine = pd.to_numeric(pd.Series([row.get(column)]), errors="coerce").iloc[0]
        theirs = pd.to_numeric(base[column], errors="coerce").dropna() if column in base else pd.Series(dtype=float)
        if pd.notna(mine) and len(theirs) and mine > 0:
            return f"{fmt_bytes(mine)} vs {fmt_bytes(theirs.iloc[0])} ({basis})"
    return ""


def fmt_bytes(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 else f"{n / 2**10:,.1f} KiB"
