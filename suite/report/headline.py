"""`python -m suite headline`: the headline tables of the README and the docs, printed from committed runs' rows.

A figure copied by hand into the README drifts from the run it came from. Here each headline table is a short
declaration in suite.report.headlines (which committed run, which cases, which ratios) and every cell is computed
from that run's `results.csv` with the report's own formatting (suite.report.glance: the paired speedup with its
95% interval and verdict, torch.compile's from the same rounds, the library's as a ratio of medians; the ledger's
prediction from suite.kit.tidy.speedups). A document holds the output between two marker comments, and a test
(tests/test_docs.py) fails when the two differ; `--write` puts the output there.

    python -m suite headline                   # the README's tables, as markdown
    python -m suite headline docs/training.md  # another document's
    python -m suite headline results/README.md # the index of the committed runs (suite.report.run_index)
    python -m suite headline --write           # every document's marked block rewritten from the runs
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pandas as pd

from suite.core.errors import ConfigError
from suite.kit.markdown import table
from suite.kit.store import CSV_NAME, read
from suite.kit.tidy import CASE, fmt_size, fmt_x, speedups, tidy, timed
from suite.report.glance import NO_LIBRARY, library_ratio, ratio
from suite.report.headlines import HEADLINES, Case, Table
from suite.report.run_index import index

ROOT = Path(__file__).resolve().parents[2]
START, END = "<!-- headline:start -->", "<!-- headline:end -->"
"""The marker comments around the generated block in a document."""


@dataclass(frozen=True)
class Picked:
    """A fused row chosen for a headline line, with the rows it is read against."""

    row: pd.Series
    data: pd.DataFrame
    """Every tidy row of the run."""
    predicted: float


def _peak(p: Picked) -> str:
    """The unfused variant's measured peak memory → the fused one's, for the same case and implementation."""
    row, data = p.row, p.data
    same = (data[CASE[:-1]] == row[CASE[:-1]]).all(axis=1) & (data["device"] == row["device"])
    base = data[same & (data["variant"] == "unfused")]["peak_bytes"].dropna()
    if base.empty or pd.isna(row["peak_bytes"]):
        return ""
    return f"{base.iloc[0] / 2**20:,.0f} → {row['peak_bytes'] / 2**20:,.0f} MiB"


def _kept(p: Picked) -> str:
    """The bytes the fused forward keeps for the backward pass against the unfused one's (measured)."""
    row, data = p.row, p.data
    same = (data[CASE[:-1]] == row[CASE[:-1]]).all(axis=1) & (data["device"] == row["device"])
    base = pd.to_numeric(data[same & (data["variant"] == "unfused")]["saved_bytes"], errors="coerce").dropna()
    mine = pd.to_numeric(pd.Series([row.get("saved_bytes")]), errors="coerce").iloc[0]
    if base.empty or pd.isna(mine):
        return ""
    return f"{mine / 2**20:,.0f} vs {base.iloc[0] / 2**20:,.0f} MiB"


COLUMNS = {
    "fused, % of copy ceiling": lambda p: (
        f"{p.row['pct_of_ceiling']:.0f}%" if pd.notna(p.row["pct_of_ceiling"]) else ""
    ),
    "fused over unfused": lambda p: ratio(p.row["speedup"], p.row["speedup_lo"], p.row["speedup_hi"], p.row["verdict"]),
    "ledger predicts": lambda p: fmt_x(p.predicted),
    "fused over torch.compile": lambda p: ratio(
        p.row["rival_speedup"], p.row["rival_lo"], p.row["rival_hi"], p.row["rival_verdict"]
    ),
    "fused over the library (medians)": lambda p: library_ratio(p.row, timed(p.data)) or NO_LIBRARY,
    "kept for backward, fused vs unfused": _kept,
    "peak, unfused → fused": _peak,
}
"""Column heading -> its cell for a picked row: every figure is computed as the report computes it."""


def pick(table_: Table, case: Case, data: pd.DataFrame, pairs: pd.DataFrame) -> Picked:
    """The hand kernel's row the case names; ConfigError naming the run and case where the run has none."""
    rows = timed(data)
    mine = rows[
        (rows["variant"] == case.variant)
        & (rows["scenario"] == case.scenario)
        & (rows["impl"] == table_.impl)
        & (rows["dtype"] == table_.dtype)
        & (rows["phase"] == table_.phase)
    ]
    if case.series:
        bare = mine["series"].str.split(": ").str[-1]
        mine = mine[bare == case.series]
    if case.size is not None:
        mine = mine[mine["size"] == case.size]
    if mine.empty:
        raise ConfigError(
            f"headline: {case.run or table_.run} has no timed {case.variant} row for {case.label!r} ({case.scenario})"
        )
    row = mine.sort_values(["size", "series_rank"]).iloc[-1]
    pair = pairs[(pairs[CASE] == row[CASE]).all(axis=1) & (pairs["variant"] == case.variant)]
    return Picked(row, data, float(pair["predicted"].iloc[0]) if len(pair) else float("nan"))


def _rows(run: str, root: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A committed run's tidy rows and their pairs."""
    path = root / run / CSV_NAME
    if not path.exists():
        raise ConfigError(f"headline: no committed run at {run} (expected {CSV_NAME})")
    data = tidy(read(path))
    return data, speedups(data)


def render(table_: Table, root: Path = ROOT) -> str:
    """One table as markdown, preceded by its line."""
    runs = {run: _rows(run, root) for run in dict.fromkeys([table_.run, *(c.run for c in table_.cases if c.run)])}
    body = []
    for case in table_.cases:
        picked = pick(table_, case, *runs[case.run or table_.run])
        size = f"{picked.row['size_axis']} = {fmt_size(picked.row['size'])}"
        body.append([f"{case.label}, {size}", *(COLUMNS[c](picked) for c in table_.columns)])
    return f"{table_.says}\n\n{table(['case', *table_.columns], body)}"


RUN_INDEX = "results/README.md"
"""The document whose marked block is the committed runs' index (`suite.report.run_index`), not a headline."""
DOCUMENTS = (*HEADLINES, RUN_INDEX)


def block(document: str, root: Path = ROOT) -> str:
    """The generated block of `document`: its tables, blank-line separated (the runs' index for RUN_INDEX)."""
    if document == RUN_INDEX:
        return index(root / "results")
    if document not in HEADLINES:
        raise ConfigError(f"headline: no headline tables for {document}; valid: {', '.join(DOCUMENTS)}")
    return "\n\n".join(render(t, root) for t in HEADLINES[document])


def marked(text: str) -> str:
    """What sits between the markers of `text` (stripped); ConfigError where the markers are missing."""
    if START not in text or END not in text:
        raise ConfigError(f"headline: the document lacks the markers {START} and {END}")
    return text.split(START, 1)[1].split(END, 1)[0].strip()


def write(document: str, root: Path = ROOT) -> bool:
    """Rewrite the marked block of `document` from the runs; whether it changed."""
    path = root / document
    text = path.read_text(encoding="utf-8")
    old, new = marked(text), block(document, root)
    if old == new:
        return False
    before, rest = text.split(START, 1)
    path.write_text(f"{before}{START}\n{new}\n{END}{rest.split(END, 1)[1]}", encoding="utf-8")
    return True


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"headline: {message}; usage: python -m suite headline [DOCUMENT] [--write]")


def main(argv: list[str]) -> int:
    p = _Parser(prog="python -m suite headline", description=__doc__.split("\n\n")[0])
    p.add_argument("document", nargs="?", default="README.md", help=f"one of: {', '.join(DOCUMENTS)}")
    p.add_argument("--write", action="store_true", help="rewrite every document's marked block from the runs")
    args = p.parse_args(argv)
    if args.write:
        for document in DOCUMENTS:
            print(f"{document}: {'rewritten' if write(document) else 'up to date'}")
        return 0
    print(block(args.document))
    return 0
