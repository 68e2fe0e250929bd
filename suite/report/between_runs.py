"""What two runs' own rows say about the machine between them: how far kernels follow the canary, and how far
identical kernels drift from one run to the next beyond what each run's interval saw.

Each row's interval is that run's: blocks and processes resampled, it covers what the run sampled. A second run
meets the machine in another state (minutes later, other neighbours), and every kernel of a case moves with it
in its own measure. Two numbers, fitted across all timed rows of the comparison, make `compare` honest about it:

- `follow`: the slope β of the rows' log time ratios on their canary's log ratio, by Theil–Sen (the median of
  the slopes between pairs of rows, so that a minority of rows a change really moved does not bend it, and a
  change that moved every row alike only shifts the line, not its slope). A copy canary beyond the cache moves
  with the memory bandwidth, an in-cache kernel only partly: on this repository's shared CI host the rows
  followed their canaries by β ≈ 0.5, and dividing by the whole canary flagged more rows than raw times did.
  Where the canaries hardly differ between rows the slope cannot be told and β = 1: the canary taken whole.
- `spread`: σ, the scatter of the rows between the runs beyond their own intervals, from their residual log
  ratios (a robust method of moments: the median of r²/(s² + σ²) is that of χ²₁), so that rows a change did
  move, being the minority, barely raise it. `compare` says it beside the table as the size of change the two
  runs cannot tell from the machine; it does not widen the verdicts' intervals by it, since a change that moves
  many rows (a compiler upgrade moves every row of its backend) would raise it and hide itself.

Both need enough rows (MIN_ROWS); with fewer, β = 1 and σ = 0.
"""

from __future__ import annotations

import numpy as np

MIN_ROWS = 8
MIN_SPREAD = 0.02
"""Interquartile range of the rows' canary log ratios below which β cannot be told."""
CHI2_MEDIAN = 0.4549364
"""The median of a χ² variable with one degree of freedom."""
Z95 = 1.959964


def follow(z: np.ndarray, canary: np.ndarray) -> float:
    """β in [0, 1]: how far the rows' log time ratios `z` follow their canaries' log ratios (Theil–Sen)."""
    z, canary = np.asarray(z, dtype=float), np.asarray(canary, dtype=float)
    ok = np.isfinite(z) & np.isfinite(canary)
    z, canary = z[ok], canary[ok]
    if len(z) < MIN_ROWS or np.subtract(*np.quantile(canary, [0.75, 0.25])) < MIN_SPREAD:
        return 1.0
    i, j = np.triu_indices(len(z), 1)
    apart = np.abs(canary[i] - canary[j]) > MIN_SPREAD / 2
    if apart.sum() < MIN_ROWS:
        return 1.0
    slopes = (z[i] - z[j])[apart] / (canary[i] - canary[j])[apart]
    return float(np.clip(np.median(slopes), 0.0, 1.0))


def spread(z: np.ndarray, s: np.ndarray) -> float:
    """σ ≥ 0 such that the median of ((z − median z)² / (s² + σ²)) is that of χ²₁; `s` the rows' own standard
    errors. 0 where the rows' own intervals already explain their scatter, or with too few rows."""
    z, s = np.asarray(z, dtype=float), np.asarray(s, dtype=float)
    ok = np.isfinite(z) & np.isfinite(s)
    z, s = z[ok], s[ok]
    if len(z) < MIN_ROWS:
        return 0.0
    r2 = (z - np.median(z)) ** 2
    if np.median(r2 / np.maximum(s**2, 1e-12)) <= CHI2_MEDIAN:
        return 0.0
    lo, hi = 0.0, float(np.sqrt(r2.max())) + 1e-9
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if np.median(r2 / (s**2 + mid**2)) > CHI2_MEDIAN else (lo, mid)
    return hi
