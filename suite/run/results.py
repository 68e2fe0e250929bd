"""The run's table: results.csv, one row per (case, implementation), appended and flushed as it exists, and
beside it reps.csv, every timed repetition of every row (row id, variant, round, time).

A killed run keeps every row written; `read` tolerates a last line cut short; `aggregate` merges a multirun.
Each row is written before its repetitions, so every repetition kept belongs to a row that was written.
The typed Parquet copies of both are made from these at the end of a run (see `suite.kit.store`).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from suite.core.row import COLUMNS, KEY, Row
from suite.kit.store import CSV_NAME, REPS_COLUMNS, REPS_NAME, read, read_reps


class Table:
    """results.csv of one run directory: appended row by row, flushed and fsynced so a killed run keeps rows."""

    def __init__(self, directory: Path, fresh: bool = True, run_id: str = "") -> None:
        """`fresh` starts a new table; otherwise rows are appended to the one there (resume). Rows get the id
        `<run_id>#<n>` (n counts on from the rows already there), unless they come with one."""
        self.path = Path(directory) / CSV_NAME
        self.reps_path = Path(directory) / REPS_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = fresh or not self.path.exists() or self.path.stat().st_size == 0
        self.run_id = run_id or Path(directory).name
        self._next = 0 if fresh else len(read(self.path))
        self._file = self.path.open("w" if fresh else "a", newline="", encoding="utf-8")
        self._writer = csv.DictWriter(self._file, fieldnames=COLUMNS)
        fresh_reps = fresh or not self.reps_path.exists() or self.reps_path.stat().st_size == 0
        if not fresh_reps and self.reps_path.read_text().split("\n", 1)[0].strip() != ",".join(REPS_COLUMNS):
            read_reps(self.reps_path).to_csv(self.reps_path, index=False)  # an older run resumed: its columns grow
        self._reps_file = self.reps_path.open("w" if fresh_reps else "a", newline="", encoding="utf-8")
        self._reps = csv.writer(self._reps_file)
        if fresh:
            self._writer.writeheader()
        if fresh_reps:
            self._reps.writerow(REPS_COLUMNS)
        self._flush()

    def append(self, row: Row) -> None:
        if not row.row_id:
            row.row_id = f"{self.run_id}#{self._next}"
        self._next += 1
        self._writer.writerow(row.as_record())
        self._flush()
        self._reps.writerows(_reps(row))
        self._flush()

    def _flush(self) -> None:
        for f in (self._file, self._reps_file):
            f.flush()
            os.fsync(f.fileno())

    def close(self) -> None:
        self._file.close()
        self._reps_file.close()

    def done_keys(self) -> set[tuple[str, ...]]:
        """Keys of rows already written (for resume): every status counts as finished."""
        frame = read(self.path)
        return {tuple(str(v) for v in r) for r in frame[list(KEY)].itertuples(index=False)}


def _reps(row: Row) -> list[tuple]:
    """reps.csv lines of a row: each repetition with its block, the canary's time in its round and whether it
    was left out (empty cells where the row has none)."""
    n = len(row.times_ms)

    def at(values: tuple, i: int, default: object) -> object:
        return values[i] if len(values) == n else default

    return [
        (
            row.row_id,
            row.variant,
            i,
            t,
            at(row.blocks, i, 0),
            at(row.canary_times_ms, i, ""),
            at(row.excluded, i, False),
        )
        for i, t in enumerate(row.times_ms)
    ]


def aggregate(paths: list[Path], out: Path, extra: Sequence[Row] = ()) -> pd.DataFrame:
    """Concatenate several runs' tables (a multirun's jobs) and the `extra` rows (the failure rows of jobs that
    did not finish) into one results.csv at `out`, and their repetitions into one reps.csv beside it. A sweep in
    which no job wrote a table (its submission refused) still gets both, with the failure rows alone."""
    frames = [read(p) for p in paths]
    if extra:
        frames.append(pd.DataFrame([r.as_record() for r in extra], columns=COLUMNS))
    frame = (
        pd.concat([f for f in frames if not f.empty], ignore_index=True)
        if any(not f.empty for f in frames)
        else pd.DataFrame(columns=COLUMNS)
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out, index=False)
    reps = [r for r in (read_reps(Path(p).parent / REPS_NAME) for p in paths) if not r.empty]
    merged = pd.concat(reps, ignore_index=True) if reps else pd.DataFrame(columns=REPS_COLUMNS)
    merged.to_csv(out.parent / REPS_NAME, index=False)
    return frame
