"""`python -m suite report RUN [RUN ...]`: the report and charts of finished runs, rebuilt without running anything.

One run: its charts/ and report.md rebuilt as the run itself wrote them, into its own directory or into --out
(beside a copy of its table, which the report cites). Several runs: their rows merged into one table
(results.csv, results.parquet), each row labelled with where it came from (the `facet` column; which label, see
suite.report.facets), one set of charts per label under charts/<label>/, and one report.md: the runs, every
verdict side by side with where the labels differ, then each label's part as a report of its rows alone would
have it. Verdicts are never computed across labels: a fused row is paired only with an unfused row of its own
label.
"""

from __future__ import annotations

import argparse
import re
import shutil
from datetime import datetime
from pathlib import Path

import pandas as pd

from suite.core.errors import ConfigError
from suite.core.row import COLUMNS
from suite.kit.store import CSV_NAME, ENVIRONMENT, RESULTS_PARQUET, Run, load, typed, write_environment
from suite.kit.tidy import tidy
from suite.report import facets
from suite.report.plots import make_charts
from suite.report.report import sections, write
from suite.report.tidied import Tidied

SOURCE = "source_run"
"""The column of the merged table holding the directory each row was read from."""
ROWS_CITED = "Every number below comes from `results.csv` beside this file:"
"""How a single run's report cites its table; under a label, the rows of that label are cited instead."""
USAGE = "python -m suite report RUN [RUN ...] [--out DIR] [--facet device|revision|run|auto]"


class _Parser(argparse.ArgumentParser):
    """Bad arguments are one line and exit status 2 (through ConfigError), not argparse's usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(f"report: {message}; usage: {USAGE}")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m suite report", description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="*", metavar="RUN", help="run directories (or their results.csv)")
    p.add_argument(
        "--out", type=Path, help="where to write (one run: its own directory; several: results/report_<time>)"
    )
    p.add_argument(
        "--facet",
        choices=facets.CHOICES,
        default="auto",
        help="what labels each run's rows (auto: device if the runs differ in it, else revision, else run)",
    )
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if not args.runs:
        raise ConfigError(f"report needs at least one RUN, a run directory holding {CSV_NAME}; usage: {USAGE}")
    runs = load_runs(args.runs)
    path = rebuild(runs[0], args.out) if len(runs) == 1 else merge(runs, args.out or default_out(), args.facet)
    print(f"report: {path}")
    return 0


def load_runs(paths: list[str]) -> list[Run]:
    """Every run named, once each, in the order given; ConfigError (one line) for one that is not a run."""
    runs: dict[Path, Run] = {}
    for path in paths:
        run = load(path)
        runs.setdefault(run.path.resolve(), run)
    return list(runs.values())


def default_out(now: datetime | None = None) -> Path:
    return Path("results") / f"report_{(now or datetime.now()):%Y-%m-%d_%H-%M-%S}"


def rebuild(run: Run, out: Path | None = None) -> Path:
    """The charts and report.md of one run, as `suite.sweep.finalize` makes them; elsewhere than the run's own
    directory, its results.csv (and the typed Parquet copy) and environment.json go beside them."""
    out = Path(out) if out is not None else run.path
    out.mkdir(parents=True, exist_ok=True)
    if out.resolve() != run.path.resolve():
        if (run.path / CSV_NAME).exists():
            shutil.copyfile(run.path / CSV_NAME, out / CSV_NAME)
        else:
            run.results.to_csv(out / CSV_NAME, index=False)
        typed(run.results).to_parquet(out / RESULTS_PARQUET, index=False)
        if (run.path / ENVIRONMENT).exists():  # the report's provenance lines read it from beside the report
            shutil.copyfile(run.path / ENVIRONMENT, out / ENVIRONMENT)
    return write(run.results, out)[-1]


def merged(runs: list[Run], labels: list[str]) -> pd.DataFrame:
    """The rows of every run in one table, the results columns first, then each row's label and source."""
    tags = (facets.FACET, SOURCE)
    frames = [
        r.results.assign(**dict(zip(tags, (label, str(r.path)), strict=True)))
        for r, label in zip(runs, labels, strict=True)
    ]
    frame = pd.concat([f for f in frames if not f.empty] or frames[:1], ignore_index=True)
    first = [c for c in COLUMNS if c in frame]
    return frame[[*first, *(c for c in frame if c not in first and c not in tags), *tags]]


def merge(runs: list[Run], out: Path, facet: str = "auto") -> Path:
    """One table, one set of charts per label and one report over several runs; return the report's path."""
    out = Path(out)
    if out.resolve() in {r.path.resolve() for r in runs}:
        raise ConfigError(f"--out {out} is one of the runs merged; its table would be overwritten: name another")
    kind, labels = facets.choose(runs, facet)
    frame = merged(runs, labels)
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / CSV_NAME, index=False)
    typed(frame).to_parquet(out / RESULTS_PARQUET, index=False)
    write_environment(out, {"runs": {str(r.path): r.environment for r in runs}})
    order = list(dict.fromkeys(labels))
    folders = _folders(order)
    views = {label: Tidied.of(frame[frame[facets.FACET] == label]) for label in order}  # each label's, tidied once
    charts = {label: make_charts(views[label], out / "charts" / folders[label], label=label) for label in order}
    parts = [_header(runs, labels, kind, facet == "auto"), "## Verdicts side by side"]
    parts.append(facets.side_by_side(tidy(frame), order))
    for label in order:
        parts.append(_nested(label, sections(views[label], charts[label], out)))
    path = out / "report.md"
    path.write_text("\n\n".join(parts) + "\n", encoding="utf-8")
    return path


def _folders(labels: list[str]) -> dict[str, str]:
    """A distinct chart folder per label (two labels may slug alike)."""
    out: dict[str, str] = {}
    for label in labels:
        name, n = facets.slug(label), 2
        while name in out.values():
            name, n = f"{facets.slug(label)}-{n}", n + 1
        out[label] = name
    return out


def _header(runs: list[Run], labels: list[str], kind: str, auto: bool) -> str:
    why = " (the first of device, revision and run in which they differ)" if auto else ""
    return "\n\n".join(
        [
            f"# fusebench report over {len(runs)} runs",
            f"Every number below comes from `results.csv` beside this file: the rows of {len(runs)} runs, each "
            f"labelled (column `{facets.FACET}`) with the {kind} it came from{why}. Each label's verdicts come from "
            "its own rows only; runs with the same label are pooled. Nothing was rerun.",
            "## Runs",
            facets.runs_table(runs, labels),
        ]
    )


def _nested(label: str, parts: list[str]) -> str:
    """One label's report under a heading of its own: the single-run report's headings one level down."""
    text = "\n\n".join(parts).removeprefix("# fusebench report\n\n")
    text = text.replace(
        ROWS_CITED, f"Every number in this part comes from the rows of `results.csv` labelled {label}:", 1
    )
    return f"## {label}\n\n" + re.sub(r"^(#+) ", r"#\1 ", text, flags=re.MULTILINE)
