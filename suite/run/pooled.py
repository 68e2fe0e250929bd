"""One case timed in several worker processes, pooled into one row per implementation.

Some of what decides a kernel's time is fixed for the life of a process, whatever its buffers: Numba's fused
softmax at 1823 × 8192 read 8.7–9.5 ms in all twelve buffer sets of one run and 10.2–11.9 ms in all eleven of
the next, each run's interval ±2%. Blocks on fresh buffers cannot see that; a second process can. So with
`timing.processes=P` (and `isolate=true`) the runner times each case in P workers, one after the other, each
with 1/P of the budget, and pools their repetitions here: the blocks of process p are relabelled p·BLOCKS + b, so
the two-level bootstrap (`suite.core.resample`) resamples the blocks of every process alike and the interval
widens where the processes disagree.

The rows' times, spread, precision and rates are recomputed from the pooled repetitions, and so are the paired
comparisons (fused against its baseline, hand against its rival), from the rounds of the processes where both
sides were timed: within one process every implementation of a device ran in the same rounds, so the pairs stay
aligned. An implementation that failed in one process keeps the other processes' repetitions and says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from suite.core import fusion
from suite.core.row import Row
from suite.run.timing import Timing

BLOCKS = 1000
"""Block labels of process p start at p·BLOCKS (no process times that many blocks of one case)."""


def split_timing(timing: Any, processes: int) -> Any:
    """Each process's share of the timing config: budgets, blocks and rounds divided among `processes`."""
    if processes <= 1:
        return timing
    share = lambda n: max(1, -(-int(n) // processes))  # ceiling division
    return replace(
        timing,
        budget_s=timing.budget_s / processes,
        max_budget_s=timing.max_budget_s / processes,
        min_blocks=share(timing.min_blocks),
        max_blocks=share(timing.max_blocks),
        max_reps=share(timing.max_reps),
    )


def _key(row: Row) -> tuple[str, str, str]:
    return (row.backend, row.device, row.variant)


def pool(runs: Sequence[list[Row]]) -> list[Row]:
    """The rows of the first process, each with the repetitions of every process that timed it ok pooled in,
    then their comparisons recomputed; a run of one process is returned as it is."""
    if len(runs) <= 1:
        return list(runs[0]) if runs else []
    others = [{_key(r): r for r in rows} for rows in runs[1:]]
    pooled = []
    for row in runs[0]:
        mates = [row, *(o.get(_key(row)) for o in others)]
        pooled.append(_merged(mates))
    by_key = {_key(r): r for r in pooled}
    return [_compared(r, by_key) for r in pooled]


def _timed(row: Row | None) -> bool:
    return row is not None and row.status == "ok" and bool(row.times_ms)


def _merged(mates: list[Row | None]) -> Row:
    """The first process's row with every process's repetitions pooled; the processes that did not time it ok
    named in `extra`."""
    first = mates[0]
    assert first is not None
    if not _timed(first):
        return first
    times, blocks, canary, excluded = [], [], [], []
    used, missed = 0, {}
    for p, row in enumerate(mates):
        if not _timed(row):
            missed[str(p)] = "absent" if row is None else f"{row.status}: {row.reason}"
            continue
        assert row is not None
        n = len(row.times_ms)
        times += row.times_ms
        blocks += [p * BLOCKS + b for b in (row.blocks if len(row.blocks) == n else (0,) * n)]
        canary += row.canary_times_ms if len(row.canary_times_ms) == n else (float("nan"),) * n
        excluded += row.excluded if len(row.excluded) == n else (False,) * n
        used += 1
    kept = [i for i, out in enumerate(excluded) if not out] or list(range(len(times)))
    t = Timing([times[i] for i in kept], [blocks[i] for i in kept])
    extra = {**first.extra, "processes_missed": missed} if missed else first.extra
    out = replace(
        first,
        times_ms=tuple(times),
        blocks=tuple(blocks),
        excluded=tuple(excluded),
        extra=extra,
        canary_times_ms=tuple(canary) if np.isfinite(canary).all() else (),
        processes=used,
        time_ms=t.median,
        time_min_ms=min(t.times_ms),
        time_q1_ms=t.quantile(0.25),
        time_q3_ms=t.quantile(0.75),
        reps=len(times),
        precision=t.precision(),
        buffer_sets=len(set(blocks)),
        throttled_reps=sum(excluded) if first.throttled_reps is not None else None,
    )
    if np.isfinite(canary).all():
        out.canary_ms = float(np.median(canary))
    ceilings = [r.ceiling_gbps for r in mates if _timed(r) and r is not None and r.ceiling_gbps]
    if ceilings:
        out.ceiling_gbps = float(np.median(ceilings))
    moved = (first.bytes_read or 0) + (first.bytes_written or 0)
    if moved and out.time_ms:
        out.gbps = moved / (out.time_ms * 1e-3) / 1e9
        out.pct_of_ceiling = 100.0 * out.gbps / out.ceiling_gbps if out.ceiling_gbps else None
    return out


def _common(a: Row, b: Row) -> tuple[list[float], list[float], list[int]]:
    """The paired repetitions of two pooled rows: the rounds of the processes that timed both, neither of the
    pair left out, with their blocks."""
    procs = {x // BLOCKS for x in a.blocks} & {x // BLOCKS for x in b.blocks}
    base, cand, labels = [], [], []
    for p in sorted(procs):
        ia = [i for i, x in enumerate(a.blocks) if x // BLOCKS == p]
        ib = [i for i, x in enumerate(b.blocks) if x // BLOCKS == p]
        if len(ia) != len(ib):
            continue
        for i, j in zip(ia, ib, strict=True):
            if (a.excluded and a.excluded[i]) or (b.excluded and b.excluded[j]):
                continue
            base.append(a.times_ms[i])
            cand.append(b.times_ms[j])
            labels.append(b.blocks[j])
    return base, cand, labels


def _compared(row: Row, by_key: dict[tuple[str, str, str], Row]) -> Row:
    """`row` with its comparison with its baseline and with its rival recomputed from the pooled pairs."""
    if not _timed(row) or not row.processes or row.processes < 2:
        return row
    seed = row.seed or 0
    base = by_key.get((row.backend, row.device, row.baseline)) if row.baseline else None
    if base is not None and _timed(base) and row.verdict:
        b, c, labels = _common(base, row)
        if b:
            found = fusion.compare(b, c, seed, labels)
            row.speedup, row.speedup_lo, row.speedup_hi, row.verdict = found.speedup, found.lo, found.hi, found.verdict
            removed = (
                (base.bytes_read or 0) + (base.bytes_written or 0) - (row.bytes_read or 0) - (row.bytes_written or 0)
            )
            if row.fusion_efficiency is not None and base.time_ms and row.time_ms:
                row.fusion_efficiency = fusion.efficiency(base.time_ms, row.time_ms, removed, row.ceiling_gbps or 0)
    rival_backend, _, rival_variant = row.rival.partition("/")
    rival = by_key.get((rival_backend, row.device, rival_variant)) if row.rival else None
    if rival is not None and _timed(rival) and row.rival_verdict:
        b, c, labels = _common(rival, row)
        if b:
            found = fusion.compare(b, c, seed, labels)
            row.rival_speedup, row.rival_lo, row.rival_hi = found.speedup, found.lo, found.hi
            row.rival_verdict = found.verdict
    return row
