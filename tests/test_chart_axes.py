"""Size ticks in one notation, a lone size as a category, the copy ceiling drawn at each case's own reading.

The ceiling is read off the bandwidth chart of a small committed run (tests/charts_drawn.py), whose add_rmsnorm
case measured its copy at 47.9, 59.4 and 47.1 GB/s at its three sizes: each size's mark must sit at its own
reading, so a row's percentage of the ceiling is what the chart shows.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from suite.kit.ceiling_marks import NAMES, per_size
from suite.kit.size_ticks import categorical, dodged, size_labels
from suite.kit.tidy import tidy, timed
from tests.charts_drawn import rows, saved_figures


def test_an_axis_of_powers_of_two_reads_2n_and_any_other_plainly() -> None:
    assert size_labels([1024, 8192]) == ["$2^{10}$", "$2^{13}$"]
    assert size_labels([8192, 32000]) == ["8,192", "32,000"]  # never 2¹³ beside 32,000
    assert size_labels([256, 4096]) == ["256", "4,096"]  # 256 is no 2ⁿ, so neither is 4,096


def test_a_lone_size_is_ticked_at_its_points_with_the_series_beside_each_other() -> None:
    data = pd.DataFrame({"size": [2048.0] * 3, "impl": ["b", "a", "a"], "variant": ["fused", "fused", "unfused"]})
    moved = dodged(data, "size")
    assert moved["size"].nunique() == 3
    assert moved.sort_values("size")[["impl", "variant"]].values.tolist() == [
        ["a", "fused"],
        ["a", "unfused"],
        ["b", "fused"],
    ]
    assert (moved["size"] - 2048).abs().max() < 0.5 * 2048
    fig, ax = plt.subplots()
    ax.plot(moved["size"], [1, 2, 3], "o")
    categorical(ax, data["size"].unique())
    fig.canvas.draw()
    shown = [t for t in ax.get_xticklabels() if t.get_text()]
    assert [t.get_text() for t in shown] == ["$2^{11}$"]
    low, high = ax.get_xlim()
    assert low < moved["size"].min() and moved["size"].max() < high
    plt.close(fig)


def test_several_sizes_keep_their_own_places() -> None:
    data = pd.DataFrame({"size": [1024.0, 4096.0], "impl": ["a", "a"], "variant": ["fused", "fused"]})
    assert dodged(data, "size").equals(data)


def test_the_ceiling_is_drawn_at_each_cases_own_reading() -> None:
    data = timed(tidy(rows()))
    mine = data[data["scenario"] == "add_rmsnorm"]
    assert per_size(mine) and not per_size(data[data["scenario"] == "rope"])
    readings = mine.groupby("size")["ceiling_gbps"].median()
    assert readings.max() / readings.min() > 1.2
    figure = saved_figures()["bandwidth_add_rmsnorm.png"]
    (ax,) = figure.axes
    (ceiling,) = [line for line in ax.lines if line.get_marker() == "_" and line.get_color() == "0.25"]
    assert list(ceiling.get_xdata()) == list(readings.index)
    assert list(ceiling.get_ydata()) == pytest.approx(list(readings.values))
    labels = [t.get_text() for t in figure.legends[0].get_texts()]
    assert NAMES["ceiling_gbps"][True] in labels and NAMES["ceiling_gbps"][False] not in labels
    fused = mine[mine["variant"] == "fused"].set_index("size")
    assert (fused["gbps"] / readings * 100).values == pytest.approx(fused["pct_of_ceiling"].values)
