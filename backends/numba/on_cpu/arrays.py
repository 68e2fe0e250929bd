"""How the CPU kernels see their arrays: halves as their uint16 bits, scratch as one row per Numba thread.

Numba's CPU target has no float16 type, so every kernel reads and writes half-precision arrays as their bits
and converts in its loops (`backends.numba.ops.VECTOR_CODECS`); the views here cost no copy. Scratch that a
parallel loop needs is allocated by the entry, outside the timed launch, one row for each thread of Numba's
pool, which a kernel indexes with `numba.get_thread_id()`.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np


def storage(a: np.ndarray) -> np.ndarray:
    """The array as the kernels see it: halves as their uint16 bits (a view, no copy)."""
    return a.view(np.uint16) if a.dtype == np.float16 else a


def per_thread(width: int, dtype: Any = np.float32) -> np.ndarray:
    """One row of `width` per thread of Numba's pool (indexed by numba.get_thread_id())."""
    return np.empty((numba.config.NUMBA_NUM_THREADS, width), dtype=dtype)
