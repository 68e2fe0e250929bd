"""CUDA-graph timing (`timing.graphs=true`): each variant's launcher, all its kernels, captured once in a CUDA graph
and replayed, timed interleaved like the launchers themselves.

A replay is one host call however many kernels the launcher queues, so `time_ms - time_graph_ms` is what the
host's launch overhead cost the variant and `time_graph_ms` is its kernels alone. Fusion's gain splits the same
way: the unfused variant's extra launches on one side, its extra traffic on the other (suite.report.launch_split).
A launcher a graph cannot hold (it allocates, synchronises, or launches off the shared stream) keeps its row
and timing; `extra.graph` says why it was not captured.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from suite.core.registry import KernelKey
from suite.run.config import TimingConfig
from suite.run.stages import Stages
from suite.run.timing import measure_interleaved


def graph_timed(found: dict[KernelKey, Stages], timing: TimingConfig, clock: Any, driver: Any = None
                ) -> dict[KernelKey, Stages]:  # fmt: skip
    """Add `time_graph_ms` to every timed CUDA implementation whose launcher can be captured."""
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
    try:
        replays = {k: functools.partial(g.launch, clock.stream) for k, g in graphs.items()}
        results = measure_interleaved(replays, clock, timing) if replays else {}
    finally:
        for graph in graphs.values():
            graph.close()
    for key, stages in timed.items():
        median = results[key].median if key in results else None
        out[key] = replace(stages, timing=replace(stages.timing, time_graph_ms=median,
                                                  notes={**stages.timing.notes, **notes.get(key, {})}))  # fmt: skip
    return out
