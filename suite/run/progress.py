"""What the user sees while a sweep runs (a rich progress bar with the time left) and after it (a summary table).

The command line plans every job of a multirun first and leaves how many cases each has in the sweep's
directory (`Sweep.write`); each job reads it back (`Sweep.read`) and hands it to its run, so every job's bar
counts the cases of the whole sweep, names the job, and estimates the time left from the sweep's own pace so far
(cases done since it started), whichever process the launcher runs it in.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn
from rich.table import Column, Table
from rich.text import Text

from suite.core.row import Row
from suite.run.job import Job

console = Console(stderr=True)


SWEEP_FILE = "sweep_cases.json"
"""Where the command line leaves a multirun's plan for its jobs' bars, in the sweep's directory."""


@dataclass
class Sweep:
    """The cases of every job of the sweep, in job order, and when the sweep started (seconds since the epoch:
    a job in another process reads it from the sweep's directory)."""

    cases: list[int] = field(default_factory=list)
    started: float = field(default_factory=time.time)

    def before(self, job: int) -> int:
        return sum(self.cases[:job])

    @property
    def total(self) -> int:
        return sum(self.cases)

    def write(self, sweep_dir: Path) -> None:
        """Leave the plan in the sweep's directory, before Hydra starts its jobs (`read` in each job)."""
        sweep_dir.mkdir(parents=True, exist_ok=True)
        (sweep_dir / SWEEP_FILE).write_text(json.dumps({"cases": self.cases, "started": self.started}) + "\n")

    @classmethod
    def read(cls, sweep_dir: Path) -> Sweep | None:
        """The plan the command line left in `sweep_dir`; None where it left none (a sweep launched otherwise)."""
        try:
            found = json.loads((sweep_dir / SWEEP_FILE).read_text(encoding="utf-8"))
            return cls([int(c) for c in found["cases"]], float(found["started"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}:{secs:02d}"


class SweepTime(ProgressColumn):
    """Time since the sweep started, and the time left at the pace of the cases done so far."""

    def __init__(self, sweep: Sweep, table_column: Column | None = None) -> None:
        super().__init__(table_column)
        self.sweep = sweep

    def render(self, task: Task) -> Text:
        elapsed = time.time() - self.sweep.started
        done = int(task.completed)
        if done == 0 or task.total is None:
            return Text(f"{_clock(elapsed)} elapsed", style="progress.elapsed")
        left = elapsed / done * (task.total - done)
        return Text(f"{_clock(elapsed)} elapsed, about {_clock(left)} left", style="progress.remaining")


class Bar:
    def __init__(self, total: int, enabled: bool = True, job: int | None = None, sweep: Sweep | None = None) -> None:
        """`total` cases in this run; where the run is job `job` of the planned `sweep`, the bar counts the
        sweep's cases, those of the jobs before it already done."""
        planned = sweep is not None and job is not None and job < len(sweep.cases) and sweep.cases[job] == total
        sweep = sweep if planned and sweep is not None else Sweep([total])
        done_before = sweep.before(job) if job is not None and len(sweep.cases) > 1 else 0
        self.prefix = f"job {job + 1}/{len(sweep.cases)} " if len(sweep.cases) > 1 and job is not None else ""
        self.progress = Progress(
            TextColumn("[bold]{task.description}", table_column=Column(no_wrap=True, overflow="ellipsis", ratio=3)),
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            SweepTime(sweep, table_column=Column(no_wrap=True)),
            TextColumn("{task.fields[tally]}", table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1)),
            console=console,
            disable=not enabled,
            transient=False,
            expand=True,
        )
        self.task = self.progress.add_task("cases", total=sweep.total, completed=done_before, tally="")
        self.tally: Counter[str] = Counter()

    def __enter__(self) -> Bar:
        self.progress.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.progress.__exit__(kind, exc, tb)

    def start(self, job: Job) -> None:
        shape = ", ".join(f"{k}={v}" for k, v in job.params.items())
        self.progress.update(self.task, description=f"{self.prefix}{job.scenario} {shape} {job.dtype}"[:70])

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
        table.add_row(
            *map(str, key),
            modes,
            str(len(ok)),
            " ".join(f"{k}:{v}" for k, v in bad.items()) or "-",
            f"{times.median():.4g}" if len(times) else "-",
        )
    console.print(table)
