"""All timing lives here: warm-up, interleaved repetitions in blocks until a precision or a budget, medians and spread.

Variants of a case are timed side by side, one repetition of each per round, with the order rotated every round,
so drift on a shared, noisy machine (frequency changes, a neighbour's job) lands on all of them alike and their
ratio stays honest. Rounds come in blocks (`measure_blocks`): each block times launchers built on a fresh set of
buffers, so that what a set of buffers fixes (addresses, alignment, the pages under them) is sampled rather than
frozen for the whole run, and blocks are added until every variant's interval is as narrow as `timing.precision`
asks or the budget `timing.max_budget_s` is spent (the way nvbench stops on its noise criterion); see
`suite.core.resample` for the interval. On the CPU the clock is the monotonic high-resolution counter; optional cold caches flush a
buffer larger than the last-level cache before every repetition. On CUDA, events are recorded on the one stream
every backend launches on, L2 is flushed (by reading) before every repetition, and a spin kernel ahead of every
start event keeps the host's launch overhead out of the window (`CudaClock.time`); `CudaClock.time_paced` times
the same launcher with the GPU waiting on the host, so the launch overhead can be measured apart (graph timing).

Within a block, each implementation's rounds rotate through several sets of input buffers (`timing.input_sets`,
where they fit: `suite.run.honesty.rebuilder`), one set per round, chosen outside the timed window. A plug-in never
reaches the timer: its launcher is called between the suite's readings and what it returns is ignored, and the
clocks call the functions captured here when the suite was imported (`genuine`), so replacing `time.perf_counter_ns`
or a clock's method changes no reading; `tampered` says what was replaced, `restore` puts it back.
"""

from __future__ import annotations

import time
import types
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from suite.core import resample
from suite.run.config import TimingConfig

Launcher = Callable[[], None]


@dataclass
class Timing:
    times_ms: list[float] = field(default_factory=list)
    blocks: list[int] = field(default_factory=list)
    """The block (buffer set) of each repetition; empty where all came from one."""
    stamps: list[tuple[int, int]] = field(default_factory=list)
    """Host perf_counter_ns at the start and end of each repetition's timing call, for samplers that run beside."""
    late: int = 0
    """Timed repetitions (warm-up left out) whose host enqueue outlasted the spin ahead of them (`CudaClock`)."""

    def add(self, ms: float, block: int, start_ns: int, end_ns: int) -> None:
        self.times_ms.append(ms)
        self.blocks.append(block)
        self.stamps.append((start_ns, end_ns))

    def precision(self, resamples: int = resample.RESAMPLES) -> float | None:
        """The half-width of the 95% interval of log time (≈ relative), blocks resampled; None without reps."""
        times = np.asarray(self.times_ms, dtype=float)
        good = np.isfinite(times) & (times > 0)
        if not good.any():
            return None
        labels = np.asarray(self.blocks)[good] if len(self.blocks) == len(times) else None
        return resample.estimate(np.log(times[good]), labels, resamples=resamples).half_width

    @property
    def buffer_sets(self) -> int:
        return len(set(self.blocks)) or (1 if self.times_ms else 0)

    def quantile(self, q: float) -> float:
        return float(np.quantile(self.times_ms, q))

    @property
    def median(self) -> float:
        return self.quantile(0.5)

    @property
    def reps(self) -> int:
        return len(self.times_ms)


def last_level_cache_bytes() -> int:
    """The largest CPU cache size sysfs reports (8 MiB when it reports none)."""
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = path.read_text().strip()
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        sizes.append(int(text.rstrip("KMG")) * scale)
    return max(sizes, default=8 << 20)


class CpuClock:
    last_late = False
    """Never: the CPU clock's window holds the host's call by design."""

    def __init__(self, cold_cache: bool = False) -> None:
        self.flush_buffer = np.zeros(2 * last_level_cache_bytes() // 8) if cold_cache else None

    def flush(self) -> None:
        """Read and write every line of a buffer twice the last-level cache: evicts the kernel's data."""
        assert self.flush_buffer is not None
        self.flush_buffer += 1.0

    def time(self, launch: Launcher) -> float:
        if self.flush_buffer is not None:
            self.flush()
        start = _now()
        launch()
        return (_now() - start) / 1e6


class CudaClock:
    """CUDA events around one launch on the shared stream, after an L2 flush by reading and a spin kernel.

    The spin keeps the GPU busy while the host enqueues the launcher's kernels, so the start event fires only
    once they are all queued and the window holds GPU time alone (not Python's dispatch between the kernels of
    an unfused chain). It lasts LEAD × the QUANTILE of the last WINDOW enqueues (between MIN_SPIN_NS and
    MAX_SPIN_NS): a quantile of recent ones, not the longest ever seen, so one garbage-collector pause does
    not fix every later spin at its length. `last_late` says whether the launch just timed outlasted its spin
    (its window may hold host time); `suite.run.timing` counts it for timed repetitions only.

    `time_paced` is the other window: the host waits until the start event has fired (the GPU idle behind
    it) before it enqueues, so the window holds the host's enqueue of every kernel the GPU waited on: what a
    caller launching from Python sees. Against a CUDA graph's replay it measures the launch overhead."""

    LEAD = 2.0
    MIN_SPIN_NS = 20_000
    MAX_SPIN_NS = 20_000_000
    WINDOW = 32
    QUANTILE = 0.9

    def __init__(self, driver: Any = None, now: Callable[[], int] = time.perf_counter_ns) -> None:
        if driver is None:
            from suite.gpu import driver
        self.driver, self.now = driver, now
        self.stream = driver.shared_stream()
        self.flush = driver.L2Flush()
        self.start, self.end = driver.Event(), driver.Event()
        self.recent: deque[int] = deque(maxlen=self.WINDOW)
        self.last_late = False

    @property
    def enqueue_ns(self) -> int:
        """The QUANTILE of the last WINDOW enqueues (0 before any)."""
        if not self.recent:
            return 0
        ordered = sorted(self.recent)
        return ordered[int(self.QUANTILE * (len(ordered) - 1))]

    def spin_ns(self) -> int:
        return int(min(max(self.LEAD * self.enqueue_ns, self.MIN_SPIN_NS), self.MAX_SPIN_NS))

    def time(self, launch: Launcher) -> float:
        self.flush(self.stream)
        spin = self.spin_ns()
        self.driver.spin(self.stream, spin)
        self.start.record(self.stream)
        queued = self.now()
        launch()
        queued = self.now() - queued
        self.end.record(self.stream)
        self.last_late = queued > spin
        self.recent.append(queued)
        return self.start.elapsed_ms(self.end)

    def time_paced(self, launch: Launcher) -> float:
        """The window with the GPU waiting on the host: flush, the shortest spin, the start event, the host
        waits for it, then enqueues. Holds the host's enqueue wherever the kernels are shorter than it, plus
        the latency of noticing the event (alike for every launcher)."""
        self.flush(self.stream)
        self.driver.spin(self.stream, self.MIN_SPIN_NS)
        self.start.record(self.stream)
        self.start.wait()
        launch()
        self.end.record(self.stream)
        self.last_late = False
        return self.start.elapsed_ms(self.end)


Clock = CpuClock | CudaClock

_now = time.perf_counter_ns
"""The CPU clock's reading, captured as the suite is imported: a later `time.perf_counter_ns = ...` is not seen."""
GENUINE: dict[tuple[type, str], Any] = {
    (c, m): c.__dict__[m] for c, m in ((CpuClock, "time"), (CudaClock, "time"), (CudaClock, "time_paced"))
}
"""The clocks' methods as this module defines them: what every repetition is timed with."""


def tampered() -> list[str]:
    """What an implementation replaced of the suite's timer: a clock's method, or the clock reading (here or in
    `time`); empty when nothing was."""
    found = [f"{c.__name__}.{m}" for (c, m), fn in GENUINE.items() if c.__dict__.get(m) is not fn]
    for name, fn in (
        ("suite.run.timing._now", _now),
        ("time.perf_counter_ns", time.perf_counter_ns),
        ("time.monotonic", time.monotonic),
    ):
        if not (isinstance(fn, types.BuiltinFunctionType) and getattr(fn, "__self__", None) is time):
            found.append(name)
    return found


def restore() -> None:
    """Put back whatever `tampered` names."""
    global _now
    for (c, m), fn in GENUINE.items():
        setattr(c, m, fn)
    for name in ("perf_counter_ns", "monotonic"):
        fn = getattr(time, name)
        if not (isinstance(fn, types.BuiltinFunctionType) and getattr(fn, "__self__", None) is time):
            setattr(time, name, _TIME[name])
    _now = _TIME["perf_counter_ns"]


_TIME = {"perf_counter_ns": time.perf_counter_ns, "monotonic": time.monotonic}


def _timer(clock: Any) -> Callable[[Launcher], float]:
    """The clock's `time`, as this module defines it for the suite's clocks (a test's own clock: its own)."""
    fn = GENUINE.get((type(clock), "time"))
    return (lambda launch: fn(clock, launch)) if fn is not None else clock.time


def measure_interleaved(launchers: dict[Hashable, Launcher], clock: Clock, cfg: TimingConfig) -> dict[Hashable, Timing]:
    """Time every launcher round-robin until the budget (per launcher) is spent or max_reps is reached: one block
    on the launchers' own buffers (ceilings, graph replays)."""
    results = {k: Timing() for k in launchers}
    _block({k: [v] for k, v in launchers.items()}, results, clock, 0, cfg)
    return results


def _block(
    sets: dict[Hashable, list[Launcher]], results: dict[Hashable, Timing], clock: Clock, block: int, cfg: TimingConfig
) -> float:
    """Warm up every set, then round-robin rounds (order rotated each round; each key's set rotated each round,
    outside the timed window) until `cfg.budget_s` per key is spent and `cfg.min_reps` are done, or `cfg.max_reps`;
    the rounds' seconds."""
    budget_s, min_reps, max_reps, warmup = cfg.budget_s, cfg.min_reps, cfg.max_reps, cfg.warmup
    keys = list(sets)
    timer = _timer(clock)
    for _ in range(warmup):
        for k in keys:
            for launch in sets[k]:
                timer(launch)
    started = time.monotonic()
    budget = budget_s * len(keys)
    for rounds in range(1, max_reps + 1):
        for k in keys:
            launch = sets[k][rounds % len(sets[k])]
            begin = _now()
            ms = timer(launch)
            results[k].add(ms, block, begin, _now())
            results[k].late += bool(getattr(clock, "last_late", False))
        keys = keys[1:] + keys[:1]
        if rounds >= min_reps and time.monotonic() - started >= budget:
            break
    return time.monotonic() - started


Builder = Callable[[int, Hashable], Launcher | None]
"""`rebuild(b, key)`: key's launcher on a fresh set of buffers for block b (b ≥ 1; block 0 times the launchers as
first built), or None where it could not be built again (the first launcher is then timed again). The j-th extra
set a block rotates through is `rebuild(b + j·SET_STRIDE, key)`, None where it does not fit."""
SET_STRIDE = 1000
"""Block numbers of a block's extra input sets: b + j·SET_STRIDE (j ≥ 1), each at an offset of its own."""


def measure_blocks(
    launchers: dict[Hashable, Launcher],
    clock: Clock,
    cfg: TimingConfig,
    rebuild: Builder | None = None,
    fixed: dict[Hashable, Launcher] | None = None,
) -> dict[Hashable, Timing]:
    """Time `launchers` and the `fixed` ones (a canary: the same buffers throughout) round-robin, in blocks.

    Block 0 times `launchers`; each later block times `rebuild(b, key)` of every key (on fresh buffers; the first
    launcher where that gives None). The last block's launcher of a key is let go before its next is built, so
    at most one set of buffers beside the first is alive at a time. Each block spends budget_s/min_blocks per launcher. After `min_blocks`, blocks
    are added until every rebuilt launcher's interval half-width is at most `cfg.precision`, or `max_budget_s`
    per launcher is spent, or `max_blocks` are done."""
    fixed = fixed or {}
    current = dict(launchers)
    results = {k: Timing() for k in [*current, *fixed]}
    extra: dict[Hashable, list[Launcher]] = {k: [] for k in current}
    blocks = max(1, cfg.min_blocks) if rebuild is not None else 1
    per_block = cfg.budget_s / blocks
    reps = max(cfg.min_reps, cfg.max_reps // max(blocks, 1))
    spent, block = 0.0, 0
    while True:
        if rebuild is not None:
            extra = {k: _extra_sets(rebuild, block, k, cfg.input_sets) for k in current}
        sets = {**{k: [current[k], *extra[k]] for k in current}, **{k: [v] for k, v in fixed.items()}}
        spent += _block(sets, results, clock, block, replace(cfg, budget_s=per_block, max_reps=reps))
        del sets
        block += 1
        if rebuild is None or block >= max(blocks, cfg.max_blocks):
            break
        if block >= blocks and (spent >= cfg.max_budget_s * len(results) or _precise(results, current, cfg)):
            break
        for k in current:
            current[k], extra[k] = None, []  # type: ignore[assignment]  # its buffers go before the next are made
            current[k] = rebuild(block, k) or launchers[k]
    return results


def _extra_sets(rebuild: Builder, block: int, key: Hashable, sets: int) -> list[Launcher]:
    """Up to `sets` - 1 launchers of `key` on further fresh buffers for `block`, as many as fit."""
    out: list[Launcher] = []
    for j in range(1, max(1, sets)):
        found = rebuild(block + j * SET_STRIDE, key)
        if found is None:
            break
        out.append(found)
    return out


def _precise(results: dict[Hashable, Timing], keys: dict[Hashable, Launcher], cfg: TimingConfig) -> bool:
    """Whether every launcher in `keys` has its time's interval within `cfg.precision` (a cheap bootstrap)."""
    for k in keys:
        found = results[k].precision(resamples=400)
        if found is None or found > cfg.precision:
            return False
    return True
