"""The measured bandwidth ceiling of each device: a STREAM-style copy, best of the copies available there.

No hardware peak is written down anywhere: every run measures its own ceiling, counting bytes read + bytes
written (the STREAM convention), and every row's `pct_of_ceiling` is its GB/s, counted the same way, over this.

The ceiling is the best copy that stores the way the kernels do. On CUDA every store is a plain one and the
best device-to-device copy (CuPy's, torch's) is the ceiling. On the CPU the kernels write with ordinary
stores, which first read the line they write (write-allocate): a copy that way moves 3 bytes per 2 counted.
memcpy (behind NumPy's, torch's and a Numba copy loop) may switch to non-temporal stores on large buffers and
skip that read, reaching up to 1.5x more: a bound no kernel with ordinary stores can approach. So the CPU
ceiling is a Numba parallel loop that LLVM cannot turn into memcpy (y = x + z, z = 0 passed at run time);
the best copy of all is kept beside it as `streaming_gbps`, what non-temporal stores would be held to.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from suite.run.config import TimingConfig
from suite.run.timing import CpuClock, CudaClock, last_level_cache_bytes, measure_interleaved

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


ORDINARY_STORE_COPY = "numba ordinary-store copy"
"""The CPU copy that stores as the kernels do; the memcpy-based ones may stream."""


@functools.cache
def numba_copies() -> tuple[Callable, Callable]:
    """Two parallel Numba copies: `b[i] = a[i]`, which LLVM turns into memcpy (and memcpy may stream), and
    `b[i] = a[i] + z` with z = 0 at run time, which it cannot, so its stores are ordinary ones."""
    from numba import njit, prange

    @njit(parallel=True, cache=False)
    def memcpy_loop(a: np.ndarray, b: np.ndarray) -> None:
        for i in prange(a.size):
            b[i] = a[i]

    @njit(parallel=True, cache=False)
    def ordinary_store_copy(a: np.ndarray, b: np.ndarray, z: np.float32) -> None:
        for i in prange(a.size):
            b[i] = a[i] + z

    return memcpy_loop, ordinary_store_copy


def _cpu_copies(n: int) -> dict[str, Callable[[], None]]:
    src, dst = np.random.default_rng(0).random(n, dtype=np.float32), np.empty(n, np.float32)
    copies: dict[str, Callable[[], None]] = {"numpy copyto": lambda: np.copyto(dst, src)}
    try:
        memcpy_loop, ordinary = numba_copies()
        zero = np.float32(0.0)
        memcpy_loop(src, dst)
        ordinary(src, dst, zero)
        copies["numba parallel memcpy"] = lambda: memcpy_loop(src, dst)
        copies[ORDINARY_STORE_COPY] = lambda: ordinary(src, dst, zero)
    except Exception:
        pass
    try:
        import torch

        ts, td = torch.from_numpy(src), torch.from_numpy(dst)
        copies["torch copy_"] = lambda: td.copy_(ts)
    except Exception:
        pass
    return copies


def _cuda_copies(n: int, stream: int) -> dict[str, Callable[[], None]]:
    copies: dict[str, Callable[[], None]] = {}
    try:
        import cupy

        cs, cd = cupy.ones(n, cupy.float32), cupy.empty(n, cupy.float32)
        ext = cupy.cuda.ExternalStream(stream)

        def cupy_copy() -> None:
            with ext:
                cd[...] = cs

        copies["cupy copy"] = cupy_copy
    except Exception:
        pass
    try:
        import torch

        ts, td = torch.ones(n, device="cuda"), torch.empty(n, device="cuda")
        ext_t = torch.cuda.ExternalStream(stream)

        def torch_copy() -> None:
            with torch.cuda.stream(ext_t):
                td.copy_(ts)

        copies["torch copy_"] = torch_copy
    except Exception:
        pass
    return copies


@functools.cache
def measure(device: str) -> Ceiling:
    """Best copy bandwidth on `device` in GB/s, over buffers at least as large as its last cache level.

    Measured once per process: a worker restarted after a crash is handed the first measurement.
    """
    if device == "cpu":
        cache = last_level_cache_bytes()
        n = min(max(cache // 4, 1 << 25), 1 << 28)  # each buffer ≥ the LLC
        clock: CpuClock | CudaClock = CpuClock()
        copies = _cpu_copies(n)
    else:
        from suite.gpu import driver as cuda_driver

        cache = cuda_driver.l2_bytes()
        n = 1 << 28
        clock = CudaClock()
        copies = _cuda_copies(n, cuda_driver.shared_stream())
    if not copies:
        raise RuntimeError(f"no copy available to measure {device} bandwidth")
    timings = measure_interleaved(dict(copies), clock, COPY_TIMING)
    moved = 2 * n * 4
    rates = {str(k): moved / (t.median * 1e-3) / 1e9 for k, t in timings.items()}
    held = held_to(device, rates)
    return Ceiling(device, rates[held], held, moved, cache, rates, max(rates.values()))


def held_to(device: str, rates: dict[str, float]) -> str:
    """The copy a device's kernels are held to: on the CPU the ordinary-store one, where it was measured."""
    if device == "cpu" and ORDINARY_STORE_COPY in rates:
        return ORDINARY_STORE_COPY
    return max(rates, key=rates.__getitem__)
