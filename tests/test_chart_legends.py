"""Every legend entry names something drawn, and everything drawn is named by the legend: read off the artists.

The charts' legends follow one convention: a colour swatch (a thick plain line) per implementation, and keys
drawn in a neutral grey for what a line's style and marker mean (a variant, the prediction, the ceiling, the
crossover). So a drawn line is named when a key has its line style and marker and either its colour or a grey
one that a swatch of the line's colour completes; a swatch names whatever is drawn in its colour; a patch entry
(a bar chart's) names the bars of its colour, or the hatched ones. Bands (fill_between) shade a line's spread
and are not entries of their own. Drawn on the charts of a small committed run (tests/charts_drawn.py).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
from matplotlib.colors import to_rgba
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from tests.charts_drawn import saved_figures

CHARTS = [
    "speedup_rope.png",
    "time_vs_size_rope.png",
    "bandwidth_rope.png",
    "vs_compiler_rope.png",
    "memory_rope.png",
    "speedup_matmul.png",
    "vs_compiler_matmul.png",
    "speedup_add_rmsnorm.png",
    "time_vs_size_add_rmsnorm.png",
    "bandwidth_add_rmsnorm.png",
    "vs_compiler_add_rmsnorm.png",
    "memory_add_rmsnorm.png",
]


@pytest.fixture(scope="module")
def figures() -> dict[str, plt.Figure]:
    return saved_figures()


def _colour(value: object) -> tuple[float, ...]:
    return tuple(round(c, 3) for c in to_rgba(value)[:3])


def _grey(colour: tuple[float, ...]) -> bool:
    return max(colour) - min(colour) < 1e-3


def _style(line: Line2D) -> tuple:
    """What a line looks like apart from its colour: its dashes (none where it is markers only) and marker."""
    plain = line.get_linestyle() in ("None", "", " ")
    marker = line.get_marker()
    return (None if plain else line._unscaled_dash_pattern, None if marker in (None, "None", "", " ") else marker)


def _swatch(handle: Line2D) -> bool:
    return (
        _style(handle) == ((0, None), None) and handle.get_linewidth() >= 2.5 and not _grey(_colour(handle.get_color()))
    )


def _entries(figure: plt.Figure) -> dict[str, object]:
    legends = [*figure.legends, *(ax.get_legend() for ax in figure.axes if ax.get_legend() is not None)]
    assert legends, "the chart has no legend"
    return {
        t.get_text(): h for legend in legends for t, h in zip(legend.get_texts(), legend.legend_handles, strict=True)
    }


def _drawn(figure: plt.Figure) -> tuple[list[Line2D], list[Rectangle]]:
    lines = [line for ax in figure.axes for line in ax.lines if line.get_visible() and len(line.get_xdata())]
    bars = [p for ax in figure.axes for p in ax.patches if isinstance(p, Rectangle) and p.get_visible()]
    return lines, bars


def _names(key: Line2D, line: Line2D, swatches: set[tuple]) -> bool:
    """Whether legend key `key` says what `line` is: same style, and its colour or grey completed by a swatch."""
    if _style(key) != _style(line):
        return False
    mine, theirs = _colour(key.get_color()), _colour(line.get_color())
    return mine == theirs or (_grey(mine) and theirs in swatches)


@pytest.mark.parametrize("name", CHARTS)
def test_every_drawn_line_and_bar_is_in_the_legend(figures: dict[str, plt.Figure], name: str) -> None:
    entries = _entries(figures[name])
    keys = {label: h for label, h in entries.items() if isinstance(h, Line2D) and not _swatch(h)}
    swatches = {_colour(h.get_color()) for h in entries.values() if isinstance(h, Line2D) and _swatch(h)}
    patches = [h for h in entries.values() if isinstance(h, Patch)]
    lines, bars = _drawn(figures[name])
    assert lines or bars
    for line in lines:
        assert any(_names(k, line, swatches) for k in keys.values()), (
            f"no entry names {_style(line)} {line.get_color()}"
        )
    for bar in bars:
        face = _colour(bar.get_facecolor())
        assert any(_colour(p.get_facecolor()) == face for p in patches) or bar.get_hatch(), f"bar {face} not named"
        assert not bar.get_hatch() or any(p.get_hatch() == bar.get_hatch() for p in patches), "hatching not named"


@pytest.mark.parametrize("name", CHARTS)
def test_every_legend_entry_names_something_drawn(figures: dict[str, plt.Figure], name: str) -> None:
    lines, bars = _drawn(figures[name])
    swatches = {
        _colour(h.get_color()) for h in _entries(figures[name]).values() if isinstance(h, Line2D) and _swatch(h)
    }
    for label, handle in _entries(figures[name]).items():
        if isinstance(handle, Patch):
            hatch = handle.get_hatch()
            hit = [
                b
                for b in bars
                if (b.get_hatch() == hatch if hatch else _colour(b.get_facecolor()) == _colour(handle.get_facecolor()))
            ]
        elif _swatch(handle):
            colour = _colour(handle.get_color())
            hit = [
                x
                for x in [*lines, *bars]
                if _colour(x.get_color() if isinstance(x, Line2D) else x.get_facecolor()) == colour
            ]
        else:
            hit = [line for line in lines if _names(handle, line, swatches)]
        assert hit, f"legend entry {label!r} names nothing drawn"


@pytest.mark.parametrize("name", ["speedup_rope.png", "speedup_matmul.png", "speedup_add_rmsnorm.png"])
def test_each_prediction_is_drawn_in_its_implementations_colour(figures: dict[str, plt.Figure], name: str) -> None:
    """Numba's and torch's predictions differ (each against its own baseline): a grey one could be either's."""
    entries = _entries(figures[name])
    swatches = {_colour(h.get_color()) for h in entries.values() if isinstance(h, Line2D) and _swatch(h)}
    keys = [h for label, h in entries.items() if label.startswith("predicted by ledger")]
    lines, _ = _drawn(figures[name])
    shown = [line for line in lines if any(_style(k) == _style(line) for k in keys)]
    assert keys and shown
    assert all(_colour(line.get_color()) in swatches for line in shown)
