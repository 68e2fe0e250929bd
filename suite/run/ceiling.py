"""The measured bandwidth ceiling of each device: a STREAM-style copy, best of the copies available there.

No hardware peak is written down anywhere: every run measures its own ceiling, counting bytes read + bytes
written (the STREAM convention), and every row's `pct_of_ceiling` is its GB/s, counted the same way, over this.
The copies come from the registered backends (`Backend.copies`), so a backend added later brings its own.

The ceiling is the best copy that stores the way the kernels do. On CUDA every store is a plain one and the
best device-to-device copy is the ceiling. On the CPU the kernels write with ordinary stores, which first read
the line they write (write-allocate): a copy that way moves 3 bytes per 2 counted. memcpy may switch to
non-temporal stores on large buffers and skip that read, reaching up to 1.5x more: a bound no kernel with
ordinary stores can approach. So a copy says whether its stores may stream (`Copy.streams`), the ceiling is the
best of those that do not, and the best copy of all is kept beside it as `streaming_gbps`, what non-temporal
stores would be held to.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

from suite.core.backend import BACKENDS, Copy
from suite.run.config import TimingConfig
from suite.run.timing import CpuClock, CudaClock, Timing, last_level_cache_bytes, measure_interleaved

COPY_TIMING = TimingConfig(budget_s=0.3, min_reps=5, max_reps=200, warmup=2)


@dataclass(frozen=True)
class Ceiling:
    device: str
    gbps: float
    method: str
    bytes_per_copy: int
    cache_bytes: int = 0
    """The device's last cache level (CPU LLC, GPU L2): working sets below it may never reach memory."""
    methods: dict[str, float] | None = None
    """GB/s of every copy measured."""
    streaming_gbps: float | None = None
    """The best copy of all, non-temporal stores allowed (CPU); equal to `gbps` where every store is plain."""


def copies(device: str, n: int, stream: int | None) -> list[Copy]:
    """Every registered backend's copies of `n` float32 values on `device`; a backend whose copies fail to
    build (a library that cannot run here) is left out, as the ceiling needs only one."""
    found: list[Copy] = []
    for backend in BACKENDS.values():
        with contextlib.suppress(Exception):
            found += backend.copies(device, n, stream)
    return found


@functools.cache
def measure(device: str) -> Ceiling:
    """Best copy bandwidth on `device` in GB/s, over buffers at least as large as its last cache level.

    Measured once per process: a worker restarted after a crash is handed the first measurement.
    """
    if device == "cpu":
        cache = last_level_cache_bytes()
        n = min(max(cache // 4, 1 << 25), 1 << 28)  # each buffer ≥ the LLC
        clock: CpuClock | CudaClock = CpuClock()
        found = copies(device, n, None)
    else:
        from suite.gpu import driver as cuda_driver

        cache = cuda_driver.l2_bytes()
        n = 1 << 28
        clock = CudaClock()
        found = copies(device, n, cuda_driver.shared_stream())
    if not found:
        raise RuntimeError(f"no copy available to measure {device} bandwidth")
    timings = measure_interleaved({c.method: c.launch for c in found}, clock, COPY_TIMING)
    moved = 2 * n * 4
    rates = {str(k): moved / (t.median * 1e-3) / 1e9 for k, t in timings.items()}
    held = held_to(rates, {c.method for c in found if not c.streams})
    return Ceiling(device, rates[held], held, moved, cache, rates, max(rates.values()))


def held_to(rates: Mapping[str, float], ordinary: Collection[str]) -> str:
    """The copy a device's kernels are held to: the fastest whose stores are ordinary, as the kernels' are;
    the fastest of all where no such copy was measured."""
    kept = [m for m in rates if m in ordinary] or list(rates)
    return max(kept, key=rates.__getitem__)


def held_copy(device: str) -> Copy | None:
    """The copy `measure(device)` held the device to, built once per process at the ceiling's size (its buffers
    stay allocated), to be timed beside a case's implementations; None where it cannot be built again."""
    top = measure(device)
    return sized_copy(device, top.method, top.bytes_per_copy // 8)


@dataclass(frozen=True)
class Canary:
    """The reference kernel timed in a case's own rounds: the held copy, at the ceiling's size for a case whose
    traffic exceeds the last cache level (its reading is then the case's ceiling too), else on a buffer sized
    like the case's traffic, in cache as the case is. Its time moves with the machine, not with the kernels, so
    `suite compare` judges a row relative to it (`name` says which canary, so that only like is held to like)."""

    name: str
    copy: Copy
    is_ceiling: bool


SMALLEST_CANARY = 1 << 12
"""Float32 values of the smallest canary copy."""


def canaries(
    ceilings: Mapping[str, Ceiling], traffic: Mapping[str, int], interleaved: bool = True
) -> dict[str, Canary]:
    """The canary to time beside a case, per device with a ceiling. `interleaved` (timing.ceiling): a case that
    moves more bytes (`traffic`, its largest variant's) than the last cache level holds times the ceiling's own
    copy, whose reading holds its rows; otherwise (and always with `once`) a copy sized like the case."""
    out = {}
    for device, top in ceilings.items():
        moved = traffic.get(device, 0)
        if moved <= 0:
            continue
        if interleaved and moved > top.cache_bytes and (copy := held_copy(device)) is not None:
            out[device] = Canary(f"{top.method}, {top.bytes_per_copy // 8} floats", copy, True)
            continue
        n = max(SMALLEST_CANARY, 1 << (max(1, min(moved, top.bytes_per_copy) // 8).bit_length() - 1))
        if (copy := sized_copy(device, top.method, n)) is not None:
            out[device] = Canary(f"{top.method}, {n} floats", copy, False)
    return out


@functools.cache
def sized_copy(device: str, method: str, n: int) -> Copy | None:
    """The copy `method` on `n` float32 values (built once per process and size); None where it cannot be."""
    stream = None
    if device == "cuda":
        from suite.gpu import driver as cuda_driver

        stream = cuda_driver.shared_stream()
    return next((c for c in copies(device, n, stream) if c.method == method), None)


def read_beside(ceilings: Mapping[str, Ceiling], readings: Mapping[str, Timing]) -> dict[str, Ceiling]:
    """`ceilings` with each device that timed its copy beside the case held to that reading instead."""
    out = dict(ceilings)
    for device, timing in readings.items():
        top = ceilings[device]
        if timing.times_ms:
            gbps = top.bytes_per_copy / (timing.median * 1e-3) / 1e9
            out[device] = replace(top, gbps=gbps, method=f"{top.method}, timed beside the case")
    return out
