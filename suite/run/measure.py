"""The stages after every implementation of a case is checked: peers, timing, rates and the paired comparison.

Each takes the stages of all the case's implementations (in the order they ran) and returns them with its own
result added; none changes what an earlier stage found. Only correct, natively run implementations are timed,
all of one device side by side, so their ratio is honest (see `suite.run.timing`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from suite.core import fusion, numerics
from suite.core.registry import KernelKey
from suite.core.scenario import Scenario
from suite.core.targets import NATIVE
from suite.gpu import energy
from suite.gpu.clock_watch import ClockWatch
from suite.run import faults, outputs
from suite.run.ceiling import Canary, Ceiling
from suite.run.graph_timing import graph_timed
from suite.run.job import Job
from suite.run.stages import Comparison, Peer, Rates, Rival, Stages, Timed
from suite.run.timing import CpuClock, CudaClock, Timing, measure_blocks

Found = dict[KernelKey, Stages]


PEER_SAMPLE = 1 << 20
"""Elements of each output the peers compare, beyond which they compare a seeded sample (every element having
passed the float64 reference already): k outputs make k·(k-1) comparisons, which on 2^26-element outputs took
longer than timing them."""


def _sample(out: np.ndarray, seed: int) -> np.ndarray:
    """`out` itself, or where larger than PEER_SAMPLE its elements at seeded positions (the same for every
    output of that size), the first and the last among them."""
    if out.size <= PEER_SAMPLE:
        return out
    picks = np.random.default_rng(seed).integers(0, out.size, PEER_SAMPLE)
    return out.reshape(-1)[np.unique(np.concatenate([[0, out.size - 1], picks]))]


def peers(found: Found, seed: int = 0) -> Found:
    """Largest relative difference of each correct output from the other correct outputs of the same params.

    Both sides passed the reference check, so a difference beyond twice the tolerance means they disagree
    where the reference cannot arbitrate (for instance, both wrong in different ways within the floor). Outputs
    larger than PEER_SAMPLE are compared on the same seeded sample of elements, the first and last included.
    A case of several outputs (a backward's dx and dweight) is compared output by output, each against its own
    tolerance; the row keeps the difference of the output closest to (or furthest past) twice its tolerance.
    """
    good = {k: s.check for k, s in found.items() if s.ok and s.check is not None and s.check.out is not None}
    views = {k: outputs.each(c.out, lambda a: _sample(np.asarray(a), seed)) for k, c in good.items()}
    out = dict(found)
    for k, a in good.items():
        others = [views[j] for j, b in good.items() if j != k and a.run_params == b.run_params]
        diffs = [(name, numerics.rel_err(mine, theirs[name] if name else theirs), tol) for name, mine, tol in _named(views[k], a)
                 for theirs in others]  # fmt: skip
        worst = max(diffs, key=lambda d: d[1] / d[2] if d[2] else d[1], default=None)
        peer = Peer(worst[1] if worst else None)
        if worst is not None and worst[2] and worst[1] > 2 * worst[2]:
            what = f"{worst[0]} " if worst[0] else ""
            said = f"{what}differs from another implementation by {worst[1]:.3g} (> 2×tolerance)"
            peer = Peer(worst[1], "mismatch", said)
        out[k] = replace(found[k], peer=peer)
    return out


def _named(view: Any, check: Any) -> list[tuple[str, Any, float]]:
    """(name, sample, tolerance) of each output: one, unnamed, with the row's tolerance; or a mapping's, each
    with its own (`extra.outputs`, written by the check)."""
    if not isinstance(view, Mapping):
        return [("", view, check.tolerance or 0.0)]
    per = check.notes.get("outputs", {})
    return [(name, a, per.get(name, {}).get("tolerance", check.tolerance or 0.0)) for name, a in view.items()]


def timed(
    found: Found, job: Job, cuda_clock: CudaClock | None, canaries: Mapping[str, Canary] | None = None
) -> tuple[Found, dict[str, Timing]]:
    """Time every correct, natively run implementation, interleaved with the others of its device, in blocks on
    fresh buffers (`suite.run.timing.measure_blocks`), with the device's canary (`suite.run.ceiling.canaries`)
    in the same rounds; the readings of the canaries that are the ceiling's copy returned per device."""
    out, readings = dict(found), {}
    for device in ("cpu", "cuda"):
        group = {k: s.check.launcher for k, s in found.items() if k.device == device and _timeable(s)}
        if not group:
            continue
        clock = CpuClock(job.timing.cold_cache) if device == "cpu" else (cuda_clock or CudaClock())
        canary = (canaries or {}).get(device)
        fixed: dict[Any, Any] = {CEILING: canary.copy.launch} if canary is not None else {}
        failed: dict[KernelKey, str] = {}
        rebuild = _rebuilder({k: found[k] for k in group}, failed)
        with ClockWatch() if device == "cuda" else contextlib.nullcontext() as watch:
            results = measure_blocks(group, clock, job.timing, rebuild, fixed)
        beside = results.pop(CEILING, None)
        if canary is not None and canary.is_ceiling and beside is not None:
            readings[device] = beside
        cold = job.timing.cold_cache if device == "cpu" else True  # CUDA always flushes L2
        for k in group:
            notes = {"late_launches": results[k].late} if results[k].late else {}  # timed repetitions only
            mine = {**notes, "buffer_set_failed": failed[k]} if k in failed else notes
            excluded = watch.throttled_mask(results[k].stamps) if watch is not None else None
            if excluded and all(excluded):
                mine = {**mine, "throttled": "every repetition was taken while the GPU was throttled: no verdict"}
            timing = Timed.of(results[k], cold, beside, canary.name if canary is not None else "", excluded)
            joules = _energy(group[k], found[k], job) if device == "cuda" else None
            out[k] = replace(found[k], timing=replace(timing, notes=mine, energy_j=joules))
        if device == "cuda" and job.timing.graphs:
            out = graph_timed(out, job.timing, clock)
    return out, readings


def _energy(launch: Callable[[], None], stages: Stages, job: Job) -> float | None:
    """Joules per call of a CUDA implementation (`suite.gpu.energy`), None where not measured."""
    target = stages.availability.target
    if not job.timing.energy_s or target is None:
        return None
    found = energy.per_call(launch, target.synchronize, min_s=job.timing.energy_s, max_calls=10**7)
    return found.joules_per_call if found is not None else None


def _rebuilder(group: Found, failed: dict[KernelKey, str]) -> Callable[[int, Any], Callable[[], None] | None]:
    """`rebuild(block, key)`: the implementation built again on fresh buffers; None (its first launcher is timed
    again) where it cannot be, and from then on: `failed` says why (in the row's extra), so a set of buffers
    never costs a row."""

    def rebuild(block: int, k: Any) -> Callable[[], None] | None:
        check = group[k].check if k in group else None
        if k in failed or check is None or check.rebuild is None:
            return None
        try:
            return check.rebuild(block)
        except faults.ContextLost:
            raise
        except Exception as exc:
            failed[k] = f"block {block}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            return None

    return rebuild


CEILING = ("ceiling", "copy")
"""The key of the ceiling's copy among a device's launchers (no KernelKey is a 2-tuple of strings)."""


def _timeable(stages: Stages) -> bool:
    return stages.ok and stages.mode == NATIVE and stages.check is not None


def rated(found: Found, ceilings: dict[str, Ceiling]) -> Found:
    """GB/s (bytes read + written, as the ceiling's copy counts them) and share of the device's ceiling."""
    out = {}
    for k, s in found.items():
        top = ceilings.get(k.device) if s.mode == NATIVE else None
        rates = Rates(top.gbps, top.streaming_gbps, top.cache_bytes) if top is not None else Rates()
        seconds = s.timing.time_ms * 1e-3 if s.timing is not None and s.timing.time_ms else None
        if seconds and s.ledger is not None:
            gbps = (s.ledger.bytes_read + s.ledger.bytes_written) / seconds / 1e9
            pct = 100.0 * gbps / rates.ceiling_gbps if rates.ceiling_gbps else None
            gflops = s.ledger.flops_modeled / seconds / 1e9 if s.ledger.flops_modeled else None
            rates = replace(rates, gbps=gbps, pct_of_ceiling=pct, gflops=gflops)
        out[k] = replace(s, rates=rates)
    return out


def compared(found: Found, scn: Scenario, seed: int) -> Found:
    """Paired speedup, interval verdict and fusion efficiency of each candidate over its baseline: the
    scenario's first (candidate, baseline) pair for the variant whose baseline was timed beside it."""
    done = {(k.backend, k.device, k.variant): (k, s) for k, s in found.items() if s.timing is not None}
    out = dict(found)
    for (backend, device, variant), (k, cand) in done.items():
        pair = next((b for c, b in scn.pairs if c == variant and (backend, device, b) in done), None)
        base = done[(backend, device, pair)][1] if pair is not None else None
        if base is not None and _decidable(base.timing, cand.timing):
            out[k] = replace(cand, comparison=_compare(pair, base, cand, seed))
    return out


def rivaled(found: Found, scn: Scenario, seed: int) -> Found:
    """Paired speedup and verdict of each candidate over its rival on another backend of the same device (the
    scenario's `rivals`: hand-fused against the compiler). Every implementation of a device is timed in the
    same rounds (see `timed`), so round i of the two shares the machine's state as a fused/unfused pair does."""
    done = {(k.backend, k.device, k.variant): s.timing for k, s in found.items() if s.timing is not None}
    out = dict(found)
    for k, cand in found.items():
        wanted = [variant for candidate, variant in scn.rivals if candidate == k.variant]
        others = [(b, v) for b, d, v in sorted(done) if d == k.device and v in wanted and b != k.backend]
        if cand.timing is None or not others:
            continue
        backend, variant = min(others, key=lambda bv: wanted.index(bv[1]))  # the scenario's first rival timed
        if not _decidable(done[(backend, k.device, variant)], cand.timing):
            continue
        c = _paired(done[(backend, k.device, variant)], cand.timing, seed)
        out[k] = replace(cand, rival=Rival(f"{backend}/{variant}", c.speedup, c.lo, c.hi, c.verdict))
    return out


def _decidable(base: Timed, cand: Timed) -> bool:
    """Whether some round of the two was not taken while the GPU was throttled."""
    return not all(a or b for a, b in zip(_flags(base), _flags(cand), strict=True))


def _paired(base: Timed, cand: Timed, seed: int) -> fusion.Comparison:
    """`fusion.compare` of two implementations timed in the same rounds, blocks resampled, the repetitions
    either left out (throttled) dropped as pairs."""
    keep = [not (a or b) for a, b in zip(_flags(base), _flags(cand), strict=True)]
    pick = lambda values: [v for v, k in zip(values, keep, strict=False) if k]
    blocks = pick(cand.blocks) if len(cand.blocks) == len(cand.times_ms) else None
    return fusion.compare(pick(base.times_ms), pick(cand.times_ms), seed, blocks)


def _flags(t: Timed) -> tuple[bool, ...]:
    return t.excluded if len(t.excluded) == len(t.times_ms) else (False,) * len(t.times_ms)


def _compare(baseline: str, base: Stages, cand: Stages, seed: int) -> Comparison:
    assert base.timing is not None and cand.timing is not None
    c = _paired(base.timing, cand.timing, seed)
    efficiency = None
    if base.ledger is not None and cand.ledger is not None:
        removed = (base.ledger.bytes_read + base.ledger.bytes_written) - (
            cand.ledger.bytes_read + cand.ledger.bytes_written
        )
        top = cand.rates.ceiling_gbps if cand.rates is not None else None
        efficiency = fusion.efficiency(base.timing.time_ms, cand.timing.time_ms, removed, top or 0)
    joules = (base.timing.energy_j, cand.timing.energy_j)
    energy_ratio = joules[0] / joules[1] if joules[0] and joules[1] else None
    return Comparison(baseline, c.speedup, c.lo, c.hi, c.verdict, efficiency, energy_ratio)
