"""The stream-discipline check on the CPU, with a fake shared stream: a hold defers what is queued on it until
the device is synchronised, so a launcher that writes its output at once (a kernel on another stream) is caught,
one that queues behind the hold passes, and one that waits for the stream (a synchronising launcher) or whose
host work outlasts every hold is reported unchecked with the cause."""

from __future__ import annotations

import time

import numpy as np
import pytest

from suite.run.stream_check import Probe, check, sample_spans

HOLDS = (20.0, 40.0)


class FakeStream:
    """A shared stream with a spin: work queued while a hold lasts runs when the device is synchronised."""

    def __init__(self, out: np.ndarray) -> None:
        self.out, self.queue, self.until = out, [], 0.0

    def enqueue(self, work) -> None:
        if time.perf_counter() < self.until:
            self.queue.append(work)
        else:
            work()

    def drain(self) -> None:
        """What a synchronising launcher does: wait out the hold and run what was queued."""
        time.sleep(max(0.0, self.until - time.perf_counter()))
        for work in self.queue:
            work()
        self.queue.clear()

    def probe(self) -> Probe:
        def poison() -> None:
            self.drain()
            self.out.fill(np.nan)

        def hold(ns: int) -> None:
            self.until = time.perf_counter() + ns / 1e9

        return Probe(poison, hold, lambda: time.perf_counter() < self.until, lambda: self.out.copy())


def _write(out: np.ndarray, rows: slice = slice(None)):
    def work() -> None:
        out[rows] = 1.5

    return work


@pytest.fixture
def stream() -> FakeStream:
    return FakeStream(np.full((64, 33), np.nan, np.float32))


def test_a_launcher_queuing_behind_the_hold_is_on_the_stream(stream: FakeStream) -> None:
    found = check(lambda: stream.enqueue(_write(stream.out)), stream.probe(), HOLDS)
    assert found.ok is True and found.note == "on the shared stream"
    assert np.isnan(stream.out).all()  # poisoned again once the held launch has run


def test_a_kernel_on_another_stream_is_caught_with_what_it_wrote(stream: FakeStream) -> None:
    def launch() -> None:
        stream.enqueue(_write(stream.out))
        _write(stream.out, slice(0, 2))()  # one of its kernels ignores the shared stream

    found = check(launch, stream.probe(), HOLDS)
    assert found.ok is False
    assert "66 of 2112 sampled output values were written" in found.reason and "another stream" in found.reason


def test_a_launcher_that_synchronises_is_named_and_not_passed(stream: FakeStream) -> None:
    def launch() -> None:
        stream.enqueue(_write(stream.out))
        stream.drain()

    found = check(launch, stream.probe(), HOLDS)
    assert found.ok is None and "synchronises with the shared stream" in found.reason and "40 ms" in found.reason


def test_a_hold_that_ends_before_the_read_back_is_retried_longer(stream: FakeStream) -> None:
    calls: list[float] = []

    def launch() -> None:  # slow host work on the first call only; the longer hold then outlasts it
        calls.append(time.perf_counter())
        if len(calls) == 1:
            time.sleep(0.03)
        stream.enqueue(_write(stream.out))

    found = check(launch, stream.probe(), HOLDS)
    assert found.ok is True and len(calls) == 2


def test_sample_spans_cover_a_small_buffer_whole_and_a_large_one_from_first_to_last_byte() -> None:
    assert sample_spans(1000, 4) == [(0, 1000)]
    spans = sample_spans(1 << 26, 2, samples=8, chunk=4098)
    assert len(spans) == 8 and spans[0][0] == 0 and spans[-1][0] + spans[-1][1] == 1 << 26
    assert all(length == 4098 and offset % 2 == 0 for offset, length in spans)
    spans = sample_spans(3 * (1 << 20) + 12, 4, samples=4, chunk=1 << 16)
    assert spans[-1][0] + spans[-1][1] <= 3 * (1 << 20) + 12 and all(o % 4 == 0 for o, _ in spans)
