"""A run on disk: the files, how to read them (`read`, `read_reps`, `load`) and the typed copies made at the end
(results.parquet, reps.parquet) beside environment.json. The run layer writes runs and the report layer reads
them; both go through here.

results.csv (for spreadsheets) and reps.csv are what a run appends to while it runs (`suite.run.results`), so a
killed run keeps its rows; the Parquet files are made from them at the end. In results.parquet each column has the type the row
declares (`suite.core.row.Row`) and the case's params are expanded into one typed column per axis
(`param_<axis>`: integers, booleans, strings, lists of ops or tile sizes), so a table of many runs can be
filtered without parsing JSON. An axis whose values differ in kind between families (a normalization `tile` is an
integer, a matmul `tile` a list) is kept as JSON text. reps.parquet is long: one line per timed repetition
(row id, variant, round, time).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd

from suite.core.errors import ConfigError
from suite.core.row import COLUMNS, STATUSES, Row

CSV_NAME = "results.csv"
REPS_NAME = "reps.csv"
REPS_COLUMNS = ["row_id", "variant", "round", "time_ms", "block", "canary_ms", "excluded"]
"""`block`: the buffer set of the repetition; `canary_ms`: the canary's time in the same round (empty where the
row had none); `excluded`: taken while the GPU was throttled, left out. Runs from before these columns read as
block 0, no canary, nothing excluded."""
RESULTS_PARQUET = "results.parquet"
REPS_PARQUET = "reps.parquet"
ENVIRONMENT = "environment.json"
PARAM = "param_"
"""Prefix of the columns the params are expanded into."""

_KINDS = {"str": "string", "int | None": "Int64", "float | None": "float64", "bool | None": "boolean"}
DTYPES = {f.name: _KINDS.get(str(f.type), "string") for f in fields(Row) if f.name in COLUMNS}
"""The pandas type of every results column, from the row's annotations (`extra` stays JSON text)."""


def typed(frame: pd.DataFrame) -> pd.DataFrame:
    """The results table with each column in its declared type and the params expanded (`param_<axis>`)."""
    out = frame.copy()
    for column, kind in DTYPES.items():
        if column not in out:
            out[column] = pd.Series([None] * len(out), dtype=object)
        if kind == "boolean":
            out[column] = out[column].map(_boolean).astype("boolean")
        elif kind == "Int64":
            out[column] = pd.to_numeric(out[column], errors="coerce").round().astype("Int64")
        elif kind == "float64":
            out[column] = pd.to_numeric(out[column], errors="coerce").astype("float64")
        else:
            out[column] = out[column].map(lambda v: "" if _missing(v) else str(v)).astype("string")
    params = [json.loads(p) if isinstance(p, str) and p else {} for p in out["params"]]
    for axis in sorted({k for p in params for k in p}):
        out[PARAM + axis] = _axis([p.get(axis) for p in params])
    return out


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value) or value is pd.NA


def _boolean(value: Any) -> Any:
    if _missing(value) or value == "":
        return pd.NA
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


def _axis(values: list[Any]) -> pd.Series:
    """One params axis as a typed column; values of different kinds (an integer here, a list there) as JSON."""
    kinds = {type(v) for v in values if v is not None}
    if kinds == {bool}:
        return pd.Series(values, dtype="boolean")
    if kinds <= {int}:
        return pd.Series(values, dtype="Int64")
    if kinds <= {int, float}:
        return pd.Series([None if v is None else float(v) for v in values], dtype="float64")
    if kinds == {str}:
        return pd.Series(values, dtype="string")
    if kinds == {list} and len({_leaf(v) for v in values if v is not None}) == 1:
        return pd.Series(values, dtype=object)
    return pd.Series([None if v is None else json.dumps(v) for v in values], dtype="string")


def _leaf(value: list[Any]) -> tuple[int, type]:
    """The nesting depth and element type of a list, so only lists of one shape share a list column."""
    depth, item = 1, value
    while isinstance(item, list) and item and isinstance(item[0], list):
        depth, item = depth + 1, item[0]
    first = item[0] if isinstance(item, list) and item else None
    return depth, type(first)


def read(path: Path) -> pd.DataFrame:
    """Read a results.csv, tolerating a last line cut short by a killed process."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame(columns=COLUMNS)
    frame = pd.read_csv(
        path, on_bad_lines="skip", keep_default_na=True, dtype={"params": str, "reason": str, "row_id": str}
    )
    frame["reason"] = frame["reason"].fillna("")
    frame["phase"] = frame["phase"].fillna("forward") if "phase" in frame else "forward"  # tables before phases
    return frame[frame["status"].isin(STATUSES)].reset_index(drop=True)


def read_reps(path: Path, row_ids: set[str] | None = None) -> pd.DataFrame:
    """Read a reps.csv (a last line cut short is dropped); with `row_ids`, only repetitions of those rows."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return with_rep_columns(pd.DataFrame({c: pd.Series(dtype="str") for c in REPS_COLUMNS[:2]}))
    frame = pd.read_csv(path, on_bad_lines="skip", dtype={"row_id": str, "variant": str})
    frame["round"] = pd.to_numeric(frame["round"], errors="coerce")
    frame["time_ms"] = pd.to_numeric(frame["time_ms"], errors="coerce")
    frame = frame.dropna(subset=["round", "time_ms"])
    if row_ids is not None:
        frame = frame[frame["row_id"].isin(row_ids)]
    return with_rep_columns(frame.reset_index(drop=True))


def with_rep_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` (repetitions) with every column of REPS_COLUMNS in its type, those an older run lacks filled in."""
    out = frame.copy()
    for column, fill in (
        ("round", 0),
        ("time_ms", float("nan")),
        ("block", 0),
        ("canary_ms", float("nan")),
        ("excluded", False),
    ):
        if column not in out:
            out[column] = pd.Series([fill] * len(out), dtype=object)
    out["round"] = pd.to_numeric(out["round"], errors="coerce").fillna(0).astype("int64")
    out["time_ms"] = pd.to_numeric(out["time_ms"], errors="coerce").astype("float64")
    out["block"] = pd.to_numeric(out["block"], errors="coerce").fillna(0).astype("int64")
    out["canary_ms"] = pd.to_numeric(out["canary_ms"], errors="coerce").astype("float64")
    out["excluded"] = (
        out["excluded"]
        .map(lambda v: str(v).strip().lower() == "true" if isinstance(v, str) else bool(v) if v == v else False)
        .astype(bool)
    )
    return out[REPS_COLUMNS]


def write_parquet(directory: Path) -> None:
    """results.parquet and reps.parquet of the run in `directory`, from its results.csv and reps.csv."""
    directory = Path(directory)
    frame = read(directory / CSV_NAME)
    typed(frame).to_parquet(directory / RESULTS_PARQUET, index=False)
    read_reps(directory / REPS_NAME).to_parquet(directory / REPS_PARQUET, index=False)


def write_environment(directory: Path, environment: dict[str, Any]) -> None:
    Path(directory).mkdir(parents=True, exist_ok=True)
    (Path(directory) / ENVIRONMENT).write_text(json.dumps(environment, indent=2, sort_keys=True) + "\n")


def merge_environments(directories: list[Path], out: Path) -> None:
    """The environment.json of a multirun: the jobs' one where they agree, else each job's under `jobs`."""
    found = {d.name: json.loads((d / ENVIRONMENT).read_text()) for d in directories if (d / ENVIRONMENT).exists()}
    if not found:
        return
    distinct = {json.dumps(e, sort_keys=True) for e in found.values()}
    write_environment(out, next(iter(found.values())) if len(distinct) == 1 else {"jobs": found})


@dataclass
class Run:
    """One finished run read back: its rows, its repetitions (empty for a run that kept none) and environment."""

    path: Path
    results: pd.DataFrame
    reps: pd.DataFrame
    environment: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.name if self.path.name not in ("", ".") else str(self.path)

    def times(self, row_id: str) -> list[float]:
        """The repetitions of one row, in round order (empty where none were kept)."""
        mine = self.reps[self.reps["row_id"] == row_id]
        return mine.sort_values("round")["time_ms"].tolist()


def load(path: str | Path) -> Run:
    """Read the run at `path` (a run directory, or its results.csv / results.parquet); ConfigError (one line)
    where there is none. The CSV is read when both are there: it is what the run wrote as it went."""
    path = Path(path)
    directory = path.parent if path.is_file() else path
    csv_path, parquet_path = directory / CSV_NAME, directory / RESULTS_PARQUET
    if csv_path.exists():
        results = read(csv_path)
    elif parquet_path.exists():
        results = pd.read_parquet(parquet_path)
    else:
        raise ConfigError(f"no run at {path}: expected a run directory holding {CSV_NAME}")
    if "row_id" not in results:
        results["row_id"] = ""
    results["row_id"] = results["row_id"].fillna("").astype(str)
    results["phase"] = results["phase"].fillna("forward") if "phase" in results else "forward"
    if (directory / REPS_PARQUET).exists():
        reps = with_rep_columns(pd.read_parquet(directory / REPS_PARQUET))
    else:
        reps = read_reps(directory / REPS_NAME)
    env_path = directory / ENVIRONMENT
    environment = json.loads(env_path.read_text()) if env_path.exists() else {}
    return Run(directory, results, reps, environment)
