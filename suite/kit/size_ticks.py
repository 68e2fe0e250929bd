"""Size ticks read one way on an axis: powers of two as 2ⁿ only where every tick is one, else plain numbers.

`fmt_size` (suite.kit.tidy) writes a size for a sentence, 2¹³ for a power of two and 14,336 otherwise; one axis
ticked that way mixes two notations and asks the reader to convert between them. And a facet timed at a single
size (a model's shapes) on a linear axis gets one tick the locator placed, not at the point: sizes so few or so
close that a log axis gives them no tick of their own are drawn as categories, each ticked at its own value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

MIN_POWER = 1024
"""Powers of two from here on read better as 2ⁿ (2¹⁰ = 1,024); below it, plainly."""
PAD = 0.5
"""Around a lone category, this fraction of its value clear on each side of a linear axis."""
DODGE = 0.12
"""At most this fraction of a lone value between the series drawn side by side at it (`dodged`)."""


def _power(value: float) -> bool:
    n = round(value)
    return n == value and n >= MIN_POWER and n & (n - 1) == 0


def size_labels(values: Iterable[float]) -> list[str]:
    """One label per value, all in the same notation: 2ⁿ (mathtext) when every value is a power of two from
    MIN_POWER, else thousands separators (14,336; 0.5 stays 0.5)."""
    values = list(values)
    if values and all(_power(v) for v in values):
        return [f"$2^{{{round(math.log2(v))}}}$" for v in values]
    return [f"{v:,.0f}" if float(v).is_integer() else f"{v:g}" for v in values]


def size_formatter(values: Iterable[float]) -> FuncFormatter:
    """A tick formatter in `size_labels`' notation for ticks placed at `values`: a tick elsewhere is plain."""
    labels = dict(zip(values := list(values), size_labels(values), strict=True))
    return FuncFormatter(lambda v, _: labels.get(v, f"{v:,.0f}" if float(v).is_integer() else f"{v:g}"))


def categorical(ax: plt.Axes, values: Iterable[float]) -> None:
    """Tick `ax`'s x axis at each of `values` and nowhere else, labelled in one notation; a lone value sits in the
    middle of an axis PAD wide either side, so its points read as a category rather than as a place on a scale."""
    ticks = sorted(set(values))
    ax.set_xscale("linear")
    if len(ticks) == 1:
        ax.set_xlim(ticks[0] * (1 - PAD), ticks[0] * (1 + PAD))
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(size_formatter(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())


def dodged(data: pd.DataFrame, x: str, keys: tuple[str, ...] = ("impl", "variant")) -> pd.DataFrame:
    """At a lone value of `x`, each series (one per `keys`) moved a little aside, in a fixed order, so that points
    and predictions of several implementations at one size stand side by side rather than on top of each other;
    `categorical` still ticks the value itself."""
    if not set(keys) <= set(data) or data[x].nunique() != 1:
        return data
    series = sorted(set(zip(*(data[k] for k in keys), strict=True)))
    step = min(DODGE, 2 * (1 - PAD) * PAD / max(len(series), 1))
    shift = {s: (i - (len(series) - 1) / 2) * step for i, s in enumerate(series)}
    moved = [1 + shift[s] for s in zip(*(data[k] for k in keys), strict=True)]
    return data.assign(**{x: data[x] * moved})
