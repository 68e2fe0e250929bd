"""`python -m suite headline`: the README's headline tables, printed from the committed runs' rows.

A figure copied by hand into the README drifts from the run it came from. Here each headline table is a short
declaration (which committed run, which cases, which ratios) and every cell is computed from that run's
`results.csv` with the report's own formatting (suite.report.glance: the paired speedup with its 95% interval and
verdict, torch.compile's from the same rounds, the library's as a ratio of medians; the ledger's prediction from
suite.kit.tidy.speedups). The README holds the output between two marker comments, and a test fails when the two
differ; `--write` puts the output there.

    python -m suite headline                   # the README's tables, as markdown
    python -m suite headline docs/training.md  # another document's
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
from suite.report.glance import library_ratio, ratio

ROOT = Path(__file__).resolve().parents[2]
START, END = "<!-- headline:start -->", "<!-- headline:end -->"
"""The marker comments around the generated block in a document."""


@dataclass(frozen=True)
class Case:
    """One line of a headline table: the fused row of `scenario` whose series is `series` (tidy's label of the
    case less its size and model; "" where the run has one series of the family), at `size` (None: the largest
    timed)."""

    label: str
    """How the table names the case; the size is appended as the row has it."""
    scenario: str
    series: str = ""
    size: float | None = None
    run: str = ""
    """The committed run this line is read from, where it is not its table's (a family rerun on its own)."""


@dataclass(frozen=True)
class Table:
    """One headline table: the cases of one committed run, for one implementation, dtype and phase."""

    run: str
    """The run's directory, relative to the repository root."""
    says: str
    """The line above the table: where its rows come from."""
    columns: tuple[str, ...]
    """Keys of COLUMNS, in order."""
    cases: tuple[Case, ...]
    impl: str = "numba/cpu"
    dtype: str = "float32"
    phase: str = "forward"


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
    "fused over the library (medians)": lambda p: library_ratio(p.row, timed(p.data)),
    "kept for backward, fused vs unfused": _kept,
    "peak, unfused → fused": _peak,
}
"""Column heading -> its cell for a picked row: every figure is computed as the report computes it."""

FORWARD = ("fused over unfused", "ledger predicts", "fused over torch.compile", "fused over the library (medians)")
SAMPLE = Table(
    run="results/sample",
    says="The default sweep (`nox -s bench`, `results/sample/`), float32, Numba's CPU kernels, at its largest sizes:",
    columns=FORWARD,
    cases=(
        Case("chain `scale→shift→relu→square`", "elementwise_chain", "scale→shift→relu→square"),
        Case(
            "8-op chain with tanh, sigmoid, silu, gelu",
            "elementwise_chain",
            "scale→shift→relu→square→tanh→sigmoid→silu→gelu",
        ),
        Case("layernorm, 4,096 rows", "layernorm"),
        Case("softmax, 4,096 rows", "softmax"),
        Case("attention B1 H4 D64", "attention"),
        Case("matmul 512×512 + bias+gelu epilogue", "matmul"),
    ),
)
LLAMA = Table(
    run="results/model_llama3_8b",
    says="The same families at Llama-3-8B's shapes, 2,048 tokens (`model=llama3_8b`, `results/model_llama3_8b/`):",
    columns=FORWARD,
    cases=(
        Case("MLP activation `shift→silu`", "elementwise_chain"),
        Case("layernorm, 2,048 rows", "layernorm"),
        Case("softmax of the scores, 65,536 rows", "softmax"),
        Case("causal attention H32 D128", "attention"),
        Case("MLP up projection 4,096 → 14,336 + bias+gelu", "matmul"),
    ),
)
TRAIN = Table(
    run="results/training",
    says=(
        "The train phase (forward + backward as one call; `python -m suite training device=cpu`, "
        "`results/training/`; softmax from `results/training_softmax/`, rerun once its torch rows' tolerance was "
        "corrected), float32, Numba's CPU kernels:"
    ),
    columns=(
        "fused over unfused",
        "fused over torch.compile",
        "kept for backward, fused vs unfused",
        "peak, unfused → fused",
    ),
    cases=(
        Case("chain `scale→shift→relu→square`", "elementwise_chain", "scale→shift→relu→square"),
        Case(
            "8-op chain with tanh, sigmoid, silu, gelu",
            "elementwise_chain",
            "scale→shift→relu→square→tanh→sigmoid→silu→gelu",
        ),
        Case("layernorm, 8,192 rows", "layernorm"),
        Case("rmsnorm, 8,192 rows", "rmsnorm"),
        Case("softmax, 8,192 rows", "softmax", run="results/training_softmax"),
        Case("add_rmsnorm, 8,192 rows", "add_rmsnorm"),
        Case("swiglu, 2,048 rows", "swiglu"),
        Case("rope, Llama-3-8B heads, half pairs", "rope", "batch=1, head_dim=128, heads=32, kv_heads=8, pairing=half"),
        Case("cross_entropy, 2,048 tokens", "cross_entropy"),
        Case("linear_cross_entropy, hidden 256, vocab 32,000", "linear_cross_entropy"),
    ),
    phase="train",
)
BACKWARD = Table(
    run="results/backward",
    says=(
        "The backward pass alone (`phase=backward`, `results/backward/`; layernorm, rmsnorm and add_rmsnorm from "
        "`results/backward_compiled/`, rerun once torch.compile's backward could be launched again):"
    ),
    columns=("fused, % of copy ceiling", "fused over unfused", "fused over torch.compile"),
    cases=(
        Case("rmsnorm, 8,192 rows", "rmsnorm", run="results/backward_compiled"),
        Case("layernorm, 8,192 rows", "layernorm", run="results/backward_compiled"),
        Case("add_rmsnorm, 8,192 rows", "add_rmsnorm", run="results/backward_compiled"),
        Case("swiglu, 2,048 rows", "swiglu"),
        Case("rope, half pairs", "rope", "batch=1, head_dim=128, heads=32, kv_heads=8, pairing=half"),
        Case("rope, interleaved", "rope", "batch=1, head_dim=128, heads=32, kv_heads=8, pairing=interleaved"),
        Case("softmax, 8,192 rows", "softmax"),
    ),
    phase="backward",
)
HEADLINES: dict[str, tuple[Table, ...]] = {"README.md": (SAMPLE, LLAMA), "docs/training.md": (TRAIN, BACKWARD)}
"""Document (relative to the repository root) -> the tables of its marked block."""


def pick(table_: Table, case: Case, data: pd.DataFrame, pairs: pd.DataFrame) -> Picked:
    """The fused row the case names; ConfigError naming the run and case where the run has none."""
    rows = timed(data)
    mine = rows[
        (rows["variant"] == "fused")
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
            f"headline: {case.run or table_.run} has no timed fused row for {case.label!r} ({case.scenario})"
        )
    row = mine.sort_values(["size", "series_rank"]).iloc[-1]
    pair = pairs[(pairs[CASE] == row[CASE]).all(axis=1) & (pairs["variant"] == "fused")]
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


def block(document: str, root: Path = ROOT) -> str:
    """The generated block of `document`: its tables, blank-line separated."""
    if document not in HEADLINES:
        raise ConfigError(f"headline: no headline tables for {document}; valid: {', '.join(HEADLINES)}")
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
    p.add_argument("document", nargs="?", default="README.md", help=f"one of: {', '.join(HEADLINES)}")
    p.add_argument("--write", action="store_true", help="rewrite every document's marked block from the runs")
    args = p.parse_args(argv)
    if args.write:
        for document in HEADLINES:
            print(f"{document}: {'rewritten' if write(document) else 'up to date'}")
        return 0
    print(block(args.document))
    return 0
