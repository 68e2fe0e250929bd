"""All timing lives here: warm-up, interleaved repetitions until a budget, medians and spread.

Variants of a case are timed side by side, one repetition of each per round, with the order rotated every round,
so drift on a shared, noisy machine (frequency changes, a neighbour's job) lands on all of them alike and their
ratio stays honest. On the CPU the clock is the monotonic high-resolution counter; optional cold caches flush a
buffer larger than the last-level cache before every repetition. On CUDA, events are recorded on the one stream
every backend launches on, and L2 is flushed before every repetition.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path

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
    def __init__(self) -> None:
        from suite.gpu import driver as cuda_driver

        self.driver = cuda_driver
        self.stream = cuda_driver.shared_stream()
        self.flush = cuda_driver.L2Flush()
        self.start, self.end = cuda_driver.Event(), cuda_driver.Event()

    def time(self, launch: Launcher) -> float:
        self.flush(self.stream)
        self.start.record(self.stream)
        launch()
        self.end.record(self.stream)
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
