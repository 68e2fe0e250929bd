"""Chart layout as saved, read off the drawn artists' extents: nothing outside the figure, nothing overprinted.

A single facet with three compared variants is the worst case for the title and the y label (both name every
variant); three variants starting to pay at one size, and three more at a size next to it, are the worst case for
the crossover labels. Rows come from `tests.test_plots_report._row`; compared variants' times are the baseline's
over a speedup.
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.transforms import Bbox

from suite.kit.chartkit import save
from suite.kit.tidy import speedups, tidy, timed
from suite.report.plots import CROSSOVER, speedup_chart, time_chart
from tests.test_plots_crossover import COLORS, IMPLS
from tests.test_plots_report import _row

SIZES = [2**9, 2**10, 2000, 2**11]
PAYS_FROM = {"numba": 2000, "fakegpu": 2**11}
"""Close enough on the size axis for labels a few points wide to overprint."""
VARIANTS = ("compiled", "fused", "library")


def _frame() -> pd.DataFrame:
    """One case (a single facet), float32; every compared variant loses until PAYS_FROM and pays from there."""
    rows = []
    for n in SIZES:
        for backend, device in IMPLS:
            base = _row(n, ["scale", "shift"], "float32", backend, device, "unfused", "native")
            rows.append(base)
            for variant in VARIANTS:
                row = _row(n, ["scale", "shift"], "float32", backend, device, variant, "native")
                t = base.time_ms / (2.0 if n >= PAYS_FROM[backend] else 0.8)
                row.time_ms, row.time_q1_ms, row.time_q3_ms = t, t, t
                rows.append(row)
    return pd.DataFrame([r.as_record() for r in rows])


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    return tidy(_frame())


def _saved(figure: plt.Figure, tmp_path: Path) -> tuple[plt.Figure, plt.Axes]:
    """The figure as `save` writes it, and its one facet (on a canvas of its own again: saving closes it)."""
    save(figure, tmp_path / "chart.png")
    FigureCanvasAgg(figure)
    (ax,) = figure.axes
    return figure, ax


def _box(artist: plt.Artist) -> Bbox:
    return artist.get_window_extent(artist.figure.canvas.get_renderer())


def _inside(box: Bbox, figure: plt.Figure) -> bool:
    return figure.bbox.contains(box.x0, box.y0) and figure.bbox.contains(box.x1, box.y1)


def test_single_facet_title_and_label_fit(data: pd.DataFrame, tmp_path: Path) -> None:
    figure, ax = _saved(speedup_chart(speedups(data), COLORS), tmp_path)
    title, ylabel, facet = figure._suptitle, ax.yaxis.label, ax.title
    assert "compiled, fused, library over unfused" in " ".join(title.get_text().split())
    assert facet.get_text() and ylabel.get_text().count("/") == 1
    boxes = {"title": _box(title), "y label": _box(ylabel), "facet title": _box(facet)}
    for name, box in boxes.items():
        assert _inside(box, figure), name
    for (one, a), (other, b) in combinations(boxes.items(), 2):
        assert not a.overlaps(b), f"{one} overlaps {other}"
    assert _box(ylabel).height <= _box(ax).height


@pytest.mark.parametrize("chart", ["speedup", "time"])
def test_crossover_labels_at_one_size_do_not_overprint(data: pd.DataFrame, tmp_path: Path, chart: str) -> None:
    pairs = speedups(data)
    figure = speedup_chart(pairs, COLORS) if chart == "speedup" else time_chart(timed(data), COLORS, pairs)
    _, ax = _saved(figure, tmp_path)
    labels = [t for t in ax.texts if t.get_gid() == CROSSOVER]
    assert len(labels) == len(IMPLS) * len(VARIANTS)
    assert {t.xy[0] for t in labels} == set(PAYS_FROM.values())
    assert {" ".join(t.get_text().split()).split(" pays")[0] for t in labels} == set(VARIANTS)
    for a, b in combinations(labels, 2):
        assert not _box(a).overlaps(_box(b)), f"{a.get_text()!r} overprints {b.get_text()!r}"


def test_each_variant_has_its_own_marker_in_every_chart() -> None:
    """A reader matches a point to its variant by marker: two variants sharing one (the matmul charts once drew
    fused and compiled both as "P") would make a roofline point unreadable."""
    from scenarios.matmul.charts import STYLE_MM
    from suite.kit.chartkit import STYLE

    markers = [marker for _, marker in STYLE.values()]
    assert len(markers) == len(set(markers)), STYLE
    assert all(STYLE_MM[v] == STYLE[v] for v in STYLE)
