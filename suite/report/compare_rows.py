"""The rows of two runs paired for `python -m suite compare`, and the short labels a comparison prints them by.

Rows are matched on the key of one (case, implementation), `suite.core.row.KEY`; where a key repeats within a
run (a multirun sweeping a backend option), the n-th occurrence in BASE meets the n-th in NEW. Rows on one side
only are listed as added or removed, not treated as errors. Apart from the statistics (`compare_stats`) because
pairing and naming rows is bookkeeping: `python -m suite noise` pairs and labels rows the same way.
"""

from __future__ import annotations

import json

import pandas as pd

from suite.core.row import KEY

OCCURRENCE = "occurrence"
"""The column that numbers the repeats of one key within a run (0 for the first)."""


def match(base: pd.DataFrame, new: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(matched, removed, added): matched rows side by side (columns suffixed `_base`, `_new`, the key and its
    occurrence unsuffixed), the rows only BASE has, and those only NEW has."""
    left, right = _keyed(base), _keyed(new)
    on = [*KEY, OCCURRENCE]
    matched = left.merge(right, on=on, how="inner", suffixes=("_base", "_new"))  # keeps BASE's row order
    removed = left.merge(right[on], on=on, how="left", indicator=True)
    added = right.merge(left[on], on=on, how="left", indicator=True)
    removed = removed[removed["_merge"] == "left_only"].drop(columns="_merge").reset_index(drop=True)
    added = added[added["_merge"] == "left_only"].drop(columns="_merge").reset_index(drop=True)
    return matched, removed, added


def _keyed(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with their key columns as text and the occurrence number of each key, in table order."""
    out = frame.reset_index(drop=True).copy()
    for column in KEY:
        out[column] = out[column].map(lambda v: "" if v is None or v != v else str(v))
    out[OCCURRENCE] = out.groupby(list(KEY), sort=False).cumcount()
    return out


def case_label(scenario: str, params: str, dtype: str) -> str:
    """`elementwise_chain n=65536 ops=scale,gelu float32`: the case in one short line."""
    try:
        values = json.loads(params) if params else {}
    except json.JSONDecodeError:
        values = {"params": params}
    shown = " ".join(f"{k}={_short(v)}" for k, v in values.items())
    return " ".join(p for p in (scenario, shown, dtype) if p)


def _short(value: object) -> str:
    if isinstance(value, list):
        return ",".join(_short(v) for v in value) if not any(isinstance(v, list) for v in value) else json.dumps(value)
    return str(value)


def implementation(backend: str, device: str, variant: str, occurrence: int = 0) -> str:
    """`numba/cpu fused`, with `(2nd)`… where the key repeats within a run."""
    label = f"{backend}/{device} {variant}"
    return label if not occurrence else f"{label} ({_ordinal(int(occurrence) + 1)})"


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def device_changes(matched: pd.DataFrame) -> list[tuple[str, str]]:
    """Distinct (BASE, NEW) device names of matched native rows that differ: timings on two machines."""
    if "device_name_base" not in matched or "device_name_new" not in matched:
        return []
    native = matched
    if "mode_base" in matched and "mode_new" in matched:
        native = matched[(matched["mode_base"] == "native") & (matched["mode_new"] == "native")]
    pairs = native[["device_name_base", "device_name_new"]].fillna("").astype(str).drop_duplicates()
    return [(b, n) for b, n in pairs.itertuples(index=False) if b != n]
