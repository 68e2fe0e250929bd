"""Energy per call from NVML's total energy counter, beside the time per call.

Fusion saves memory traffic: a fused kernel that moves fewer bytes should spend less energy as well as less
time, and the two need not shrink by the same factor. NVML keeps a running total of the GPU's energy
(nvmlDeviceGetTotalEnergyConsumption: millijoules since the driver loaded, Volta and newer). The counter is
coarse: it moves only when the driver refreshes it, every 10 to 100 ms, so no single call can be measured and
timing's interleaved repetitions cannot be told apart. Each variant is therefore run back to back for a window
of its own, after the interleaved timing, and its energy is divided by the calls that window held.

`per_call` measures between two moves of the counter, not between two reads of it: a read returns the total
as of the last refresh, so a window from a read to a read would lose or gain up to one refresh period of
energy at each end. It launches for a short settling time first (the launch queue fills; from then on the
host issues calls as fast as the GPU finishes them, so calls counted on the host are calls run on the GPU),
then keeps launching while it polls the counter about every millisecond: the first move opens the window,
the first move at least `min_s` later closes it. Where the counter has not moved twice within 4 × min_s of
settling (a GPU without the counter, a stalled driver), or `max_calls` calls are spent first, there is no
measure (None).

Without NVML, or where the GPU does not keep the counter, everything here returns None and never raises.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from suite.gpu import nvml

_SETTLE_S = 0.02
"""Launching before a move of the counter may open the window: the launch queue fills in a few ms."""
_POLL_S = 0.001
"""How often the counter is read while launching: the error in each end of the window, in seconds of calls."""
_now = time.perf_counter_ns
"""The host clock (tests replace it)."""


@dataclass(frozen=True)
class Energy:
    """What a window of back-to-back calls spent: joules per call, over `calls` calls in `seconds`."""

    joules_per_call: float
    calls: int
    seconds: float


def counter_mj() -> int | None:
    """NVML's total energy of CUDA's device 0, millijoules since the driver loaded; None without NVML or where
    the GPU does not keep it."""
    found = nvml._session()
    if found is None:
        return None
    pynvml, handle = found
    return nvml._read(lambda: int(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)))


def per_call(
    launch: Callable[[], None], synchronize: Callable[[], None], min_s: float = 0.3, max_calls: int = 100_000
) -> Energy | None:
    """The energy of one `launch()`, run back to back between two moves of the energy counter at least `min_s`
    apart (see the module's docstring); `synchronize()` waits for the launches when the window is over, None
    or not. None without the counter, or where it did not move twice in 4 × min_s (after the settling) or in
    `max_calls` calls."""
    last = counter_mj()
    if last is None:
        return None
    began = polled = _now()
    settled = began + int(_SETTLE_S * 1e9)
    give_up = settled + int(4 * min_s * 1e9)
    window, poll = int(min_s * 1e9), int(_POLL_S * 1e9)
    opened: tuple[int, int, int] | None = None  # (ns, calls, mJ) at the move that opened the window
    calls = 0
    try:
        while calls < max_calls:
            launch()
            calls += 1
            now = _now()
            if now >= give_up:
                return None
            if now - polled < poll:
                continue
            polled = now
            mj = counter_mj()
            if mj is None:
                return None
            if mj == last:
                continue
            last = mj
            if now < settled:
                continue
            if opened is None:
                opened = (now, calls, mj)
            elif now - opened[0] >= window:
                spent_j, ran = (mj - opened[2]) / 1000, calls - opened[1]
                return Energy(spent_j / ran, ran, (now - opened[0]) / 1e9) if spent_j > 0 else None
        return None
    finally:
        synchronize()


def ratio(baseline: Energy | None, candidate: Energy | None) -> float | None:
    """The baseline's joules per call over the candidate's: above 1, the candidate spends less energy per call;
    None where either has no measure."""
    if baseline is None or candidate is None or candidate.joules_per_call <= 0:
        return None
    return baseline.joules_per_call / candidate.joules_per_call
