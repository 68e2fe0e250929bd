"""What each stage of running one implementation found, frozen the moment the stage is done.

Stages never fill in a row: each returns one of these, and `suite.run.result_rows` builds the row from all of them
in one place. A field named like a results.csv column is that column's value (None where the stage did not get
that far); the other fields carry what a later stage needs (the output, the launcher, the timed samples).
The stages, in order: availability, ledger, build-and-check (with the kernels' resources), peers, timing,
rates, comparison (with its baseline, and with the rival on another backend). The first that stops an
implementation says why (`Stages.outcome`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from suite.core.ledger import STORE_MODEL, VariantLedger
from suite.core.scenario import Params
from suite.core.targets import NATIVE, Target
from suite.run.timing import Timing


@dataclass(frozen=True)
class Availability:
    """How the implementation runs here (`mode`), or, where it cannot, `status` (skipped, unsupported) and why."""

    mode: str = ""
    status: str = ""
    reason: str = ""
    target: Target | None = field(default=None, compare=False)

    @property
    def runs(self) -> bool:
        return not self.status


@dataclass(frozen=True)
class Ledger:
    """The modeled traffic of the variant on its device, under the device's store model."""

    store_model: str
    bytes_read: int
    bytes_written: int
    flops_modeled: int
    bytes_modeled: int
    launches: int
    intermediates_removed: int
    bytes_saved: int
    peak_bytes_modeled: int | None = None

    @classmethod
    def of(cls, lg: VariantLedger, device: str) -> Ledger:
        model = STORE_MODEL[device]
        return cls(
            model,
            lg.bytes_read,
            lg.bytes_written,
            lg.flops,
            lg.bytes_moved(model),
            lg.launches,
            len(lg.removed),
            lg.saved_bytes,
            lg.peak_bytes,
        )


@dataclass(frozen=True, eq=False)
class Check:
    """Built, run once into a poisoned buffer and judged: ok, mismatch, error, or skipped (the footprint guard,
    a target that only compiles). `run_params` are the params it ran with (an emulation slice, or the case's)."""

    status: str
    reason: str = ""
    run_params: Params = field(default_factory=dict)
    tolerance: float | None = None
    checked_params: str = ""
    compile_ms: float | None = None
    max_rel_err: float | None = None
    out: np.ndarray | None = None
    launcher: Callable[[], None] | None = None
    notes: Mapping[str, Any] = field(default_factory=dict)
    """What the launcher reported about itself while it ran (`suite.core.registry.notes`), kept in `extra`."""
    rebuild: Callable[[int], Callable[[], None]] | None = None
    """The launcher built again on a fresh set of buffers for timing block b (`suite.run.honesty.rebuilder`)."""


@dataclass(frozen=True)
class KernelResources:
    """The variant's worst CUDA kernel as compiled for sm_90, and in `extra` every kernel's report or why none."""

    regs: int | None = None
    spill_bytes: int | None = None
    smem_bytes: int | None = None
    occupancy: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Peer:
    """The largest difference from the other correct outputs of the same params; `status` is mismatch where it
    exceeds twice the tolerance."""

    peer_err: float | None
    status: str = ""
    reason: str = ""


@dataclass(frozen=True)
class Timed:
    time_ms: float
    time_min_ms: float
    time_q1_ms: float
    time_q3_ms: float
    reps: int
    cold_cache: bool
    times_ms: tuple[float, ...] = ()
    """Every repetition, in the interleaved rounds' order: the paired comparison needs them."""
    time_graph_ms: float | None = None
    """Median of the CUDA-graph replays of the launcher (timing.graphs=true), where it could be captured."""
    notes: Mapping[str, Any] = field(default_factory=dict)
    """What the row's `extra` keeps of the timing: why a launcher was not captured in a graph, late launches."""
    blocks: tuple[int, ...] = ()
    """The block (buffer set) of each repetition."""
    buffer_sets: int | None = None
    processes: int | None = None
    precision: float | None = None
    canary: str = ""
    canary_ms: float | None = None
    canary_times_ms: tuple[float, ...] = ()
    """The canary's time in the same round as each repetition (`suite.run.ceiling.canary`)."""
    throttled_reps: int | None = None
    excluded: tuple[bool, ...] = ()
    """Repetitions taken while the GPU's clocks were held back, left out of the time and the verdicts."""
    energy_j: float | None = None
    """Joules per call (CUDA, NVML's energy counter), from a window of back-to-back calls after the rounds."""

    @classmethod
    def of(
        cls,
        t: Timing,
        cold_cache: bool,
        canary: Timing | None = None,
        canary_name: str = "",
        excluded: list[bool] | None = None,
    ) -> Timed:
        """The timing's statistics over the repetitions kept: all, or where some were taken while the GPU was
        throttled (`excluded`), the others (all of them where none is left: the row's notes say so)."""
        canary_times = tuple(canary.times_ms) if canary is not None and len(canary.times_ms) == t.reps else ()
        flags = tuple(excluded) if excluded is not None and len(excluded) == t.reps else (False,) * t.reps
        kept = t if all(flags) else _kept(t, flags)
        return cls(
            kept.median,
            min(kept.times_ms),
            kept.quantile(0.25),
            kept.quantile(0.75),
            t.reps,
            cold_cache,
            tuple(t.times_ms),
            blocks=tuple(t.blocks),
            buffer_sets=t.buffer_sets,
            processes=1,
            precision=kept.precision(),
            canary=canary_name if canary_times else "",
            canary_ms=float(np.median(canary_times)) if canary_times else None,
            canary_times_ms=canary_times,
            throttled_reps=sum(flags) if excluded is not None else None,
            excluded=flags if any(flags) else (),
        )


def _kept(t: Timing, excluded: tuple[bool, ...]) -> Timing:
    keep = [i for i, out in enumerate(excluded) if not out]
    blocks = [t.blocks[i] for i in keep] if len(t.blocks) == t.reps else []
    return Timing([t.times_ms[i] for i in keep], blocks)


@dataclass(frozen=True)
class Rates:
    """GB/s and share of the device's ceiling (bytes read + written, as the ceiling's copy counts them)."""

    ceiling_gbps: float | None = None
    ceiling_streaming_gbps: float | None = None
    cache_bytes: int | None = None
    gbps: float | None = None
    pct_of_ceiling: float | None = None
    gflops: float | None = None
    """Kept in the row's `extra`."""


@dataclass(frozen=True)
class Comparison:
    """Paired speedup over `baseline` (same backend and device), its interval, verdict and fusion efficiency."""

    baseline: str
    speedup: float
    speedup_lo: float
    speedup_hi: float
    verdict: str
    fusion_efficiency: float | None = None
    energy_ratio: float | None = None
    """The baseline's joules per call over the candidate's (CUDA, where both were measured)."""


@dataclass(frozen=True)
class Rival:
    """Paired speedup over the rival implementation (another backend on the same device), interval, verdict."""

    rival: str
    rival_speedup: float
    rival_lo: float
    rival_hi: float
    rival_verdict: str


@dataclass(frozen=True)
class Memory:
    """Peak memory of one call: measured (`peak_bytes`, None where it could not be, `note` says why or how) and
    the model it is held to (the ledger's, or for the compiler's the buffers its code allocates)."""

    peak_bytes: int | None = None
    peak_bytes_modeled: int | None = None
    note: str = ""


@dataclass(frozen=True)
class MemoryComparison:
    """Peak bytes against the baseline (and the rival): ratio, saving and verdict (`suite.run.peak_memory`)."""

    memory_ratio: float | None = None
    memory_saved_mib: float | None = None
    memory_verdict: str = ""
    rival_memory_ratio: float | None = None
    basis: str = ""
    """measured (both peaks measured) or modeled."""


@dataclass(frozen=True)
class Stages:
    """Every stage one implementation went through; those it never reached are None."""

    availability: Availability = field(default_factory=Availability)
    ledger: Ledger | None = None
    check: Check | None = None
    resources: KernelResources | None = None
    peer: Peer | None = None
    timing: Timed | None = None
    rates: Rates | None = None
    comparison: Comparison | None = None
    rival: Rival | None = None
    memory: Memory | None = None
    memory_comparison: MemoryComparison | None = None

    def outcome(self) -> tuple[str, str]:
        """Status and reason: the first stage that stopped the implementation says why; an `ok` that was not
        timed (emulated, compiled only) says so."""
        a, check, peer = self.availability, self.check, self.peer
        if not a.runs:
            return a.status, a.reason
        if check is None:
            return "ok", ""
        if peer is not None and peer.status:
            return peer.status, peer.reason
        if check.status == "ok" and a.mode != NATIVE and not check.reason:
            return "ok", "not timed"
        return check.status, check.reason

    @property
    def ok(self) -> bool:
        return self.outcome()[0] == "ok"

    @property
    def mode(self) -> str:
        return self.availability.mode
