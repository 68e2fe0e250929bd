"""What a comparison of two runs comes to in a few lines: the count of each verdict and flag, and how much the
machine itself moved between the runs. Apart from the statistics (`compare_stats`), which decide each row; these
only count and word what was decided, for the console and the markdown report alike.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from suite.report.compare_stats import VERDICTS


def tally(lines: pd.DataFrame, removed: int = 0, added: int = 0) -> dict[str, int]:
    """How many lines got each verdict and flag, and how many rows one side lacks."""
    counts = {v: int((lines["verdict"] == v).sum()) for v in VERDICTS}
    counts["untimed"] = int((lines["verdict"] == "").sum())
    counts["broke"] = int(lines["broke"].sum())
    counts["fixed"] = int(lines["flags"].str.contains("fixed (", regex=False).sum())
    counts["numerics"] = int(lines["numerics"].sum())
    counts["memory"] = int(lines["memory"].sum()) if "memory" in lines else 0
    counts["removed"], counts["added"] = removed, added
    return counts


def tally_line(counts: dict[str, int]) -> str:
    """`12 compared: 1 slower, 10 same, 1 faster; 1 broke; 2 added`: zero counts after the verdicts are left out."""
    compared = sum(counts[v] for v in VERDICTS) + counts["untimed"]
    head = f"{compared} compared: " + ", ".join(f"{counts[v]} {v}" for v in VERDICTS)
    if counts["untimed"]:
        head += f", {counts['untimed']} not timed on both sides"
    names = {
        "broke": "broke",
        "fixed": "fixed",
        "numerics": "numerics 10× worse",
        "memory": "more memory",
        "removed": "removed",
        "added": "added",
    }
    rest = [f"{counts[k]} {name}" for k, name in names.items() if counts[k]]
    return head + ("; " + ", ".join(rest) if rest else "")


def machine_moved(lines: pd.DataFrame) -> list[str]:
    """One line per device on how much the machine moved between the runs: the canary's NEW/BASE over the rows
    that timed one on both sides (median, 10th–90th percentile); [] where none did."""
    if "machine" not in lines or "device" not in lines:
        return []
    out = []
    for device, sub in lines.groupby("device", sort=True):
        moved = sub["machine"].astype(float).dropna()
        if moved.empty:
            continue
        lo, mid, hi = np.quantile(moved, [0.1, 0.5, 0.9])
        normalised = int(sub["normalised"].sum()) if "normalised" in sub else 0
        follow = lines.attrs.get("follow", 1.0)
        out.append(
            f"machine ({device}): the canary ran {mid:.3f}× as long in NEW as in BASE (10th–90th percentile "
            f"over {len(moved)} rows: {lo:.3f}–{hi:.3f}); {normalised} rows compared relative to it, "
            f"the rows following it by β = {follow:.2f}"
        )
    smallest = lines["smallest"].astype(float).dropna() if "smallest" in lines else pd.Series(dtype=float)
    if not smallest.empty:
        level = {"canary": "its level across cases set by the canary", "implementations": "its level where the "
                 "median implementation did not change (no canary)"}.get(lines.attrs.get("anchor", ""), "")  # fmt: skip
        drift = lines.attrs.get("drift", 0.0)
        beyond = (
            f"beyond it and their own intervals they scattered by ±{drift:.1%} (σ), which every interval includes"
            if drift > 0
            else "beyond it their own intervals explain their scatter"
        )
        out.append(
            f"each case's rows moved together by a machine factor fitted from them ({level}); {beyond}: "
            f"the smallest change this pair can tell is {smallest.median():.1%} for the typical row "
            f"(10th–90th percentile {smallest.quantile(0.1):.1%}–{smallest.quantile(0.9):.1%}; "
            "`python -m suite noise` gives it per family)"
        )
    return out
