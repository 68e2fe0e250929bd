"""No text overprints other text in a saved chart: measured on the rendered figure, not read off the code.

Every visible title (the figure's, each facet's, the margin titles of rows), axis label, tick label drawn and
legend text of every chart of a small committed run (tests/charts_drawn.py) is measured where the renderer put
it; no two may overlap. The run's matmul cases name four parameters each, side by side in facets of fixed width:
the worst case for facet titles.
"""

from __future__ import annotations

from itertools import combinations

import matplotlib.pyplot as plt
import pytest
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from tests.charts_drawn import saved_figures


@pytest.fixture(scope="module")
def figures() -> dict[str, plt.Figure]:
    return saved_figures()


def _shown(text: Text) -> bool:
    return text.get_visible() and bool(text.get_text().strip())


def _texts(figure: plt.Figure) -> list[tuple[str, Text]]:
    """Every visible text the test measures, each named by what it is."""
    found = [("figure title", t) for t in figure.texts]
    for legend in [*figure.legends, *(ax.get_legend() for ax in figure.axes)]:
        found += [("legend", t) for t in legend.get_texts()] if legend is not None else []
    for i, ax in enumerate(figure.axes):
        found += [(f"facet {i} title", ax.title), (f"facet {i} x label", ax.xaxis.label)]
        found += [(f"facet {i} y label", ax.yaxis.label)]
        found += [(f"facet {i} margin title", t) for t in ax.texts if t.get_rotation() % 180 == 90]
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            for tick in axis._update_ticks():  # the ticks drawn: those in view
                found += [(f"facet {i} {name} tick", t) for t in (tick.label1, tick.label2)]
    return [(name, t) for name, t in found if _shown(t)]


def _box(text: Text) -> Bbox:
    return text.get_window_extent(text.figure.canvas.get_renderer())


def test_the_run_has_charts_with_long_facet_titles(figures: dict[str, plt.Figure]) -> None:
    assert {"speedup_rope.png", "bandwidth_add_rmsnorm.png", "memory_add_rmsnorm.png"} <= set(figures)
    titles = [" ".join(ax.title.get_text().split()) for ax in figures["speedup_matmul.png"].axes]
    assert len(titles) == 2 and all(t.count("=") == 4 for t in titles), titles


@pytest.mark.parametrize(
    "name",
    [
        "speedup_rope.png",
        "time_vs_size_rope.png",
        "bandwidth_rope.png",
        "vs_compiler_rope.png",
        "memory_rope.png",
        "speedup_matmul.png",
        "time_vs_size_matmul.png",
        "bandwidth_add_rmsnorm.png",
        "speedup_add_rmsnorm.png",
        "time_vs_size_add_rmsnorm.png",
        "memory_add_rmsnorm.png",
    ],
)
def test_no_text_overlaps_other_text(figures: dict[str, plt.Figure], name: str) -> None:
    texts = _texts(figures[name])
    assert len(texts) > 10
    clashes = [
        f"{a} {one.get_text()!r} overlaps {b} {other.get_text()!r}"
        for (a, one), (b, other) in combinations(texts, 2)
        if _box(one).overlaps(_box(other))
    ]
    assert not clashes, "\n".join(clashes)
