"""Why fusion lost or realised little of its prediction, named from the evidence in the rows.

The ledger's prediction assumes the removed bytes were really moved and that nothing else grew. Each check
below looks for one way that assumption breaks, using only measured or compiled facts: spills and occupancy from
the sm_90 compile, the library's time on the same case, the time per launch, the working set against the
device's last cache level, and how far the kernels stand from the copy ceiling.
"""

from __future__ import annotations

import math

import pandas as pd

from suite.core.fusion import BAND

LAUNCH_FLOOR_MS = {"cpu": 0.05, "cuda": 0.01}
"""Below this time per launch, fixed launch and threading costs dominate a kernel."""
COMPUTE_BOUND_PCT = 40.0
"""A variant below this share of the copy ceiling is limited by something other than memory traffic."""
CACHED_PCT = 120.0
"""A baseline above this share of the copy ceiling moved its bytes faster than memory can: a cache served them.
Not 100: the ceiling is one measurement on a shared machine, and a streaming kernel can come within noise of it."""
OCCUPANCY_DROP = 0.75
WEAK = 0.5
"""A measured speedup below this fraction of the predicted one realised too little of it: a cause is sought."""
EXPLAINED = 0.75
"""A measured speedup at least this fraction of the predicted one is explained by the bytes removed: no other
cause is printed beside that sentence, which would contradict it."""
MATMUL_INTENSITY = 16.0
"""FLOPs per byte moved above which a kernel's arithmetic is a matrix product's (a GEMM does hundreds per byte;
an elementwise chain or a row reduction, one or two): a compute bound then names the GEMM, not transcendentals."""


def _num(value: object) -> float:
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan
    return out


def needs_cause(pair: pd.Series) -> bool:
    """Fusion did not pay, or realised under half of its predicted speedup; never where the measured speedup
    is within EXPLAINED of the prediction (the report says the bytes removed explain it)."""
    share = _num(pair.get("speedup")) / _num(pair.get("predicted"))
    if share >= EXPLAINED:
        return False
    return pair.get("verdict") != "pays" or share < WEAK


def _apart(a: float, b: float) -> tuple[str, str]:
    """a and b with the same decimals: three significant digits of the larger, more where that prints both alike."""
    top = max(abs(a), abs(b), 1e-12)
    decimals = max(0, 2 - math.floor(math.log10(top)))
    for d in range(decimals, decimals + 5):
        x, y = f"{a:,.{d}f}", f"{b:,.{d}f}"
        if x != y:
            break
    return x, y


def causes(pair: pd.Series, library_ms: float | None = None) -> list[str]:
    """Likely causes, most specific first, for one candidate/baseline pair of `suite.kit.tidy.speedups`: each
    names the figure measured and, in brackets, the rule it passed."""
    found = []
    variant, base = pair["variant"], pair.get("baseline", "unfused")
    spill = _num(pair.get("spill_bytes"))
    if spill > 0:
        found.append(
            f"the {variant} kernel spills {spill:.0f} bytes per thread in its sm_90 build (rule: any spill traffic)"
        )
    occ, occ_base = _num(pair.get("occupancy")), _num(pair.get("occupancy_base"))
    if occ < OCCUPANCY_DROP * occ_base:
        found.append(
            f"theoretical occupancy fell from {occ_base:.0%} ({base}) to {occ:.0%} ({variant}) "
            f"(rule: below {OCCUPANCY_DROP:.0%} of the {base} kernels')"
        )
    if library_ms is not None and library_ms * (1.0 + BAND) < pair["time_ms"]:
        mine, theirs = _apart(pair["time_ms"], library_ms)
        found.append(
            f"the library kernel ({theirs} ms) beats the {variant} one ({mine} ms) "
            f"(rule: a library median more than {BAND:.0%} faster on the same case)"
        )
    per_launch = pair["time_ms_base"] / max(_num(pair.get("launches_base")), 1.0)
    floor = LAUNCH_FLOOR_MS.get(str(pair["device"]), 0.01)
    if per_launch < floor:
        found.append(
            f"each {base} kernel takes only {per_launch * 1e3:.0f} µs: fixed launch costs dominate "
            f"(rule: under {floor * 1e3:.0f} µs per launch)"
        )
    pct_base = _num(pair.get("pct_of_ceiling_base"))
    if pct_base > CACHED_PCT:  # faster than memory can go: the evidence that a cache served the traffic
        found.append(_cached(pair, base, pct_base))
    pct = _num(pair.get("pct_of_ceiling"))
    if pct < COMPUTE_BOUND_PCT:
        found.append(_bound(pair, variant, pct))
    return found


def _cached(pair: pd.Series, base: str, pct_base: float) -> str:
    """The baseline moved its bytes faster than the copy ceiling, with its working set against the last cache
    level: 'fits in' backs the reading, 'exceeds' says the cache served only part of it."""
    cache = _num(pair.get("cache_bytes_base"))
    working = (_num(pair.get("bytes_read_base")) + _num(pair.get("bytes_written_base"))) / max(
        _num(pair.get("launches_base")), 1.0
    )
    text = f"the {base} kernels ran at {pct_base:.0f}% of the copy ceiling, so a cache served their traffic"
    if cache > 0 and working == working:
        fits = "fits in" if working <= cache else "exceeds"
        text += (
            f": an {base} kernel's working set ({working / 2**20:.3g} MiB) {fits} the {cache / 2**20:.0f} MiB "
            "last cache level, and the intermediates fusion removes did not all reach memory"
        )
    return text + f" (rule: above {CACHED_PCT:.0f}% of the copy ceiling)"


def _bound(pair: pd.Series, variant: str, pct: float) -> str:
    """The variant far from the copy ceiling: what bounds it, named by its FLOPs per byte where the row has them."""
    rule = f"(rule: below {COMPUTE_BOUND_PCT:.0f}% of the copy ceiling)"
    flops, moved = _num(pair.get("flops_modeled")), _num(pair.get("bytes_modeled"))
    intensity = flops / moved if moved > 0 else math.nan
    if intensity > MATMUL_INTENSITY:
        return (
            f"{variant} reaches only {pct:.0f}% of the copy ceiling at {intensity:.0f} FLOPs per byte moved: its "
            f"matrix product's arithmetic, not memory traffic, bounds it, so removing bytes saves little {rule}"
        )
    said = f" at {intensity:.1f} FLOPs per byte moved" if intensity == intensity else ""
    return (
        f"{variant} reaches only {pct:.0f}% of the copy ceiling{said}: something other than memory traffic "
        f"(arithmetic, reductions, threading) bounds it, so removing bytes saves little {rule}"
    )
