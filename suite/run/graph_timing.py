"""CUDA-graph timing (`timing.graphs=true`): each variant's launcher, all its kernels, captured once in a CUDA graph
and replayed, and the same launcher timed host-paced, in the same interleaved rounds.

The row's `time_ms` holds GPU time alone: a spin ahead of its start event keeps the host's enqueue out of the
window (`suite.run.timing.CudaClock`). So the launch overhead is measured apart: `extra.time_paced_ms` is the
launcher timed with the GPU waiting on the host (`CudaClock.time_paced`: what a caller launching from Python
sees), and `time_graph_ms` is its replay from a graph (one host call however many kernels, and the replay
enqueued behind a spin: its kernels alone). `time_paced_ms - time_graph_ms` is what launching kernel by kernel
from the host cost the variant, and fusion's gain splits into launches and traffic on it
(suite.report.launch_split). A launcher a graph cannot hold (it allocates, synchronises, or launches off the
shared stream) keeps its row and timing; `extra.graph` says why it was not captured.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import Any

from suite.core.registry import KernelKey
from suite.run.config import TimingConfig
from suite.run.stages import Stages
from suite.run.timing import measure_interleaved


class _PacedOrSpun:
    """A clock for one set of rounds: the launchers in `paced` timed host-paced (`time_paced`), the others (the
    graph replays) with the clock's spin ahead."""

    def __init__(self, clock: Any, paced: set[int]) -> None:
        self.clock, self.paced, self.stream = clock, paced, clock.stream

    def time(self, launch: Callable[[], None]) -> float:
        if id(launch) in self.paced:
            return self.clock.time_paced(launch)
        return self.clock.time(launch)


def graph_timed(
    found: dict[KernelKey, Stages], timing: TimingConfig, clock: Any, driver: Any = None
) -> dict[KernelKey, Stages]:
    """Add `time_graph_ms` and `extra.time_paced_ms` to every timed CUDA implementation whose launcher can be
    captured (a clock without `time_paced` gives the graph time alone)."""
    if driver is None:
        from suite.gpu import driver
    timed = {k: s for k, s in found.items() if k.device == "cuda" and s.timing is not None and s.check is not None}
    graphs, notes = {}, {}
    for key, stages in timed.items():
        try:
            graphs[key] = driver.capture(clock.stream, stages.check.launcher)
        except Exception as exc:  # the launcher's own timing stands; the row says why there is no graph time
            notes[key] = {"graph": f"not captured: {type(exc).__name__}: {exc}"}
    out = dict(found)
    pace = hasattr(clock, "time_paced")
    try:
        launchers: dict[Hashable, Callable[[], None]] = {
            ("graph", k): functools.partial(g.launch, clock.stream) for k, g in graphs.items()
        }
        if pace:
            launchers.update({("paced", k): timed[k].check.launcher for k in graphs})
        rounds = _PacedOrSpun(clock, {id(f) for (kind, _k), f in launchers.items() if kind == "paced"})
        results = measure_interleaved(launchers, rounds, timing) if launchers else {}
    finally:
        for graph in graphs.values():
            graph.close()
    for key, stages in timed.items():
        median = results[("graph", key)].median if ("graph", key) in results else None
        mine = {**stages.timing.notes, **notes.get(key, {})}
        if ("paced", key) in results:
            mine["time_paced_ms"] = results[("paced", key)].median
        out[key] = replace(stages, timing=replace(stages.timing, time_graph_ms=median, notes=mine))
    return out
