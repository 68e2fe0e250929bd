"""What two runs' own rows say about the machine between them: how far kernels follow the canary, and how far
identical kernels drift from one run to the next beyond what each run's interval saw.

Each row's interval is that run's: blocks and processes resampled, it covers what the run sampled. A second run
meets the machine in another state (minutes later, other neighbours), and every kernel of a case moves with it
in its own measure. What is fitted across the timed rows of the comparison makes `compare` honest about it:

- `follow`: the slope β of the rows' log time ratios on their canary's log ratio, by Theil–Sen (the median of
  the slopes between pairs of rows, so that a minority of rows a change really moved does not bend it, and a
  change that moved every row alike only shifts the line, not its slope). A copy canary beyond the cache moves
  with the memory bandwidth, an in-cache kernel only partly: on this repository's shared CI host the rows
  followed their canaries by β ≈ 0.5, and dividing by the whole canary flagged more rows than raw times did.
  Where the canaries hardly differ between rows the slope cannot be told and β = 1: the canary taken whole.
- `spread`: σ, the scatter of the rows between the runs beyond their own intervals, from their residual log
  ratios (a robust method of moments: the median of r²/(s² + σ²) is that of χ²₁), so that rows a change did
  move, being the minority, barely raise it.
- `case_factors`: how far the machine moved each *case*. One copy timed beside a case is itself a noisy
  measurement on a shared host, and does not move with the case's rows case by case (on a shared 2-core Xeon,
  canaries moved 1.8–2.25× where the rows moved 1.14–1.41×, and dividing by them read a machine as "faster"),
  while the case's own four or five implementations, timed in the same rounds, move together. So each case's
  machine factor is the consensus of its rows, fitted as log ratio = case + implementation + residual by
  alternating medians (Tukey's median polish): an implementation a change moved, in every case of its family,
  goes into its own effect and does not bend the case's factor, so a regression of one implementation, or of
  one backend's two rows among a case's four or five, still stands out. Which level is "unchanged" is told by
  the canary: across cases the median of (case factor − canary) is zero, so a machine that slowed everything,
  canaries included, reads as the machine, and rows that all moved while the copy did not read as the code.
  Without canaries the median implementation is taken as unchanged. A case with fewer than MIN_CASE_ROWS timed
  rows has no consensus and takes the canary (the raw time without one).

  The residuals after both effects give σ, which now widens every row's interval, with the uncertainty of its
  case's factor: the objection that kept σ out before (a change that moves many rows would raise it and hide
  itself) is answered by the fit, as a change that moves many rows moves them by implementation or by case,
  which the two effects take, and only the scatter no effect explains is left in the residuals.

Both need enough rows (MIN_ROWS); with fewer, β = 1 and σ = 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

MIN_ROWS = 8
MIN_SPREAD = 0.02
"""Interquartile range of the rows' canary log ratios below which β cannot be told."""
CHI2_MEDIAN = 0.4549364
"""The median of a χ² variable with one degree of freedom."""
Z95 = 1.959964
MIN_CASE_ROWS = 3
"""Timed rows a case needs for its own consensus: with two, a change to one of them would move the factor by half."""
POLISH_ROUNDS = 20
MEDIAN_EFFICIENCY = float(np.sqrt(np.pi / 2))
"""Standard error of a median over that of a mean, for normal scatter."""


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


@dataclass(frozen=True)
class CaseFit:
    """Per row, the log machine factor of its case (`factor`) and that factor's standard error (`error`); σ, the
    rows' scatter left after both effects (`spread`); how the level was set (`anchor`: canary or implementations)."""

    factor: np.ndarray
    error: np.ndarray
    spread: float
    anchor: str


def case_factors(z: np.ndarray, s: np.ndarray, case: np.ndarray, impl: np.ndarray, canary: np.ndarray) -> CaseFit:
    """The machine's log factor per case from `z` (rows' log ratios), `s` (their standard errors), `case` and `impl`
    (each row's labels; an implementation label is per family) and `canary` (the log ratio the canary leaves in
    `z`, NaN where a row has none): see the module's docstring."""
    z, s, canary = (np.asarray(a, dtype=float) for a in (z, s, canary))
    case, impl = pd.Series(np.asarray(case)), pd.Series(np.asarray(impl))
    rows = case.map(case.value_counts()).to_numpy()
    own = rows >= MIN_CASE_ROWS
    d = np.zeros(len(z))
    m = np.zeros(len(z))
    if own.any():
        for _ in range(POLISH_ROUNDS):
            m = pd.Series(z - d).groupby(case).transform("median").to_numpy()
            d = pd.Series(z - m).groupby(impl).transform("median").to_numpy()
    cases = pd.DataFrame({"case": case, "m": m, "c": canary})[own].groupby("case").first()
    cases = cases[np.isfinite(cases["c"])]
    if len(cases):
        delta, anchor = float(np.median(cases["m"] - cases["c"])), "canary"
    else:
        effects = pd.Series(d[own]).groupby(impl[own].to_numpy()).first()
        delta, anchor = (float(np.median(effects)) if len(effects) else 0.0), "implementations"
    m, d = m - delta, d + delta
    spread_ = spread((z - m - d)[own], s[own]) if own.sum() >= MIN_ROWS else 0.0
    typical = float(np.median(s[own])) if own.any() else 0.0
    error = MEDIAN_EFFICIENCY * np.sqrt(typical**2 + spread_**2) / np.sqrt(np.maximum(rows, 1))
    fallback = np.where(np.isfinite(canary), canary, 0.0)
    return CaseFit(np.where(own, m, fallback), np.where(own, error, 0.0), spread_, anchor)
