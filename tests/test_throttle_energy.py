"""On CUDA, repetitions taken while NVML saw the clocks held back are left out of the time and the verdicts, a
case throttled throughout gets no verdict, and each implementation's joules per call give the fused-vs-unfused
energy ratio: the wiring of `suite.gpu.clock_watch` and `suite.gpu.energy` into the timing, on fakes (no GPU)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from suite.core.registry import KernelKey
from suite.core.targets import NATIVE
from suite.run import measure
from suite.run.config import TimingConfig
from suite.run.stages import Availability, Check, Stages, Timed
from suite.run.timing import Timing

FUSED, UNFUSED = KernelKey("s", "cupy", "fused", "cuda"), KernelKey("s", "cupy", "unfused", "cuda")


class Scn:
    pairs = (("fused", "unfused"),)
    rivals = ()


class StepClock:
    """A CUDA clock stand-in: the fused kernel takes 1 ms, the unfused 2 ms, ×3 in the rounds NVML marks."""

    late = 0

    def __init__(self) -> None:
        self.calls = 0

    def time(self, launch) -> float:
        self.calls += 1
        return launch()


class FakeWatch:
    """ClockWatch's part the timing uses: windows judged by `mask(stamps)`, every judged list kept in `seen`."""

    def __init__(self, mask) -> None:
        self.mask, self.seen = mask, []

    def __call__(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def throttled_mask(self, stamps):
        self.seen.append(list(stamps))
        return self.mask(stamps)


def _stages(ms: float, target) -> Stages:
    return Stages(Availability(NATIVE, target=target), check=Check("ok", launcher=lambda: ms))


def test_throttled_repetitions_are_left_out_and_energy_gives_the_ratio(monkeypatch) -> None:
    throttled_rounds = {3, 4, 5}
    joules = {1.0: 0.010, 2.0: 0.025}
    monkeypatch.setattr(measure, "ClockWatch", FakeWatch(lambda s: [i in throttled_rounds for i in range(len(s))]))
    monkeypatch.setattr(measure.energy, "per_call", lambda launch, sync, min_s, max_calls: SimpleNamespace(
        joules_per_call=joules[launch()]))  # fmt: skip
    target = SimpleNamespace(synchronize=lambda: None)
    found = {FUSED: _stages(1.0, target), UNFUSED: _stages(2.0, target)}
    timing = TimingConfig(budget_s=0.0, min_reps=10, max_reps=10, warmup=0, min_blocks=1, max_blocks=1)
    job = SimpleNamespace(timing=timing)
    timed, _ = measure.timed(found, job, StepClock())
    fused = timed[FUSED].timing
    assert fused.throttled_reps == 3 and fused.excluded == (False,) * 3 + (True,) * 3 + (False,) * 4
    assert fused.energy_j == pytest.approx(0.010) and timed[UNFUSED].timing.energy_j == pytest.approx(0.025)
    compared = measure.compared(timed, Scn(), seed=0)
    assert compared[FUSED].comparison.energy_ratio == pytest.approx(2.5)
    assert compared[FUSED].comparison.speedup == pytest.approx(2.0)


def test_slow_rounds_taken_while_throttled_do_not_reach_the_time_or_the_verdict() -> None:
    times = [1.0, 1.0, 5.0, 5.0, 5.0, 1.0, 1.0]
    flags = [False, False, True, True, True, False, False]
    t = Timed.of(Timing(list(times), [0] * 7), True, excluded=flags)
    assert t.time_ms == 1.0 and t.throttled_reps == 3 and t.times_ms == tuple(times)
    base = Timed.of(Timing([2.0] * 7, [0] * 7), True, excluded=flags)
    cand = Timed.of(Timing([1.0, 1.0, 9.0, 9.0, 9.0, 1.0, 1.0], [0] * 7), True, excluded=flags)
    assert measure._paired(base, cand, seed=0).speedup == pytest.approx(2.0)  # the 9 ms rounds were dropped


def test_a_case_throttled_throughout_has_no_verdict() -> None:
    every = [True] * 5
    base = Timed.of(Timing([2.0] * 5, [0] * 5), True, excluded=every)
    cand = Timed.of(Timing([1.0] * 5, [0] * 5), True, excluded=every)
    found = {FUSED: Stages(Availability(NATIVE), timing=cand), UNFUSED: Stages(Availability(NATIVE), timing=base)}
    assert measure.compared(found, Scn(), seed=0)[FUSED].comparison is None
    assert cand.throttled_reps == 5 and cand.time_ms == 1.0  # the time is still said, from every repetition


def test_the_report_counts_the_repetitions_left_out_and_the_energy_saved() -> None:
    from suite.report.throttle import flagged

    data = pd.DataFrame({"throttled": ["hw_slowdown", "", ""], "throttled_reps": [3, 0, None],
                         "reps": [10, 10, 10], "time_ms": [1.0, 2.0, 3.0], "energy_ratio": [2.5, None, None],
                         "speedup": [2.0, None, None]})  # fmt: skip
    lines = "\n".join(flagged(data))
    assert "3 of 10 repetitions of 1 rows" in lines and "0 rows were throttled throughout" in lines
    assert "spent 2.50× the candidate's energy per call" in lines and "took 2.00× its time" in lines


def test_the_watch_judges_each_round_by_host_stamps_that_bracket_it(monkeypatch) -> None:
    watch = FakeWatch(lambda stamps: [False] * len(stamps))
    monkeypatch.setattr(measure, "ClockWatch", watch)
    target = SimpleNamespace(synchronize=lambda: None)
    job = SimpleNamespace(timing=TimingConfig(budget_s=0.0, min_reps=4, max_reps=4, warmup=0, min_blocks=1,
                                              max_blocks=1, energy_s=0.0))  # fmt: skip
    timed, _ = measure.timed({FUSED: _stages(1.0, target)}, job, StepClock())
    (stamps,) = watch.seen
    assert len(stamps) == 4 and all(a <= b for a, b in stamps)
    assert all(stamps[i][1] <= stamps[i + 1][0] for i in range(3))  # one window per round, in order
    assert timed[FUSED].timing.throttled_reps == 0 and timed[FUSED].timing.energy_j is None  # energy_s=0: off
