"""Why fusion lost or realised little of its prediction, named from the evidence in the rows.

The ledger's prediction assumes the removed bytes were really moved and that nothing else grew. Each check
below looks for one way that assumption breaks, using only measured or compiled facts: spills and occupancy from
the sm_90 compile, the library's time on the same case, the time per launch, the working set against the
device's last cache level, and how far the kernels stand from the copy ceiling.
"""

from __future__ import annotations

import math

import pandas as pd

LAUNCH_FLOOR_MS = {"cpu": 0.05, "cuda": 0.01}
"""Below this time per launch, fixed launch and threading costs dominate a kernel."""
COMPUTE_BOUND_PCT = 40.0
"""A variant below this share of the copy ceiling is limited by something other than memory traffic."""
CACHED_PCT = 120.0
"""A baseline above this share of the copy ceiling moved its bytes faster than memory can: a cache served them.
Not 100: the ceiling is one measurement on a shared machine, and a streaming kernel can come within noise of it."""
OCCUPANCY_DROP = 0.75
WEAK = 0.5
"""An efficiency below this means fusion realised less than half of what the removed bytes should save."""


def _num(value: object) -> float:
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan
    return out


def needs_cause(pair: pd.Series) -> bool:
    """Fusion lost, or realised under half of its prediction in time saved or in speedup."""
    eff = _num(pair.get("fusion_efficiency"))
    share = _num(pair.get("speedup")) / _num(pair.get("predicted"))
    return pair.get("verdict") != "pays" or eff < WEAK or share < WEAK


def causes(pair: pd.Series, library_ms: float | None = None) -> list[str]:
    """Likely causes, most specific first, for one candidate/baseline pair of `suite.kit.tidy.speedups`."""
    found = []
    variant, base = pair["variant"], pair.get("baseline", "unfused")
    spill = _num(pair.get("spill_bytes"))
    if spill > 0:
        found.append(f"the {variant} kernel spills ({spill:.0f} bytes of spill traffic per thread in its sm_90 build)")
    occ, occ_base = _num(pair.get("occupancy")), _num(pair.get("occupancy_base"))
    if occ < OCCUPANCY_DROP * occ_base:
        found.append(f"theoretical occupancy fell from {occ_base:.0%} ({base}) to {occ:.0%} ({variant})")
    if library_ms is not None and library_ms < pair["time_ms"]:
        found.append(f"the library kernel ({library_ms:.3g} ms) beats the {variant} one ({pair['time_ms']:.3g} ms)")
    per_launch = pair["time_ms_base"] / max(_num(pair.get("launches_base")), 1.0)
    floor = LAUNCH_FLOOR_MS.get(str(pair["device"]), 0.01)
    if per_launch < floor:
        found.append(f"each {base} kernel takes only {per_launch * 1e3:.0f} µs: fixed launch costs dominate")
    cache = _num(pair.get("cache_bytes_base"))
    working = (_num(pair.get("bytes_read_base")) + _num(pair.get("bytes_written_base"))) / max(
        _num(pair.get("launches_base")), 1.0
    )
    pct_base = _num(pair.get("pct_of_ceiling_base"))
    if pct_base > CACHED_PCT:  # faster than memory can go: the evidence that a cache served the traffic
        found.append(
            f"the {base} kernels ran at {pct_base:.0f}% of the copy ceiling, so a cache served their traffic: "
            f"an {base} kernel's working set is {working / 2**20:.3g} MiB against a {cache / 2**20:.0f} MiB last "
            "cache level, and the intermediates fusion removes never reached memory"
        )
    pct = _num(pair.get("pct_of_ceiling"))
    if pct < COMPUTE_BOUND_PCT:
        found.append(
            f"{variant} reaches only {pct:.0f}% of the copy ceiling: arithmetic (transcendentals, reductions), "
            "not memory traffic, bounds it, so removing bytes saves little"
        )
    return found
