"""Stream discipline: every kernel of a CUDA implementation runs on the shared stream, or its time is not measured.

The timer records its events on the one shared stream (`suite.gpu.driver.shared_stream`); a kernel a launcher
queues anywhere else — a library's default stream, a stream of its own — runs outside the window, and the row
would time the launch of nothing. A launcher that synchronises the device or the stream puts a host wait in the
window instead. Neither shows in the numerics: the output is right either way.

How it is caught, once per implementation after its numerics passed: with the output poisoned again, a spin
kernel holds the shared stream; the launcher is called; while the hold lasts, samples of the output are read back
on a private stream, which does not wait for the shared one. A disciplined launcher's kernels are all queued
behind the hold, so every sample is still poison. A written sample means a kernel ran elsewhere. The reading
counts only if the hold was still on after it; where the launcher's host work outlasted the hold, the hold grows
(`HOLDS_MS`), and past the longest the implementation is reported unchecked — a launcher that synchronises
returns only after the hold ended every time, and is named as doing so.

The device side comes in as a `Probe`, so the logic is tested on the CPU with a fake stream
(tests/test_stream_check.py) and on a GPU with real kernels launched off the stream (tests/test_gpu_stream.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

HOLDS_MS = (25.0, 100.0, 400.0)
"""Holds tried in turn, until one outlasts the launcher's host work and the read-back."""
SAMPLES, SAMPLE_BYTES = 64, 16 * 1024
"""Chunks of the output read while the stream is held, evenly spaced; a small output is read whole."""


@dataclass(frozen=True)
class Probe:
    """What the check needs of the device: `poison()` the output and wait for the device to be idle; `hold(ns)`
    queue a spin on the shared stream; `held()` whether the shared stream still has work; `peek()` output
    samples read without waiting for the shared stream."""

    poison: Callable[[], None]
    hold: Callable[[int], None]
    held: Callable[[], bool]
    peek: Callable[[], np.ndarray]


@dataclass(frozen=True)
class Discipline:
    """`ok` True: every sample was poison while the stream was held; False: `reason` says what was written;
    None: not checked, `reason` says why."""

    ok: bool | None
    reason: str

    @property
    def note(self) -> str:
        return "on the shared stream" if self.ok else self.reason


def check(launcher: Callable[[], None], probe: Probe, holds_ms: tuple[float, ...] = HOLDS_MS) -> Discipline:
    """Launch once behind a hold of the shared stream and judge whether anything was written before it ended."""
    waited = 0
    for hold_ms in holds_ms:
        probe.poison()
        probe.hold(int(hold_ms * 1e6))
        start = time.perf_counter()
        launcher()
        host_ms = (time.perf_counter() - start) * 1e3
        early = probe.peek()
        if not probe.held():
            waited += host_ms >= hold_ms
            continue
        probe.poison()  # the launch finishes behind the hold; the timed repetitions start from a quiet device
        written = int(np.count_nonzero(~np.isnan(early)))
        if written == 0:
            return Discipline(True, "")
        return Discipline(
            False,
            f"stream discipline: {written} of {early.size} sampled output values were written "
            f"while the shared stream was held ({hold_ms:g} ms): a kernel ran on another stream, "
            "outside the timer's events",
        )
    probe.poison()
    if waited == len(holds_ms):
        return Discipline(
            None,
            f"stream discipline not checked: the launcher returned only after each hold (up to "
            f"{holds_ms[-1]:g} ms) had ended, so it synchronises with the shared stream or its "
            "host work takes that long",
        )
    return Discipline(
        None, f"stream discipline not checked: reading the output back outlasted a {holds_ms[-1]:g} ms hold"
    )


def sample_spans(
    nbytes: int, itemsize: int, samples: int = SAMPLES, chunk: int = SAMPLE_BYTES
) -> list[tuple[int, int]]:
    """(offset, length) in bytes of the chunks read: the whole buffer when it is small, else `samples` chunks of
    `chunk` bytes spread evenly from the first byte to the last, aligned to the element size."""
    if nbytes <= samples * chunk:
        return [(0, nbytes)]
    chunk -= chunk % itemsize
    last = nbytes - chunk
    offsets = sorted({(last * i // (samples - 1)) // itemsize * itemsize for i in range(samples)})
    return [(offset, chunk) for offset in offsets]


def device_probe(out: Any, target: Any, stream: int) -> Probe:
    """The probe of a CUDA output buffer (anything with `__cuda_array_interface__`: CuPy, torch, Numba arrays)."""
    from suite.gpu import driver

    face = out.__cuda_array_interface__
    dtype = np.dtype(face["typestr"])
    nbytes = int(np.prod(face["shape"], dtype=np.int64)) * dtype.itemsize
    spans = sample_spans(nbytes, dtype.itemsize)
    base = int(face["data"][0])

    def poison() -> None:
        target.poison(out)
        target.synchronize()

    def peek() -> np.ndarray:
        chunks = [np.frombuffer(driver.read_back(base + offset, length), dtype) for offset, length in spans]
        return np.concatenate(chunks)

    return Probe(poison, lambda ns: driver.spin(stream, ns), lambda: not driver.stream_done(stream), peek)
