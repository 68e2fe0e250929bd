"""The report's warning that some CUDA rows were timed while the GPU's clocks were held back.

A row timed under a power cap or a thermal slowdown is slower than the GPU is, and a fused/unfused pair timed
while it came and went may disagree for that reason alone. The `throttled` column holds the reasons NVML
reported around a row's timing (`suite.gpu.nvml`); this says, in one line, how many rows have any and which.
"""

from __future__ import annotations

import pandas as pd


def flagged(data: pd.DataFrame) -> list[str]:
    """One line naming how many rows were timed while throttled, and why; [] where none was (or NVML was absent)."""
    if "throttled" not in data:
        return []
    reasons = data["throttled"].fillna("").astype(str).str.strip()
    hit = reasons[reasons != ""]
    if hit.empty:
        return []
    counts = hit.str.split(",").explode().str.strip().value_counts()
    why = ", ".join(f"{name} ({n})" for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    timed = int(data["time_ms"].notna().sum()) if "time_ms" in data else len(data)
    return [
        f"**Clock throttling:** {len(hit)} of {timed} timed rows ran while NVML reported the GPU's clocks held "
        f"back ({why}; see the `throttled` column): their times may be slower than the GPU is."
    ]
