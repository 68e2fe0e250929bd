"""The fusion verdict: does the fused variant pay, from paired, interleaved repetitions and an interval test.

Fused and unfused run round-robin, so repetition i of each shares the machine's state at that moment; the ratio
of each pair cancels drift. The rounds come in blocks, each on a fresh set of buffers (`suite.core.resample`):
the speedup is the median of the blocks' median paired ratios, and its interval a two-level bootstrap
over blocks and their rounds, so that it widens where one set of buffers favoured a kernel and the next did not.
The verdict comes from that interval, never from two medians: `pays` when the whole interval lies above the ±2%
band of practical equivalence around 1, `loses` when it lies below it, `neutral` otherwise.

`fusion_efficiency` compares the time fusion saved with the time the ledger says the removed traffic should
take at the measured copy bandwidth: near 1, the saving is the bytes; far below, something else ate it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from suite.core import resample

CONFIDENCE = 0.95
BAND = 0.02
"""Speedups within ±2% of 1 are practically equivalent: neutral even when the interval excludes 1."""
RESAMPLES = 2000


@dataclass(frozen=True)
class Comparison:
    speedup: float
    """Median over blocks of the median over rounds of baseline time / candidate time."""
    lo: float
    hi: float
    verdict: str
    blocks: int = 1
    """Blocks (buffer sets) the interval resampled."""


def compare(
    baseline_ms: Sequence[float], candidate_ms: Sequence[float], seed: int = 0, blocks: Sequence[int] | None = None
) -> Comparison:
    """Paired speedup of the candidate over the baseline with a two-level bootstrap interval (blocks, then
    rounds); `blocks` labels each round's block (None: one block)."""
    rounds = min(len(baseline_ms), len(candidate_ms))
    if rounds == 0:
        raise ValueError("no paired repetitions")
    log_ratio = np.log(np.asarray(baseline_ms[:rounds], dtype=float) / np.asarray(candidate_ms[:rounds], dtype=float))
    labels = list(blocks[:rounds]) if blocks is not None and len(blocks) >= rounds else None
    est = resample.estimate(log_ratio, labels, seed, RESAMPLES)
    lo, hi = float(np.exp(est.lo)), float(np.exp(est.hi))
    return Comparison(float(np.exp(est.value)), lo, hi, verdict(lo, hi), est.blocks)


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
