"""The report's line on how precisely the run measured: buffer sets, processes, and the precision each row got.

Each case is timed in blocks, each on a fresh set of buffers, until every implementation's 95% interval is as
narrow as `timing.precision` asks or its budget is spent (`suite.run.timing.measure_blocks`). A row whose
interval stayed wide was one the machine could not pin down: its verdict says `neutral` unless the effect was
larger than that width. This says how the run fared, so that a reader knows which rows to trust to what digit.
"""

from __future__ import annotations

import pandas as pd

from suite.kit.tidy import fmt_size


def achieved(data: pd.DataFrame) -> list[str]:
    """One line: the buffer sets and processes the repetitions came from, the median and worst precision, and how
    many timed rows missed the target; [] for a run from before rows recorded their precision."""
    if "precision" not in data:
        return []
    timed = data[pd.to_numeric(data["precision"], errors="coerce").notna()]
    if timed.empty:
        return []
    precision = timed["precision"].astype(float)
    sets = pd.to_numeric(timed.get("buffer_sets"), errors="coerce").dropna()
    processes = pd.to_numeric(timed.get("processes"), errors="coerce").dropna()
    worst = timed.loc[precision.idxmax()]
    where = f"{worst['scenario']} {worst['backend']}/{worst['variant']} at size {fmt_size(worst['size'])}"
    drawn = f"{int(sets.min())}–{int(sets.max())} buffer sets" if not sets.empty else "one buffer set"
    if not processes.empty:
        drawn += f" in {int(processes.max())} worker process{'es' if processes.max() > 1 else ''}"
    return [
        f"**Precision:** each case's repetitions came from {drawn}, and each row's interval widens by what the "
        f"sets disagreed on. Half-width of the 95% interval of a row's time: median ±{precision.median():.1%}, "
        f"worst ±{precision.max():.1%} ({where}); {int((precision > 0.02).sum())} of {len(timed)} timed rows "
        "wider than ±2%. A verdict is `pays` or `loses` only where its own interval clears the ±2% band."
    ]
