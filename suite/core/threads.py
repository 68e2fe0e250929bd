"""CPU thread pools that give their cores back when idle, so interleaved implementations do not time each other.

The suite alternates implementations rep by rep (`suite.run.measure`). By default, OpenBLAS's helper threads
spin for about 2²⁸ cycles after every call, which is about 0.1 s here. The Numba repetition that follows a NumPy
matmul then starts with one core of two, and at 1024³ float32 Numba's tiled kernel measured 0.43× NumPy where
it is 1.34× with the threads sleeping at once. Each library still runs its own calls at full speed: the few
microseconds to wake a sleeping thread are lost in any case large enough to time.

Values the user has set win (`setdefault`). They must be in the environment before NumPy loads OpenBLAS, so
`python -m suite` sets them first, and the worker process inherits them.
"""

from __future__ import annotations

import os

QUIET_POOLS = {"OPENBLAS_THREAD_TIMEOUT": "4"}
"""OpenBLAS: spin 2⁴ cycles before sleeping (its minimum; the default is 28)."""


def quiet_thread_pools() -> None:
    for name, value in QUIET_POOLS.items():
        os.environ.setdefault(name, value)
