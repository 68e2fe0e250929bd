"""What a run or a sweep leaves: its table, the directory it wrote and the files in it, as one value.

`run(plan, outdir)` returns a Result, the report adds its charts and report.md to it (`suite.sweep.finalize`),
a sweep's merge returns the Result of the whole sweep, and the exit status is computed from it: nothing about a
run waits in module state for a later step to read. A process that did not make the result (the command line
after a multirun, whose table a Hydra callback merged) reads it back from the directory (`Result.read`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from suite.kit.store import CSV_NAME, ENVIRONMENT, REPS_NAME, REPS_PARQUET, RESULTS_PARQUET
from suite.run import outcome
from suite.run.results import read

CEILINGS = "ceilings.json"
REPORT = "report.md"
CHARTS = "charts"
RUN_FILES = (CSV_NAME, REPS_NAME, CEILINGS, ENVIRONMENT, RESULTS_PARQUET, REPS_PARQUET)
"""What every run writes into its directory (`suite.run.runner.run`), in the order it writes them."""


@dataclass(frozen=True, eq=False)
class Result:
    table: pd.DataFrame
    """One row per (case, implementation): results.csv as read back."""
    outdir: Path
    paths: tuple[Path, ...] = ()
    """The files written: the table and its companions, then the charts and report.md once the report is made."""

    @property
    def failing(self) -> int:
        """Rows that are `mismatch` or `error`."""
        return outcome.failing(self.table)

    def exit_status(self, strict: bool = True) -> int:
        """0, or `outcome.FAILED` (3) where a row is `mismatch` or `error` and `strict` (the config's)."""
        return outcome.status(strict, self.table)

    def with_paths(self, *paths: Path) -> Result:
        return replace(self, paths=(*self.paths, *(p for p in paths if p not in self.paths)))

    @classmethod
    def read(cls, outdir: Path) -> Result:
        """The result a run or a sweep left in `outdir`: its results.csv, and the files of a run found beside it."""
        outdir = Path(outdir)
        found = [outdir / name for name in (*RUN_FILES, REPORT) if (outdir / name).exists()]
        charts = sorted((outdir / CHARTS).rglob("*.png")) if (outdir / CHARTS).is_dir() else []
        return cls(read(outdir / CSV_NAME), outdir, (*found, *charts))
