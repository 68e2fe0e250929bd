"""Clock watching and energy per call on a fake `pynvml`: the windows timed while the clocks were held back are
flagged and the others not (idle and applications clocks are no throttling), the energy counter is read between
two of its moves, and without NVML everything is empty and nothing raises."""

from __future__ import annotations

import sys
import threading
import time
import types

import pytest

from suite.gpu import clock_watch, energy, nvml
from suite.gpu.clock_watch import ClockWatch
from suite.gpu.energy import Energy

IDLE, APP_CLOCKS, SW_POWER, HW_SLOW, SW_THERMAL = 0x1, 0x2, 0x4, 0x8, 0x20


class FakeGPU:
    """What the fake NVML reads: a clock-event mask, an SM clock and an energy counter the test sets; `reads`
    counts the mask readings; `energy_mj` is what the counter shows (a number, or a function of nothing)."""

    def __init__(self, mask: int = 0, clock: int = 1980, energy_mj: object = 1000) -> None:
        self.mask, self.clock, self.energy_mj, self.reads = mask, clock, energy_mj, 0
        self.fail: set[str] = set()

    def module(self) -> types.ModuleType:
        m = types.ModuleType("pynvml")

        def call(name, value):
            def fn(*args):
                if name in self.fail:
                    raise RuntimeError(f"{name}: Not Supported")
                return value(*args)

            setattr(m, name, fn)

        def mask(handle):
            self.reads += 1
            return self.mask

        call("nvmlInit", lambda: None)
        call("nvmlDeviceGetHandleByPciBusId", lambda bus: ("handle", bus))
        call("nvmlDeviceGetHandleByIndex", lambda i: ("handle", i))
        call("nvmlDeviceGetCurrentClocksEventReasons", mask)
        call("nvmlDeviceGetClockInfo", lambda h, kind: self.clock if kind == nvml.NVML_CLOCK_SM else -1)
        call(
            "nvmlDeviceGetTotalEnergyConsumption",
            lambda h: self.energy_mj() if callable(self.energy_mj) else self.energy_mj,
        )
        return m

    def wait_reads(self, more: int = 2) -> None:
        """Until the watch's thread has read the mask `more` times more (a reading begun after now is kept)."""
        target, deadline = self.reads + more, time.monotonic() + 5
        while self.reads < target:
            assert time.monotonic() < deadline, "the watch's thread does not read"
            time.sleep(0.0005)


@pytest.fixture
def install(monkeypatch):
    """Put a fake NVML (a FakeGPU's module, or None: pynvml not installed) where `import pynvml` finds it."""

    def put(gpu: FakeGPU | None) -> FakeGPU | None:
        monkeypatch.setitem(sys.modules, "pynvml", None if gpu is None else gpu.module())
        monkeypatch.setattr(nvml, "cuda_pci_bus_id", lambda: "00000000:1B:00.0")
        nvml._session.cache_clear()
        return gpu

    yield put
    nvml._session.cache_clear()


class FakeClock:
    """A perf_counter_ns the test moves."""

    def __init__(self, ns: int = 0) -> None:
        self.ns = ns

    def __call__(self) -> int:
        return self.ns


def test_windows_are_flagged_by_the_readings_in_them_and_the_state_in_force(install, monkeypatch):
    gpu = install(FakeGPU())
    clock = FakeClock(100)
    monkeypatch.setattr(clock_watch, "_now", clock)
    readings = [(100, 0, 1980), (200, IDLE, 1980), (300, HW_SLOW, 1500), (400, SW_THERMAL | IDLE, 1200),
                (500, APP_CLOCKS | IDLE, 1980)]  # fmt: skip
    with ClockWatch(period_s=60) as watch:  # the thread never reads: every reading is the test's
        for ns, mask, mhz in readings:
            clock.ns, gpu.mask, gpu.clock = ns, mask, mhz
            if ns > 100:
                watch.sample()
        clock.ns, gpu.mask, gpu.clock = 600, 0, 1980  # the closing reading
    assert [s.ns for s in watch.samples] == [100, 200, 300, 400, 500, 600]
    assert watch.samples[2] == (300, ("hw_slowdown",), 1500)
    windows = {
        (90, 95): False,  # before any reading: nothing known
        (110, 190): False,
        (210, 290): False,  # idle is no throttling
        (250, 310): True,  # a reading inside it
        (310, 390): True,  # no reading inside: the one before it is in force
        (300, 300): True,  # a reading stamped at its start
        (410, 450): True,
        (400, 400): True,
        (500, 590): False,  # applications clocks are no throttling
        (500, 500): False,
        (650, 700): False,  # after the last reading: its state
    }
    assert watch.throttled_mask(list(windows)) == list(windows.values())
    assert [bool(watch.reasons_between(*w)) for w in windows] == list(windows.values())
    assert watch.reasons_between(250, 450) == ("hw_slowdown", "sw_thermal_slowdown")
    assert watch.reasons_between(450, 460) == ("sw_thermal_slowdown",)
    assert watch.reasons() == ("hw_slowdown", "sw_thermal_slowdown")
    assert watch.sm_clock_range() == (1200, 1980)
    with pytest.raises(ValueError):
        watch.reasons_between(10, 5)


def test_the_thread_samples_while_open_and_stops_on_exit(install):
    gpu = install(FakeGPU())
    with ClockWatch(period_s=0.001) as watch:
        gpu.wait_reads()
        quiet = (time.perf_counter_ns(), None)
        gpu.wait_reads()
        quiet = (quiet[0], time.perf_counter_ns())
        gpu.wait_reads()  # a reading begun inside the quiet window has read the mask
        gpu.mask = IDLE | SW_POWER | HW_SLOW
        gpu.wait_reads()
        hot = (time.perf_counter_ns(), None)
        gpu.wait_reads()
        hot = (hot[0], time.perf_counter_ns())
        gpu.mask = IDLE | APP_CLOCKS
        gpu.wait_reads()
        cool = (time.perf_counter_ns(), None)
        gpu.wait_reads()
        cool = (cool[0], time.perf_counter_ns())
        assert any(t.name == "clock-watch" for t in threading.enumerate())
    assert not any(t.name == "clock-watch" for t in threading.enumerate())
    assert watch.throttled_mask([quiet, hot, cool]) == [False, True, False]
    assert watch.reasons_between(*hot) == ("sw_power_cap", "hw_slowdown")
    stamps = [s.ns for s in watch.samples]
    assert len(stamps) >= 8 and stamps == sorted(stamps)
    reads = gpu.reads
    time.sleep(0.01)
    assert gpu.reads == reads  # closed: no more readings


@pytest.mark.parametrize("gpu", [None, "no driver"], ids=["not installed", "no driver"])
def test_without_nvml_nothing_is_read_and_nothing_raises(install, gpu):
    fake = FakeGPU()
    fake.fail = {"nvmlInit"}
    install(None if gpu is None else fake)
    with ClockWatch(period_s=0.001) as watch:
        assert watch._thread is None
    assert watch.samples == () and watch.reasons() == () and watch.sm_clock_range() is None
    assert watch.reasons_between(0, 10**18) == () and watch.throttled_mask([(0, 1), (2, 10**18)]) == [False, False]
    launched = []
    assert energy.counter_mj() is None
    assert energy.per_call(lambda: launched.append(1), lambda: launched.append(0), min_s=0.01) is None
    assert launched == []


def test_readings_the_gpu_does_not_give_are_unknown(install):
    gpu = install(FakeGPU(mask=HW_SLOW))
    gpu.fail = {
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetClockInfo",
        "nvmlDeviceGetTotalEnergyConsumption",
    }
    with ClockWatch(period_s=0.001) as watch:
        pass
    assert watch.samples and all(s.reasons == () and s.sm_clock_mhz is None for s in watch.samples)
    assert watch.sm_clock_range() is None and watch.throttled_mask([(0, 10**18)]) == [False]
    assert energy.counter_mj() is None and energy.per_call(lambda: None, lambda: None, min_s=0.01) is None


def _counting(gpu: FakeGPU, mj_per_call: int) -> tuple[list[int], list[int]]:
    """A launch that spends `mj_per_call` on the fake counter; returns (launches, synchronizations) logs."""
    launches: list[int] = []
    synced: list[int] = []
    gpu.energy_mj = lambda: 1000 + mj_per_call * len(launches)
    return launches, synced


def test_joules_per_call_from_a_counter_that_moves_each_call(install):
    gpu = install(FakeGPU())
    launches, synced = _counting(gpu, 5)
    got = energy.per_call(
        lambda: launches.append(1), lambda: synced.append(len(launches)), min_s=0.01, max_calls=10**7
    )  # a fake launch takes well under a microsecond: 100 000 of them would not fill the window
    assert got is not None and got.joules_per_call == pytest.approx(0.005, rel=1e-12)
    assert 0 < got.calls <= len(launches) and got.seconds >= 0.01
    assert synced == [len(launches)]  # once, after the last launch


def test_the_window_runs_between_two_moves_of_a_coarse_counter(install, monkeypatch):
    """Each call takes 100 µs; the counter shows the energy of the calls run by its last refresh, every 20 ms
    from 7 ms on. Moves at 70 calls (settling), 270 (opens), 470, 670 (under 50 ms), 870 (closes)."""
    gpu = install(FakeGPU())
    clock = FakeClock(10**12)
    start = clock.ns
    monkeypatch.setattr(energy, "_now", clock)
    calls = []

    def launch():
        calls.append(1)
        clock.ns += 100_000

    def shown(period_ms: int = 20) -> int:
        since = clock.ns - start - 7_000_000
        refreshed = start + 7_000_000 + since // (period_ms * 10**6) * period_ms * 10**6
        return 1000 + 5 * ((refreshed - start) // 100_000) if since >= 0 else 1000

    gpu.energy_mj = shown
    got = energy.per_call(launch, lambda: None, min_s=0.05)
    assert got == Energy(joules_per_call=pytest.approx(0.005, rel=1e-12), calls=600, seconds=pytest.approx(0.06))
    gpu.energy_mj = lambda: shown(150)  # moves at 7 and 157 ms: no second move within 20 + 4 × 50 ms
    calls.clear()
    assert energy.per_call(launch, lambda: None, min_s=0.05) is None and len(calls) == 2200


def test_calls_are_counted_once_the_launch_queue_is_full(install, monkeypatch):
    """A GPU that runs a call every 100 µs behind a queue of 1000: the host issues one every 5 µs until the queue
    is full (about 5 ms), then one as each finishes. The counter shows the calls run by its last refresh, every
    20 ms from 2 ms on: a window opened at 2 ms would count the 1000 calls queued on the host as run."""
    gpu = install(FakeGPU())
    clock = FakeClock(10**12)
    start, issued = clock.ns, [0]
    monkeypatch.setattr(energy, "_now", clock)

    def ran() -> int:
        return (clock.ns - start) // 100_000

    def launch():
        queued = issued[0] - ran()
        clock.ns = start + (issued[0] - 999) * 100_000 if queued >= 1000 else clock.ns + 5_000
        issued[0] += 1

    def shown() -> int:
        since = clock.ns - start - 2_000_000
        return 1000 + 5 * ((2_000_000 + since // 20_000_000 * 20_000_000) // 100_000) if since >= 0 else 1000

    gpu.energy_mj = shown
    got = energy.per_call(launch, lambda: None, min_s=0.05)
    assert got is not None and got.joules_per_call == pytest.approx(0.005, rel=0.02)
    assert got.calls == pytest.approx(600, abs=10)


def test_a_counter_that_does_not_move_gives_no_measure(install):
    gpu = install(FakeGPU(energy_mj=1234))
    launches, synced = [], []
    began = time.perf_counter()
    assert energy.per_call(lambda: launches.append(1), lambda: synced.append(1), min_s=0.01) is None
    assert time.perf_counter() - began < 0.5 and launches and synced == [1]
    launches, synced = _counting(gpu, 5)
    assert energy.per_call(lambda: launches.append(1), lambda: synced.append(1), min_s=0.01, max_calls=50) is None
    assert len(launches) == 50 and synced == [1]
    launches, synced = _counting(gpu, -5)  # a counter that runs backwards (the driver reloaded): no measure
    assert energy.per_call(lambda: launches.append(1), lambda: synced.append(1), min_s=0.01, max_calls=10**7) is None


def test_the_energy_ratio():
    spent = Energy(0.010, 100, 0.3)
    assert energy.ratio(spent, Energy(0.004, 250, 0.3)) == pytest.approx(2.5)
    assert energy.ratio(Energy(0.004, 250, 0.3), spent) == pytest.approx(0.4)
    assert energy.ratio(None, spent) is None and energy.ratio(spent, None) is None
    assert energy.ratio(spent, Energy(0.0, 100, 0.3)) is None
