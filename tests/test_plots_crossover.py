"""Crossover marks on the size charts and chain families on the chain chart, read off the Matplotlib artists.

Rows come from `tests.test_plots_report._row` (a plausible timed row); the fused row's times are then divided
by a chosen speedup, so each line's verdicts (pays from 1.1×, see suite.kit.tidy) and crossover are known.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.colors import to_rgba

from scenarios.elementwise_chain import ALL8, CHEAP4, short_label
from scenarios.elementwise_chain.charts import chain_chart, family
from suite.kit.chartkit import PREDICTED_LOOK
from suite.kit.tidy import speedups, tidy, timed
from suite.report.plots import make_charts, speedup_chart, time_chart
from tests.test_plots_report import _row

SIZES = [2**16, 2**18, 2**20, 2**22]
IMPLS = [("numba", "cpu"), ("fakegpu", "cuda")]
COLORS = {"fakegpu/cuda": to_rgba("tab:orange"), "numba/cpu": to_rgba("tab:blue")}
Speedup = Callable[[list[str], int, str], float]


def _frame(chains: list[list[str]], sizes: list[int], speedup: Speedup) -> pd.DataFrame:
    """Timed float32 fused/unfused rows for every chain, size and implementation; fused = unfused / speedup."""
    rows = []
    for ops in chains:
        for n in sizes:
            for backend, device in IMPLS:
                base = _row(n, ops, "float32", backend, device, "unfused", "native")
                fused = _row(n, ops, "float32", backend, device, "fused", "native")
                s = speedup(ops, n, backend)
                fused.time_ms, fused.time_q1_ms, fused.time_q3_ms = base.time_ms / s, base.time_ms / s, base.time_ms / s
                rows += [base, fused]
    return pd.DataFrame([r.as_record() for r in rows])


def _crossing(ops: list[str], n: int, backend: str) -> float:
    """scale never pays; scale→shift pays from 2²⁰ on numba, from 2²² on fakegpu; the 4-op chain pays throughout."""
    if ops == ["scale"]:
        return 1.0
    if ops == ["scale", "shift"]:
        return 2.0 if n >= {"numba": 2**20, "fakegpu": 2**22}[backend] else 0.8
    return 3.0


@pytest.fixture(scope="module")
def crossing() -> tuple[pd.DataFrame, pd.DataFrame]:
    data = tidy(_frame([["scale"], ["scale", "shift"], CHEAP4], SIZES, _crossing))
    return timed(data), speedups(data)


def _facets(fig: plt.Figure) -> dict[str, plt.Axes]:
    """Axes by case title ('2 ops: scale→shift'); one dtype, so one row of facets."""
    return {ax.get_title(): ax for ax in fig.axes if ax.get_title()}


def _verticals(ax: plt.Axes) -> dict[float, tuple]:
    """x → colour of every vertical line (axvline: two points at one x) on the axes."""
    return {ln.get_xdata()[0]: to_rgba(ln.get_color()) for ln in ax.lines if len(set(ln.get_xdata())) == 1}


def _texts(ax: plt.Axes) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_time_chart_marks_each_implementations_crossover(crossing: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    rows, pairs = crossing
    fig = time_chart(rows, COLORS, pairs)
    facets = _facets(fig)
    pays_late = facets[short_label("scale→shift")]
    assert _verticals(pays_late) == {2**20: COLORS["numba/cpu"], 2**22: COLORS["fakegpu/cuda"]}
    assert set(_texts(pays_late)) == {"fused pays from n=2²⁰", "fused pays from n=2²²"}
    for never_or_always in (short_label("scale"), short_label("→".join(CHEAP4))):
        assert _verticals(facets[never_or_always]) == {}
        assert _texts(facets[never_or_always]) == []
    plt.close(fig)


def test_time_chart_without_pairs_marks_nothing(crossing: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    rows, _ = crossing
    fig = time_chart(rows, COLORS)
    assert all(_verticals(ax) == {} and _texts(ax) == [] for ax in fig.axes)
    plt.close(fig)


def test_speedup_chart_keeps_its_crossover(crossing: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    _, pairs = crossing
    fig = speedup_chart(pairs, COLORS)
    facets = _facets(fig)
    pays_late = facets[short_label("scale→shift")]
    assert _verticals(pays_late) == {2**20: COLORS["numba/cpu"], 2**22: COLORS["fakegpu/cuda"]}
    assert set(_texts(pays_late)) == {"fused pays from 2²⁰", "fused pays from 2²²"}
    assert _verticals(facets[short_label("scale")]) == {}
    plt.close(fig)


CHAINS = [["scale"], ["scale", "shift"], CHEAP4, CHEAP4 + CHEAP4, ALL8]
"""The M preset's chains: cheap ones of length 1, 2, 4, 8 and a transcendental one of length 8 too."""


def _by_length(ops: list[str], n: int, backend: str) -> float:
    """Cheap chains speed up by their length; the transcendental 8-op chain (compute-bound) barely."""
    return 1.25 if ops == ALL8 else float(len(ops))


def _measured(ax: plt.Axes, color: tuple) -> list[tuple[list[float], list[float]]]:
    """(x, y) of each line in one implementation's colour: the measured ones (a prediction has a bar per point)."""
    mine = [ln for ln in ax.lines if to_rgba(ln.get_color()) == color]
    return [(list(ln.get_xdata()), list(ln.get_ydata())) for ln in mine if ln.get_marker() != PREDICTED_LOOK["marker"]]


def test_chain_chart_draws_one_line_per_family() -> None:
    data = tidy(_frame(CHAINS, [2**16, 2**20], _by_length))
    fig = chain_chart(speedups(data), COLORS)
    (ax,) = fig.axes
    for color in COLORS.values():
        lines = sorted(_measured(ax, color), key=lambda xy: len(xy[0]))
        assert len(lines) == 2
        (lone_x, lone_y), (cheap_x, cheap_y) = lines
        assert lone_x == [8] and lone_y == pytest.approx([1.25])
        assert cheap_x == [1, 2, 4, 8] and cheap_y == pytest.approx([1, 2, 4, 8])
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "chain: cheap ops only" in legend and "chain: with tanh/exp" in legend
    plt.close(fig)


def test_family_reads_the_ops() -> None:
    assert family('{"n": 8, "ops": ["scale", "shift", "relu", "square"]}') == "cheap ops only"
    assert family('{"n": 8, "ops": ["scale", "gelu"]}') == "with tanh/exp"
    assert family("") == "cheap ops only"


def test_make_charts_still_returns_the_paths(tmp_path: Path) -> None:
    frame = _frame(CHAINS, SIZES, _by_length)
    paths = make_charts(frame, tmp_path)
    kinds = ("time_vs_size", "bandwidth", "speedup", "speedup_vs_chain")
    assert [p.name for p in paths] == [f"{kind}_elementwise_chain.png" for kind in kinds]
    assert all(p.is_file() for p in paths)
