"""The run's table: results.csv, one row per (case, implementation), appended and flushed as it exists.

A killed run keeps every row written; `read` tolerates a last line cut short; `aggregate` merges a multirun.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pandas as pd

from suite.core.row import COLUMNS, KEY, STATUSES, Row

CSV_NAME = "results.csv"


class Table:
    """results.csv of one run directory: appended row by row, flushed and fsynced so a killed run keeps rows."""

    def __init__(self, directory: Path, fresh: bool = True) -> None:
        """`fresh` starts a new table; otherwise rows are appended to the one there (resume)."""
        self.path = Path(directory) / CSV_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = fresh or not self.path.exists() or self.path.stat().st_size == 0
        self._file = self.path.open("w" if fresh else "a", newline="", encoding="utf-8")
        self._writer = csv.DictWriter(self._file, fieldnames=COLUMNS)
        if fresh:
            self._writer.writeheader()
            self._flush()

    def append(self, row: Row) -> None:
        self._writer.writerow(row.as_record())
        self._flush()

    def _flush(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()

    def done_keys(self) -> set[tuple[str, ...]]:
        """Keys of rows already written (for resume): every status counts as finished."""
        frame = read(self.path)
        return {tuple(str(v) for v in r) for r in frame[list(KEY)].itertuples(index=False)}


def read(path: Path) -> pd.DataFrame:
    """Read a results.csv, tolerating a last line cut short by a killed process."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame(columns=COLUMNS)
    frame = pd.read_csv(path, on_bad_lines="skip", keep_default_na=True, dtype={"params": str, "reason": str})
    frame["reason"] = frame["reason"].fillna("")
    return frame[frame["status"].isin(STATUSES)].reset_index(drop=True)


def aggregate(paths: list[Path], out: Path) -> pd.DataFrame:
    """Concatenate several runs' tables (a multirun's jobs) into one results.csv at `out`."""
    frames = [read(p) for p in paths]
    frame = (
        pd.concat([f for f in frames if not f.empty], ignore_index=True)
        if any(not f.empty for f in frames)
        else pd.DataFrame(columns=COLUMNS)
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out, index=False)
    return frame
