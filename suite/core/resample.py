"""Intervals that see what a process fixes: a two-level bootstrap over blocks of repetitions.

Rounds of one process are not independent draws of a kernel's time. Buffer addresses and their alignment, the
pages under them (huge or not), the thread pool's layout: each is fixed while the buffers live, and a kernel's
time can hang on it (Numba's fused softmax at 1823 × 16384 read 31.9 to 44.4 ms across five fresh processes, with
interquartile ranges under 3% inside each). A bootstrap over the rounds of one such state measures only the noise
inside it, so its interval is too narrow and verdicts flip between runs.

So the suite times every case in blocks: each block a fresh set of buffers at another offset, apart in time from
the others (`suite.run.timing.measure_blocks`). The estimate is the median over blocks of each block's median (in
log space), and its interval comes from resampling blocks with replacement and, inside each block drawn, its
rounds with replacement. The median, not the mean, over blocks: on a shared host one block can land on a stall
(a neighbour's burst, a page-cache flush) that slows everything in it tenfold, and a mean would carry that into
the estimate while the median leaves it to widen the interval. Where the blocks agree the interval is
that of the rounds; where they disagree it widens by their spread, as it should. With one block it is the
ordinary bootstrap of the median.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 2000


@dataclass(frozen=True)
class Estimate:
    """A location in log space with its bootstrap interval; `half_width` is the achieved precision (≈ relative)."""

    value: float
    lo: float
    hi: float
    blocks: int

    @property
    def half_width(self) -> float:
        return (self.hi - self.lo) / 2


def split(values: Sequence[float] | np.ndarray, blocks: Sequence[int] | np.ndarray | None) -> list[np.ndarray]:
    """`values` grouped by their block label, in order of first appearance; one group where labels are absent."""
    v = np.asarray(values, dtype=float)
    if blocks is None or len(blocks) != len(v):
        return [v] if len(v) else []
    labels = np.asarray(blocks)
    order = list(dict.fromkeys(labels.tolist()))
    return [v[labels == b] for b in order if np.any(labels == b)]


def point(values: Sequence[float] | np.ndarray, blocks: Sequence[int] | np.ndarray | None = None) -> float:
    """The median of the blocks' medians of `values` (non-finite ones left out): `draws`' point, without draws."""
    groups = [g[np.isfinite(g)] for g in split(values, blocks)]
    medians = [np.median(g) for g in groups if len(g)]
    if not medians:
        raise ValueError("no repetitions to estimate from")
    return float(np.median(medians))


def _bank(group: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """`resamples` bootstrap medians of one block's rounds."""
    picks = rng.integers(0, len(group), size=(resamples, len(group)))
    return np.median(group[picks], axis=1)


def draws(
    values: Sequence[float] | np.ndarray,
    blocks: Sequence[int] | np.ndarray | None = None,
    seed: int = 0,
    resamples: int = RESAMPLES,
) -> tuple[float, np.ndarray, int]:
    """(the median of the blocks' medians of `values`, `resamples` two-level bootstrap draws of it, the number of
    blocks). Non-finite values are left out; ValueError where none is left."""
    groups = [g[np.isfinite(g)] for g in split(values, blocks)]
    groups = [g for g in groups if len(g)]
    if not groups:
        raise ValueError("no repetitions to estimate from")
    rng = np.random.default_rng(seed)
    banks = np.stack([_bank(g, rng, resamples) for g in groups])  # (blocks, resamples)
    point = float(np.median([np.median(g) for g in groups]))
    if len(groups) == 1:
        return point, banks[0], 1
    chosen = rng.integers(0, len(groups), size=(resamples, len(groups)))
    return point, np.median(banks[chosen, np.arange(resamples)[:, None]], axis=1), len(groups)


def interval(point: float, samples: np.ndarray, blocks: int = 1) -> Estimate:
    """The percentile interval of bootstrap `samples` around `point` (which it always contains)."""
    tail = (1 - CONFIDENCE) / 2
    lo, hi = np.quantile(samples, [tail, 1 - tail])
    return Estimate(point, float(min(lo, point)), float(max(hi, point)), blocks)


def estimate(
    values: Sequence[float] | np.ndarray,
    blocks: Sequence[int] | np.ndarray | None = None,
    seed: int = 0,
    resamples: int = RESAMPLES,
) -> Estimate:
    """The median of the blocks' medians of `values` (already in log space) with its two-level bootstrap interval."""
    point, samples, n = draws(values, blocks, seed, resamples)
    return interval(point, samples, n)


def difference(base: tuple[float, np.ndarray, int], new: tuple[float, np.ndarray, int]) -> Estimate:
    """NEW − BASE of two independent `draws` (two runs, not interleaved: no pairs to keep), with the interval of
    the difference of their independent bootstrap draws."""
    return interval(new[0] - base[0], new[1] - base[1], min(base[2], new[2]))
