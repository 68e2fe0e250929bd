"""Scenario-specific charts and report sections, kept apart from the generic ones every scenario gets.

A family module under `suite/charts/` registers functions with `@charts_for(...)` (frame, outdir -> paths) and
`@section_for(...)` (frame -> markdown). Both receive the tidy rows of one scenario (see `suite.report.frames.tidy`),
all statuses included; they read results and never run kernels.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd

ChartFn = Callable[[pd.DataFrame, Path], list[Path]]
SectionFn = Callable[[pd.DataFrame], str]
CHARTS: dict[str, list[ChartFn]] = {}
SECTIONS: dict[str, list[SectionFn]] = {}


def charts_for(*scenarios: str) -> Callable[[ChartFn], ChartFn]:
    def register(fn: ChartFn) -> ChartFn:
        for name in scenarios:
            CHARTS.setdefault(name, []).append(fn)
        return fn

    return register


def section_for(*scenarios: str) -> Callable[[SectionFn], SectionFn]:
    def register(fn: SectionFn) -> SectionFn:
        for name in scenarios:
            SECTIONS.setdefault(name, []).append(fn)
        return fn

    return register


def load() -> None:
    import suite.report.charts

    for info in pkgutil.iter_modules(suite.report.charts.__path__, prefix="suite.report.charts."):
        importlib.import_module(info.name)


def charts(scenario: str) -> list[ChartFn]:
    load()
    return CHARTS.get(scenario, [])


def sections(scenario: str) -> list[SectionFn]:
    load()
    return SECTIONS.get(scenario, [])
