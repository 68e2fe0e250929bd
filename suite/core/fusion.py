"""The fusion verdict: does the fused variant pay, from paired, interleaved repetitions and an interval test.

Fused and unfused run round-robin, so repetition i of each shares the machine's state at that moment; the ratio
of each pair cancels drift. The verdict comes from a bootstrap confidence interval of the median paired ratio,
never from two medians: `pays` when the whole interval lies above the ±2% band of practical equivalence around
1, `loses` when it lies below it, `neutral` otherwise.

`fusion_efficiency` compares the time fusion saved with the time the ledger says the removed traffic should
take at the measured copy bandwidth: near 1, the saving is the bytes; far below, something else ate it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
BAND = 0.02
"""Speedups within ±2% of 1 are practically equivalent: neutral even when the interval excludes 1."""
RESAMPLES = 2000


@dataclass(frozen=True)
class Comparison:
    speedup: float
    """Median over rounds of baseline time / candidate time."""
    lo: float
    hi: float
    verdict: str


def compare(baseline_ms: list[float], candidate_ms: list[float], seed: int = 0) -> Comparison:
    """Paired speedup of the candidate over the baseline with a bootstrap interval of its median."""
    rounds = min(len(baseline_ms), len(candidate_ms))
    if rounds == 0:
        raise ValueError("no paired repetitions")
    log_ratio = np.log(np.asarray(baseline_ms[:rounds]) / np.asarray(candidate_ms[:rounds]))
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, rounds, size=(RESAMPLES, rounds))
    medians = np.median(log_ratio[picks], axis=1)
    tail = (1 - CONFIDENCE) / 2
    lo, hi = np.exp(np.quantile(medians, [tail, 1 - tail]))
    return Comparison(float(np.exp(np.median(log_ratio))), float(lo), float(hi), verdict(float(lo), float(hi)))


def verdict(lo: float, hi: float) -> str:
    """`pays` only when the whole interval clears the band: an interval of 1.004–1.03 excludes 1, but a 1%
    gain is not one a user can act on, and identical kernels measure that far apart on a busy host."""
    if lo > 1.0 + BAND:
        return "pays"
    if hi < 1.0 - BAND:
        return "loses"
    return "neutral"


def efficiency(baseline_ms: float, candidate_ms: float, bytes_removed: int, ceiling_gbps: float) -> float | None:
    """Measured time saved over the time `bytes_removed` take at the ceiling; None when nothing was removed."""
    if bytes_removed <= 0 or not ceiling_gbps:
        return None
    predicted_ms = bytes_removed / (ceiling_gbps * 1e9) * 1e3
    return (baseline_ms - candidate_ms) / predicted_ms
