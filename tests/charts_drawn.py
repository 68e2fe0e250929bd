"""The charts of a small committed run, as saved, for the tests that read their drawn artists.

tests/data/chart_rows/results.csv holds rows of three runs in results/: rope of the llama3_8b model tour (one
size per case, two cases side by side, torch's variants divided by eager), matmul of the sample run (one size,
two cases whose titles name four parameters) and add_rmsnorm on the CPU (three sizes, a copy ceiling measured
per size that spreads from 47 to 59 GB/s). Every figure `make_charts` saves is kept as laid out and written
(`Figure.savefig` is wrapped while they are made), on a canvas of its own again (saving closes it). Drawing them
takes a while on a busy host, so it is done once per test session.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from suite.kit.store import load
from suite.report.plots import make_charts

RUN = Path(__file__).resolve().parent / "data" / "chart_rows"


def rows() -> pd.DataFrame:
    return load(str(RUN)).results


@functools.cache
def saved_figures() -> dict[str, plt.Figure]:
    """Each chart `make_charts` writes from the run's rows, by file name, as it was saved."""
    kept: dict[str, plt.Figure] = {}
    original = Figure.savefig

    def savefig(figure: Figure, path: object, *args: object, **kwargs: object) -> None:
        original(figure, path, *args, **kwargs)
        kept[Path(str(path)).name] = figure

    Figure.savefig = savefig  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory() as outdir:
            make_charts(rows(), Path(outdir))
    finally:
        Figure.savefig = original  # type: ignore[method-assign]
    for figure in kept.values():
        FigureCanvasAgg(figure)
        figure.canvas.draw()
    return kept
