"""The CUDA timer's discipline, checked without a GPU: its own kernels (read flush, spin) assemble for sm_80 and
sm_90 with no spills; each repetition is flush, spin, start event, launch, end event, with the spin outlasting the
host's enqueue of the launcher; CUDA-graph timing records replays where a launcher can be captured and says why
where not. The same paths on a device are tests/test_gpu_device.py's."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from suite.core.registry import KernelKey
from suite.gpu import assembler, ptxas, timer_kernels
from suite.run.config import TimingConfig
from suite.run.graph_timing import graph_timed
from suite.run.stages import Stages, Timed
from suite.run.timing import CudaClock, measure_interleaved


@pytest.mark.compile
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_timer_kernels_assemble_without_spills(arch: str) -> None:
    ptx = timer_kernels.PTX if arch == "sm_80" else timer_kernels.PTX.replace(".version 7.0", ".version 7.8")
    log, _tool = assembler.assemble(ptx.replace(".target sm_80", f".target {arch}"), prefer="nvjitlink")
    found = ptxas.parse_ptxas(log)
    assert set(found) == {timer_kernels.READ_FLUSH, timer_kernels.SPIN}
    for kernel in found.values():
        assert 0 < kernel.registers <= 32 and kernel.spill_bytes == 0 and kernel.stack_bytes == 0


def test_flush_grid_fills_the_device_and_never_exceeds_the_work() -> None:
    assert timer_kernels.flush_grid(vectors=10, sms=132) == 1
    assert timer_kernels.flush_grid(vectors=1 << 24, sms=132) == 132 * timer_kernels.FLUSH_BLOCKS_PER_SM


class FakeDriver:
    """The driver calls the timer makes, recorded in order."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        driver = self

        class Event:
            def record(self, stream: int) -> None:
                driver.calls.append(("record", id(self)))

            def elapsed_ms(self, end: object) -> float:
                return 1.0

        class Flush:
            def __call__(self, stream: int) -> None:
                driver.calls.append(("flush",))

        self.Event, self.L2Flush = Event, Flush

    def shared_stream(self) -> int:
        return 7

    def spin(self, stream: int, ns: int) -> None:
        self.calls.append(("spin", ns))


def test_each_repetition_is_flush_spin_start_launch_end() -> None:
    driver = FakeDriver()
    clock = CudaClock(driver)
    clock.time(lambda: driver.calls.append(("launch",)))
    kinds = [c[0] for c in driver.calls]
    assert kinds == ["flush", "spin", "record", "launch", "record"]
    assert driver.calls[2][1] == id(clock.start) and driver.calls[4][1] == id(clock.end)


def test_the_spin_outlasts_recent_enqueues_and_forgets_a_pause() -> None:
    driver = FakeDriver()
    clock = CudaClock(driver)
    assert clock.spin_ns() == CudaClock.MIN_SPIN_NS  # nothing seen yet
    clock.time(lambda: time.sleep(0.002))  # a launcher whose host side takes 2 ms: this window was late
    assert clock.last_late
    spin = clock.spin_ns()
    assert CudaClock.LEAD * 2_000_000 <= spin <= CudaClock.MAX_SPIN_NS
    clock.time(lambda: None)  # a fast one: covered by the spin, not late
    assert not clock.last_late and [c for c in driver.calls if c[0] == "spin"][-1] == ("spin", spin)
    for _ in range(CudaClock.WINDOW):  # a pause long ago no longer sets the spin: recent enqueues do
        clock.time(lambda: None)
    assert clock.spin_ns() == CudaClock.MIN_SPIN_NS
    clock.recent.extend([10**12] * CudaClock.WINDOW)
    assert clock.spin_ns() == CudaClock.MAX_SPIN_NS


def test_one_pause_among_recent_enqueues_does_not_set_the_spin() -> None:
    clock = CudaClock(FakeDriver())
    clock.recent.extend([5_000] * (CudaClock.WINDOW - 1) + [20_000_000])  # one garbage-collector pause
    assert clock.spin_ns() == CudaClock.MIN_SPIN_NS


def test_late_launches_are_counted_in_timed_repetitions_only() -> None:
    """Warm-up calls that outlast their spin (the first always may: nothing has been seen yet) are not late; a
    timed one that does is."""
    clock = CudaClock(FakeDriver())
    calls = iter(range(100))
    host_s = {0: 0.001, 1: 0.005, 4: 0.05}  # both warm-up calls outlast their spin, and the third timed one

    def launcher() -> None:
        time.sleep(host_s.get(next(calls), 0.0))

    found = measure_interleaved({"k": launcher}, clock, TimingConfig(budget_s=0.0, min_reps=5, warmup=2))
    assert found["k"].reps == 5 and found["k"].late == 1


@dataclass
class FakeCheck:
    launcher: object


class FakeGraph:
    closed = 0

    def __init__(self, launch: object) -> None:
        self.launches = 0

    def launch(self, stream: int) -> None:
        self.launches += 1

    def close(self) -> None:
        FakeGraph.closed += 1


class CaptureDriver:
    def capture(self, stream: int, launch: object) -> FakeGraph:
        if getattr(launch, "allocates", False):
            raise RuntimeError("cuStreamEndCapture (the launcher did something a graph cannot hold) failed")
        return FakeGraph(launch)


class CountingClock:
    stream = 7

    def time(self, launch: object) -> float:
        launch()
        return 0.5


def test_graph_timing_replays_what_can_be_captured_and_says_why_not() -> None:
    def plain() -> None:
        return None

    def allocating() -> None:
        return None

    allocating.allocates = True  # type: ignore[attr-defined]
    keys = [KernelKey("softmax", "cupy", v, "cuda") for v in ("fused", "unfused")]
    timing = Timed(2.0, 1.9, 1.95, 2.05, 5, True, (2.0,) * 5)
    found = {
        keys[0]: Stages(check=FakeCheck(plain), timing=timing),  # type: ignore[arg-type]
        keys[1]: Stages(check=FakeCheck(allocating), timing=timing),  # type: ignore[arg-type]
    }
    FakeGraph.closed = 0
    out = graph_timed(found, TimingConfig(budget_s=0.0, min_reps=3, warmup=1), CountingClock(), CaptureDriver())
    assert out[keys[0]].timing.time_graph_ms == 0.5 and out[keys[0]].timing.time_ms == 2.0
    assert out[keys[1]].timing.time_graph_ms is None and out[keys[1]].timing.time_ms == 2.0
    assert out[keys[1]].timing.notes["graph"].startswith("not captured: RuntimeError: cuStreamEndCapture")
    assert FakeGraph.closed == 1
