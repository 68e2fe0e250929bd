"""A results table tidied once for its report: the typed rows (`tidy`) and the variant/baseline pairs
(`speedups`), which the charts (suite.report.plots) and the report's sections (suite.report.report) both read.

Tidying a large sweep's table and pairing its rows are the costly steps of a report; whoever makes both the
charts and the report of a table makes one `Tidied` and hands it to each.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from suite.kit.tidy import speedups, tidy


@dataclass(frozen=True, eq=False)
class Tidied:
    data: pd.DataFrame
    """`tidy(frame)`: typed columns and the derived labels."""
    pairs: pd.DataFrame
    """`speedups(data)`: one row per (case, implementation, compared variant)."""

    @classmethod
    def of(cls, frame: pd.DataFrame | Tidied) -> Tidied:
        """`frame` tidied and paired; a `Tidied` as it is."""
        if isinstance(frame, Tidied):
            return frame
        data = tidy(frame)
        return cls(data, speedups(data))
