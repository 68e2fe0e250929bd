"""The exit status a table of rows decides: what a script or CI reads without opening the table.

0: every row is ok, skipped or unsupported (each with its reason); FAILED (3): some row is `mismatch` or `error`,
unless the config says `strict=false` (exploratory sweeps); 2 is bad input and 130 an interrupt, decided where
they happen (suite.cli). A run's or a sweep's status is asked of its `suite.run.result.Result`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

FAILED = 3
FAILING = ("mismatch", "error")


def failing(frame: pd.DataFrame) -> int:
    """Rows that are `mismatch` or `error`."""
    return int(frame["status"].isin(FAILING).sum()) if "status" in frame else 0


def status(strict: bool, frame: pd.DataFrame) -> int:
    """FAILED where `strict` and `frame` has a failing row; else 0."""
    return FAILED if strict and failing(frame) else 0
