"""The measured bandwidth ceiling of each device: a STREAM-style copy, best of the copies available there.

No hardware peak is written down anywhere: every run measures its own ceiling, counting bytes read + bytes
written (the STREAM convention), and every row's `pct_of_ceiling` is its GB/s, counted the same way, over this.
On the CPU the copies are NumPy's, a Numba parallel loop's and torch's (which may use non-temporal stores, and
so skip the write-allocate read an ordinary store pays); on CUDA, CuPy's and torch's device-to-device copies.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from suite.config import TimingConfig
from suite.timing import CpuClock, CudaClock, last_level_cache_bytes, measure_interleaved

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
    """GB/s of every copy measured: the best is the ceiling; the others show what ordinary stores reach."""


def _cpu_copies(n: int) -> dict[str, Callable[[], None]]:
    src, dst = np.random.default_rng(0).random(n, dtype=np.float32), np.empty(n, np.float32)
    copies: dict[str, Callable[[], None]] = {"numpy copyto": lambda: np.copyto(dst, src)}
    try:
        from numba import njit, prange

        @njit(parallel=True, cache=False)
        def copy(a: np.ndarray, b: np.ndarray) -> None:
            for i in prange(a.size):
                b[i] = a[i]

        copy(src, dst)
        copies["numba parallel copy"] = lambda: copy(src, dst)
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
        from suite import cuda_driver

        cache = cuda_driver.l2_bytes()
        n = 1 << 28
        clock = CudaClock()
        copies = _cuda_copies(n, cuda_driver.shared_stream())
    if not copies:
        raise RuntimeError(f"no copy available to measure {device} bandwidth")
    timings = measure_interleaved(dict(copies), clock, COPY_TIMING)
    moved = 2 * n * 4
    best = min(timings, key=lambda k: timings[k].median)
    rates = {str(k): moved / (t.median * 1e-3) / 1e9 for k, t in timings.items()}
    return Ceiling(device, rates[str(best)], str(best), moved, cache, rates)
