"""A kernel made slower on purpose: what checks that a regression gate notices a regression.

`backend_options.<backend>.slowdown_pct=20` (with `slowdown_variant`, default fused) wraps each launcher of that
variant on that backend so that every launch also spins for 20% of the kernel's own time, measured once as it is
built (the median of a few calls). On the CPU the spin is a busy loop of the calling thread after the kernel
returns; on CUDA a spin kernel queued behind it on the shared stream, so the events around a repetition hold it.
The values the kernel computes are untouched: only its time grows, by a known fraction, which is what `suite
compare` must then flag.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from suite.core.registry import Launch, as_launch

CALIBRATION_CALLS = 5


def wanted(opts: Mapping[str, Any], variant: str) -> float:
    """The fraction of its time a launch of `variant` must add under these backend options (0: none)."""
    pct = opts.get("slowdown_pct") or 0
    return pct / 100 if pct and variant == opts.get("slowdown_variant", "fused") else 0.0


def slowed(
    launch: Callable[[], None],
    fraction: float,
    synchronize: Callable[[], None],
    spin: Callable[[int], None] | None = None,
) -> Launch:
    """`launch` followed by a spin of `fraction` of its median time over CALIBRATION_CALLS calls (each
    synchronised); `spin(ns)` queues the spin on a device, else the calling thread busy-waits."""
    times = []
    for _ in range(CALIBRATION_CALLS):
        start = time.perf_counter_ns()
        launch()
        synchronize()
        times.append(time.perf_counter_ns() - start)
    extra_ns = int(fraction * float(np.median(times)))

    def busy(ns: int) -> None:
        until = time.perf_counter_ns() + ns
        while time.perf_counter_ns() < until:
            pass

    wait = spin or busy

    def launch_slowed() -> None:
        launch()
        wait(extra_ns)

    notes = as_launch(launch).notes  # the launcher's own notes (the same dict: it may add to them as it runs)
    notes["slowdown_ns"] = extra_ns
    return Launch(launch_slowed, notes=notes)
