"""Numba's copies for the CPU bandwidth ceiling: the one copy that stores the way the kernels do, and memcpy.

The kernels write with ordinary stores, which first read the line they write (write-allocate). `b[i] = a[i]`
in a parallel loop becomes memcpy, which may switch to non-temporal stores on large buffers and skip that read;
`b[i] = a[i] + z`, with z = 0 only known at run time, cannot become memcpy, so its stores stay ordinary: the
bound a kernel can actually approach. Both are compiled on first use, not when the backend is discovered.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from suite.core.backend import Copy


@functools.cache
def copy_kernels() -> tuple[Callable, Callable]:
    """(memcpy_loop(a, b), ordinary_store_copy(a, b, z)): parallel copies of `a` into `b`."""
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


def cpu_copies(n: int) -> list[Copy]:
    """Both copies of `n` float32 values, compiled and run once."""
    memcpy_loop, ordinary = copy_kernels()
    src, dst, zero = np.ones(n, np.float32), np.empty(n, np.float32), np.float32(0.0)
    memcpy_loop(src, dst)
    ordinary(src, dst, zero)
    return [
        Copy("numba parallel memcpy", lambda: memcpy_loop(src, dst), streams=True),
        Copy("numba ordinary-store copy", lambda: ordinary(src, dst, zero)),
    ]
