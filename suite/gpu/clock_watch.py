"""Which timed windows ran while the GPU's clocks were held back, sampled while the timing runs.

A throttle reading before and after a case says only that something happened somewhere in between; a case
times many windows (one per repetition), and a hot card or a power brake can hold the clocks back for a few of
them. `ClockWatch`, open around the timing, reads NVML in a background thread every `period_s` (2 ms by
default): the host time (time.perf_counter_ns), the clock-event mask in words (`nvml.decode`: an idle GPU and
clocks at the applications-clocks setting are no throttling) and the SM clock. It also reads once as it opens
and once as it closes, so that a short timing still has readings. A window, given as two perf_counter_ns
stamps, ran throttled when a reading inside it, or the last one before it (the state in force as it began),
names a reason: `reasons_between` for one window, `throttled_mask` for many.

The readings are kept in flat arrays (16 bytes each, about 30 MB for an hour at 2 ms), sorted by time, so a
window is found by bisection. Without NVML (`nvml._session()` is None) nothing is read, no thread starts, and
every answer is empty: () or all False. An NVML reading that fails is kept as unknown (no reasons, no clock);
nothing here raises for NVML's sake. The thread shares the interpreter with the timing, so each reading costs
the timed host code a few microseconds of the GIL.
"""

from __future__ import annotations

import bisect
import threading
import time
from array import array
from collections.abc import Sequence
from types import TracebackType
from typing import NamedTuple

from suite.gpu import nvml

_UNKNOWN = -1
"""A mask or an SM clock NVML did not give."""
_now = time.perf_counter_ns
"""The host clock every reading and every window is stamped with (tests replace it)."""


class Sample(NamedTuple):
    """One NVML reading: when (perf_counter_ns), the throttling reasons then, the SM clock (None: unknown)."""

    ns: int
    reasons: tuple[str, ...]
    sm_clock_mhz: int | None


class ClockWatch:
    """A context manager that samples NVML's clock-event reasons and SM clock while it is open."""

    def __init__(self, period_s: float = 0.002) -> None:
        if period_s <= 0:
            raise ValueError(f"period_s must be positive, got {period_s}")
        self.period_s = period_s
        self._ns = array("q")
        self._masks = array("q")
        self._clocks = array("q")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._decoded: dict[int, tuple[str, ...]] = {}

    def __enter__(self) -> ClockWatch:
        if self._thread is not None:
            raise RuntimeError("this ClockWatch is already open")
        if nvml._session() is None:
            return self
        self.sample()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="clock-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=1.0)  # the stop wakes it at once; an NVML call in flight may take a while
        self._thread = None
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.sample()

    def sample(self) -> None:
        """Read NVML once now and keep the reading (the thread calls this; a caller may too); no-op without NVML."""
        try:
            found = nvml._session()
            if found is None:
                return
            pynvml, handle = found
            began = _now()
            mask = nvml._mask(pynvml, handle)
            clock = nvml._read(lambda: int(pynvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)))
            self._keep((began + _now()) // 2, _UNKNOWN if mask is None else mask, _UNKNOWN if clock is None else clock)
        except Exception:  # a reading is best effort: the timing it watches must never fail for it
            return

    def _keep(self, ns: int, mask: int, clock: int) -> None:
        with self._lock:
            if not self._ns or ns >= self._ns[-1]:
                self._ns.append(ns)
                self._masks.append(mask)
                self._clocks.append(clock)
                return
            at = bisect.bisect_right(self._ns, ns)  # a caller's reading that lost the race with the thread's
            self._ns.insert(at, ns)
            self._masks.insert(at, mask)
            self._clocks.insert(at, clock)

    def _copy(self) -> tuple[array[int], array[int], array[int]]:
        with self._lock:
            return array("q", self._ns), array("q", self._masks), array("q", self._clocks)

    def _words(self, mask: int) -> tuple[str, ...]:
        if mask <= 0:
            return ()
        if mask not in self._decoded:
            self._decoded[mask] = nvml.decode(mask)
        return self._decoded[mask]

    @property
    def samples(self) -> tuple[Sample, ...]:
        """Every reading so far, oldest first."""
        ns, masks, clocks = self._copy()
        return tuple(
            Sample(t, self._words(m), None if c == _UNKNOWN else c) for t, m, c in zip(ns, masks, clocks, strict=True)
        )

    @staticmethod
    def _first(ns: Sequence[int], start_ns: int) -> int:
        """The index of the first reading that speaks for a window opening at `start_ns`: the first one stamped
        at it, else the last one before it (the state in force), else the first one after it."""
        at = bisect.bisect_left(ns, start_ns)
        return at if at < len(ns) and ns[at] == start_ns else max(at - 1, 0)

    def reasons_between(self, start_ns: int, end_ns: int) -> tuple[str, ...]:
        """The reasons (`nvml.union`) of every reading in [start_ns, end_ns] and of the last one at or before
        start_ns; () where none names any, or without readings. Stamps are time.perf_counter_ns values."""
        if end_ns < start_ns:
            raise ValueError(f"a window ends ({end_ns}) before it starts ({start_ns})")
        ns, masks, _ = self._copy()
        last = bisect.bisect_right(ns, end_ns)
        return nvml.union(*(self._words(m) for m in masks[self._first(ns, start_ns) : last]))

    def throttled_mask(self, stamps: Sequence[tuple[int, int]]) -> list[bool]:
        """For each (start_ns, end_ns) window, whether `reasons_between` it would name a reason; all False
        without readings. One copy of the readings and a bisection per window, however many windows."""
        ns, masks, _ = self._copy()
        seen = [0]  # seen[i]: how many of the first i readings name a reason
        for m in masks:
            seen.append(seen[-1] + bool(self._words(m)))
        flags = []
        for start_ns, end_ns in stamps:
            if end_ns < start_ns:
                raise ValueError(f"a window ends ({end_ns}) before it starts ({start_ns})")
            last = bisect.bisect_right(ns, end_ns)
            flags.append(seen[last] > seen[self._first(ns, start_ns)])
        return flags

    def reasons(self) -> tuple[str, ...]:
        """Every reason any reading named, once (`nvml.union`)."""
        _, masks, _ = self._copy()
        return nvml.union(*(self._words(m) for m in set(masks)))

    def sm_clock_range(self) -> tuple[int, int] | None:
        """The lowest and highest SM clock read (MHz); None without a clock reading."""
        _, _, clocks = self._copy()
        known = [c for c in clocks if c != _UNKNOWN]
        return (min(known), max(known)) if known else None

    def __repr__(self) -> str:
        state = "open" if self._thread is not None else "closed"
        return f"ClockWatch(period_s={self.period_s}, {state}, {len(self._ns)} samples)"
