"""How the CPU kernels see their arrays: halves as their uint16 bits, scratch as one row per Numba thread.

Numba's CPU target has no float16 type, so every kernel reads and writes half-precision arrays as their bits
and converts in its loops (`backends.numba.ops.VECTOR_CODECS`); the views here cost no copy. Scratch that a
parallel loop needs is allocated by the entry, outside the timed launch, one row for each thread of Numba's
pool, which a kernel indexes with `numba.get_thread_id()`.

NumPy places a large array 16 bytes past a cache line (glibc's mapped chunk header), so every row of a width that
is a multiple of 16 floats starts there too, and a loop vectorised 512 bits wide, started at the row's first
element, splits every one of its stores across two lines. A kernel whose stores are what limits it takes the row's
first elements apart (`line_segments`) so that the vector loop stores whole lines (`add_rmsnorm_kernels` measures
it).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba.extending import register_jitable

LINE = 64
"""Bytes of a cache line, and of one 512-bit store."""


def storage(a: np.ndarray) -> np.ndarray:
    """The array as the kernels see it: halves as their uint16 bits (a view, no copy)."""
    return a.view(np.uint16) if a.dtype == np.float16 else a


def per_thread(width: int, dtype: Any = np.float32) -> np.ndarray:
    """One row of `width` per thread of Numba's pool (indexed by numba.get_thread_id())."""
    return np.empty((numba.config.NUMBA_NUM_THREADS, width), dtype=dtype)


@register_jitable(inline="always")
def line_segments(row):  # type: ignore[no-untyped-def]
    """((0, p), (p, n)) for the 1-D `row` of n elements, p of them before its first cache-line boundary (all of
    them when it ends first): a loop over both segments, one body (`for a, b in line_segments(row)`: a kernel
    that inlined the body twice would trip Numba's SSA checks), stores whole lines in the second."""
    n = row.size
    p = min(n, ((LINE - row.ctypes.data % LINE) % LINE) // row.itemsize)
    return ((0, p), (p, n))
