"""All timing lives here: warm-up, interleaved repetitions until a budget, medians and spread.

Variants of a case are timed side by side, one repetition of each per round, with the order rotated every round,
so drift on a shared, noisy machine (frequency changes, a neighbour's job) lands on all of them alike and their
ratio stays honest. On the CPU the clock is the monotonic high-resolution counter; optional cold caches flush a
buffer larger than the last-level cache before every repetition. On CUDA, events are recorded on the one stream
every backend launches on, L2 is flushed (by reading) before every repetition, and a spin kernel ahead of the
start event keeps the host's launch overhead out of the window (`CudaClock`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from suite.run.config import TimingConfig

Launcher = Callable[[], None]


@dataclass
class Timing:
    times_ms: list[float] = field(default_factory=list)

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
    def __init__(self, cold_cache: bool = False) -> None:
        self.flush_buffer = np.zeros(2 * last_level_cache_bytes() // 8) if cold_cache else None

    def flush(self) -> None:
        """Read and write every line of a buffer twice the last-level cache: evicts the kernel's data."""
        assert self.flush_buffer is not None
        self.flush_buffer += 1.0

    def time(self, launch: Launcher) -> float:
        if self.flush_buffer is not None:
            self.flush()
        start = time.perf_counter_ns()
        launch()
        return (time.perf_counter_ns() - start) / 1e6


class CudaClock:
    """CUDA events around one launch on the shared stream, after an L2 flush by reading and a spin kernel.

    The spin keeps the GPU busy while the host enqueues the launcher's kernels, so the start event fires only
    once they are all queued and the window holds GPU time alone (not Python's dispatch between the kernels of
    an unfused chain). It lasts LEAD × the longest enqueue seen so far (between MIN_SPIN_NS and MAX_SPIN_NS);
    the first (warm-up) calls measure it. `late` counts the launches whose enqueue outlasted their spin: their
    window may hold host time."""

    LEAD = 2.0
    MIN_SPIN_NS = 20_000
    MAX_SPIN_NS = 20_000_000

    def __init__(self, driver: Any = None) -> None:
        if driver is None:
            from suite.gpu import driver
        self.driver = driver
        self.stream = driver.shared_stream()
        self.flush = driver.L2Flush()
        self.start, self.end = driver.Event(), driver.Event()
        self.enqueue_ns = 0
        self.late = 0

    def spin_ns(self) -> int:
        return int(min(max(self.LEAD * self.enqueue_ns, self.MIN_SPIN_NS), self.MAX_SPIN_NS))

    def time(self, launch: Launcher) -> float:
        self.flush(self.stream)
        spin = self.spin_ns()
        self.driver.spin(self.stream, spin)
        self.start.record(self.stream)
        queued = time.perf_counter_ns()
        launch()
        queued = time.perf_counter_ns() - queued
        self.end.record(self.stream)
        self.late += queued > spin
        self.enqueue_ns = max(self.enqueue_ns, queued)
        return self.start.elapsed_ms(self.end)


Clock = CpuClock | CudaClock


def measure_interleaved(launchers: dict[Hashable, Launcher], clock: Clock, cfg: TimingConfig) -> dict[Hashable, Timing]:
    """Time every launcher round-robin until the budget (per launcher) is spent or max_reps is reached."""
    keys = list(launchers)
    results = {k: Timing() for k in keys}
    for _ in range(cfg.warmup):
        for k in keys:
            clock.time(launchers[k])
    started = time.monotonic()
    budget = cfg.budget_s * len(keys)
    for rounds in range(1, cfg.max_reps + 1):
        for k in keys:
            results[k].times_ms.append(clock.time(launchers[k]))
        keys = keys[1:] + keys[:1]
        if rounds >= cfg.min_reps and time.monotonic() - started >= budget:
            break
    return results
