"""Each op's and step's time inside a composed chain: measured on the CPU, per label, adding up to the launch."""

from __future__ import annotations

import time

import numpy as np
import pytest

from suite.core.registry import REGISTRY, KernelKey, Launch
from suite.kit.layer import STEP_ORDER, STEPS_MS, Op, Step, compose

WAITS = {"short": 0.002, "long": 0.006}
LAUNCHES = 5
"""The first, then four: a power of two, when the medians are written."""


def _busy(seconds: float) -> Step:
    """A step that holds the host for `seconds` (a spin: sleep's granularity would blur the short one)."""

    def run() -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    return Step("", run)


def _chain(monkeypatch: pytest.MonkeyPatch, device: str) -> tuple[Launch, list[float]]:
    """A fake family's op (3 ms) between two spinning steps, composed for `device`; the launches' own times."""
    key = KernelKey("fake_family", "fake", "fused", device)
    monkeypatch.setitem(
        REGISTRY.kernels, key, lambda inputs, out, params, opts: Launch(_busy(0.003).run, notes={"grid": 1})
    )
    steps = [
        Step("short", _busy(WAITS["short"]).run),
        Op("op", "fake_family", {}, np.empty(1), {}),
        Step("long", _busy(WAITS["long"]).run),
    ]
    launch = compose(steps, {"fake_family": "fused"}, backend="fake", device=device, opts={})
    spent = []
    for _ in range(LAUNCHES):
        start = time.perf_counter()
        launch()
        spent.append(time.perf_counter() - start)
    return launch, spent


def test_each_steps_time_is_kept_by_label_and_they_add_up_to_the_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    launch, spent = _chain(monkeypatch, "cpu")
    times = launch.notes[STEPS_MS]
    assert list(times) == launch.notes[STEP_ORDER] == ["short", "op", "long"]
    for label, seconds in {**WAITS, "op": 0.003}.items():
        assert seconds * 1e3 <= times[label] < seconds * 1e3 + 20.0, (label, times)  # a busy host may add, never take
    launch_ms = 1e3 * np.median(spent[1:])  # the first launch is left out of the steps' medians, as it compiles
    # Every step counted once: no fewer than the steps' own spins, no more than a whole launch. On a busy host a
    # launch held up in one step and another in the next lift the median launch above the sum of the steps'
    # medians, so the two are not equal there; a step left out or counted twice still falls outside.
    assert 1e3 * sum((*WAITS.values(), 0.003)) <= sum(times.values()) <= 1.05 * launch_ms + 1.0, (times, launch_ms)
    assert launch.notes["op"] == {"grid": 1}  # the op's own notes stay under its label


def test_a_cuda_chain_records_no_step_times(monkeypatch: pytest.MonkeyPatch) -> None:
    launch, _ = _chain(monkeypatch, "cuda")
    assert STEPS_MS not in launch.notes and STEP_ORDER not in launch.notes


def test_the_first_launch_is_left_out() -> None:
    calls = []
    launch = compose([Step("only", lambda: calls.append(1))], {}, backend="fake", device="cpu", opts={})
    launch()
    assert launch.notes[STEPS_MS] == {}
    launch()
    assert set(launch.notes[STEPS_MS]) == {"only"} and len(calls) == 2


def test_a_launch_held_up_moves_no_median(monkeypatch: pytest.MonkeyPatch) -> None:
    """One launch in four of a step held up twenty times as long: its median is the usual launch's."""
    waits = iter([0.0, 0.001, 0.001, 0.02, 0.001])  # a mean would read 5.75 ms
    launch = compose([Step("held", lambda: _busy(next(waits)).run())], {}, backend="fake", device="cpu", opts={})
    for _ in range(5):
        launch()
    assert 1.0 <= launch.notes[STEPS_MS]["held"] < 3.0
