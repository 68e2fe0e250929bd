"""What the user sees while a sweep runs (a rich progress bar) and after it (a summary table)."""

from __future__ import annotations

from collections import Counter
from types import TracebackType

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from suite.core.row import Row
from suite.run.job import Job

console = Console(stderr=True)


class Bar:
    def __init__(self, total: int, enabled: bool = True) -> None:
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[tally]}"), console=console, disable=not enabled, transient=False,
        )  # fmt: skip
        self.task = self.progress.add_task("cases", total=total, tally="")
        self.tally: Counter[str] = Counter()

    def __enter__(self) -> Bar:
        self.progress.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.progress.__exit__(kind, exc, tb)

    def start(self, job: Job) -> None:
        shape = ", ".join(f"{k}={v}" for k, v in job.params.items())
        self.progress.update(self.task, description=f"{job.scenario} {shape} {job.dtype}"[:70])

    def advance(self, rows: list[Row]) -> None:
        self.tally.update(r.status for r in rows)
        self.progress.update(self.task, advance=1, tally=" ".join(f"{k}:{v}" for k, v in sorted(self.tally.items())))


def summary(frame: pd.DataFrame, outdir: str) -> None:
    """Print, per scenario/backend/device/variant, the row counts by status and the median time of ok rows."""
    if frame.empty:
        console.print(f"no rows written to {outdir}")
        return
    table = Table(title=f"fusebench: {len(frame)} rows in {outdir}")
    for col in ("scenario", "backend", "device", "variant", "mode", "ok", "not ok", "median time (ms)"):
        table.add_column(col)
    for key, group in frame.groupby(["scenario", "backend", "device", "variant"], dropna=False, sort=True):
        ok = group[group["status"] == "ok"]
        times = pd.to_numeric(ok["time_ms"], errors="coerce").dropna()
        modes = ",".join(sorted({str(m) for m in group["mode"].dropna() if m}))
        bad = Counter(group.loc[group["status"] != "ok", "status"])
        table.add_row(*map(str, key), modes, str(len(ok)), " ".join(f"{k}:{v}" for k, v in bad.items()) or "-",
                      f"{times.median():.4g}" if len(times) else "-")  # fmt: skip
    console.print(table)
