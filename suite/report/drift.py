"""The report's warning that a device's copy ceiling moved while the run went on.

Each case times the ceiling's copy in its own rounds (`timing.ceiling=interleaved`), and its rows' % of ceiling
is of that reading. On a shared host (a cloud VM, a node with neighbours, another job) the memory bandwidth a
run gets can move by tens of percent from one case to the next: a row's % of ceiling still holds against its own
case's copy, but two cases' times and percentages then differ by the host as well as by the kernels. This says
so, once per device, where the readings spread beyond `SPREAD`.
"""

from __future__ import annotations

import pandas as pd

SPREAD = 1.2
"""Largest over smallest ceiling reading of one device beyond which the report says its bandwidth moved: the
copy's own repetitions agree within a few percent on a quiet machine."""


def drifted(data: pd.DataFrame) -> list[str]:
    """One line per device whose ceiling readings spread beyond `SPREAD`; [] where none did (or the ceiling was
    measured once for the whole run)."""
    if "ceiling_gbps" not in data or "device" not in data:
        return []
    out = []
    for device, sub in data.groupby("device"):
        readings = sub["ceiling_gbps"].dropna().unique()
        if len(readings) < 2 or readings.max() <= SPREAD * readings.min():
            continue
        lo, hi, mid = readings.min(), readings.max(), float(pd.Series(readings).median())
        out.append(
            f"**Bandwidth moved during the run ({device}):** the copy timed beside each case read {lo:,.1f} to "
            f"{hi:,.1f} GB/s ({hi / lo:.2f}×, median {mid:,.1f} over {len(readings)} readings): the memory "
            "bandwidth this run got changed while it ran (a shared host, another job). A row's % of ceiling is "
            "of its own case's copy; between cases, times and percentages differ by the host as well as by the "
            "kernels."
        )
    return out
