"""Launch overhead measured through a fake timer: a simulated GPU timeline on which the host's enqueues take time.

The fake driver keeps two clocks, the host's and the GPU stream's. A kernel starts when the GPU is free and the
host has enqueued it; an event fires when the stream reaches it; a spin or a flush occupies the GPU. With the
spin ahead of the start event (`CudaClock.time`) the window holds GPU time alone, so time_ms − time_graph_ms is
zero for any launcher; the host-paced window (`CudaClock.time_paced`) holds every enqueue the GPU waited on, so
the launch overhead it and the graph replay differ by is what an unfused chain's extra launches cost, and it
must be nonzero where the host is slower than the kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from suite.core.registry import KernelKey
from suite.run.config import TimingConfig
from suite.run.graph_timing import graph_timed
from suite.run.stages import Stages, Timed
from suite.run.timing import CudaClock, measure_interleaved

ENQUEUE_NS = 10_000
"""The host's cost of one kernel launch from Python."""
GRAPH_ENQUEUE_NS = 4_000
"""One graph launch, however many kernels it holds."""


class Timeline:
    """The host clock and the GPU stream's, advanced by the driver calls the timer and the launchers make."""

    def __init__(self) -> None:
        self.host = 0
        self.gpu = 0
        timeline = self

        class Event:
            at = 0

            def record(self, stream: int) -> None:
                self.at = max(timeline.gpu, timeline.host)

            def wait(self) -> None:
                timeline.host = max(timeline.host, self.at)

            def elapsed_ms(self, end: Event) -> float:
                return (end.at - self.at) / 1e6

        class Flush:
            def __call__(self, stream: int) -> None:
                timeline.busy(50_000)

        self.Event, self.L2Flush = Event, Flush

    def now(self) -> int:
        return self.host

    def busy(self, ns: int) -> None:
        self.gpu = max(self.gpu, self.host) + ns

    def kernel(self, gpu_ns: int, enqueue_ns: int = ENQUEUE_NS) -> None:
        self.host += enqueue_ns
        self.busy(gpu_ns)

    def shared_stream(self) -> int:
        return 7

    def spin(self, stream: int, ns: int) -> None:
        self.busy(ns)

    def capture(self, stream: int, launch: Launcher) -> Graph:
        return Graph(self, launch.kernels_ns)


@dataclass
class Launcher:
    """A variant's launcher: one launch per kernel, each taking `kernels_ns[i]` on the GPU."""

    timeline: Timeline
    kernels_ns: tuple[int, ...]

    def __call__(self) -> None:
        for ns in self.kernels_ns:
            self.timeline.kernel(ns)


@dataclass
class Graph:
    timeline: Timeline
    kernels_ns: tuple[int, ...]

    def launch(self, stream: int) -> None:
        self.timeline.host += GRAPH_ENQUEUE_NS
        self.timeline.busy(sum(self.kernels_ns))

    def close(self) -> None:
        return None


@dataclass
class Check:
    launcher: Launcher


TIMING = TimingConfig(budget_s=0.0, min_reps=5, max_reps=5, warmup=2)


def test_the_spun_window_holds_gpu_time_alone() -> None:
    """Three 2 µs kernels enqueued at 10 µs each: the spin covers the 30 µs of enqueues (after the warm-up has
    seen them), so the window is the 6 µs the GPU worked."""
    timeline = Timeline()
    clock = CudaClock(timeline, now=timeline.now)
    found = measure_interleaved({"unfused": Launcher(timeline, (2_000, 2_000, 2_000))}, clock, TIMING)
    assert found["unfused"].times_ms == pytest.approx([0.006] * 5)
    assert found["unfused"].late == 0


def test_the_paced_window_holds_the_enqueues_the_gpu_waited_on() -> None:
    timeline = Timeline()
    clock = CudaClock(timeline, now=timeline.now)
    assert clock.time_paced(Launcher(timeline, (2_000, 2_000, 2_000))) == pytest.approx(0.032)  # 3 × 10 + 2 µs
    assert clock.time_paced(Launcher(timeline, (50_000,))) == pytest.approx(0.060)  # 10 µs, then the kernel


def test_launch_overhead_is_nonzero_where_the_host_is_slower_than_the_kernels() -> None:
    """Fused: one 4 µs kernel; unfused: three 2 µs kernels. Graph replays hold the kernels alone (4 and 6 µs),
    the paced windows 14 and 32 µs: fusion saved (32 − 6) − (14 − 4) = 16 µs of launch overhead, which the
    spun time_ms (4 and 6 µs, equal to the graph's) cannot show."""
    timeline = Timeline()
    clock = CudaClock(timeline, now=timeline.now)
    launchers = {"fused": Launcher(timeline, (4_000,)), "unfused": Launcher(timeline, (2_000, 2_000, 2_000))}
    spun = measure_interleaved(launchers, clock, TIMING)
    found = {}
    for variant, launcher in launchers.items():
        ms = spun[variant].median
        timing = Timed(ms, ms, ms, ms, 5, True, tuple(spun[variant].times_ms))
        found[KernelKey("elementwise_chain", "fake", variant, "cuda")] = Stages(check=Check(launcher), timing=timing)  # type: ignore[arg-type]
    out = {k.variant: s.timing for k, s in graph_timed(found, TIMING, clock, timeline).items()}
    assert (out["fused"].time_ms, out["unfused"].time_ms) == pytest.approx((0.004, 0.006))
    assert (out["fused"].time_graph_ms, out["unfused"].time_graph_ms) == pytest.approx((0.004, 0.006))
    paced = {v: t.notes["time_paced_ms"] for v, t in out.items()}
    assert paced == pytest.approx({"fused": 0.014, "unfused": 0.032})
    launch = (paced["unfused"] - out["unfused"].time_graph_ms) - (paced["fused"] - out["fused"].time_graph_ms)
    assert launch == pytest.approx(0.016)
    spun_launch = (out["unfused"].time_ms - out["unfused"].time_graph_ms) - (
        out["fused"].time_ms - out["fused"].time_graph_ms
    )
    assert spun_launch == pytest.approx(0.0)


def test_no_launch_overhead_where_the_kernels_outlast_the_host() -> None:
    """Kernels of 50 µs hide every 10 µs enqueue but the first: fused and unfused each pay one, so the launch
    part of the gain is zero and all of it remains with graphs."""
    timeline = Timeline()
    clock = CudaClock(timeline, now=timeline.now)
    fused, unfused = Launcher(timeline, (50_000,)), Launcher(timeline, (50_000, 50_000))
    over = [clock.time_paced(f) - sum(f.kernels_ns) / 1e6 for f in (fused, unfused)]
    assert over == pytest.approx([0.010, 0.010])
