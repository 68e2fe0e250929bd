"""The exit status of a run or a sweep, from its rows: what a script or CI reads without opening the table.

0: every row is ok, skipped or unsupported (each with its reason); FAILED (3): some row is `mismatch` or `error`,
unless the config says `strict=false` (exploratory sweeps); 2 is bad input and 130 an interrupt, decided where
they happen (suite.cli). The last table finished in this process is kept here (`record`), so the command line
can answer for a multirun too, whose table is merged by Hydra's callback, not by the code that started it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

FAILED = 3
FAILING = ("mismatch", "error")
_last: list[pd.DataFrame] = []


def record(frame: pd.DataFrame) -> None:
    """Keep `frame`, the table a run or a sweep just finished with."""
    _last[:] = [frame]


def failing(frame: pd.DataFrame) -> int:
    """Rows that are `mismatch` or `error`."""
    return int(frame["status"].isin(FAILING).sum()) if "status" in frame else 0


def status(strict: bool, frame: pd.DataFrame | None = None) -> int:
    """FAILED where `strict` and `frame` (else the last recorded table) has a failing row; else 0."""
    frame = frame if frame is not None else (_last[0] if _last else None)
    return FAILED if strict and frame is not None and failing(frame) else 0
