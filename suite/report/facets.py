"""What tells finished runs apart, and their verdicts side by side: the two things a report over many runs adds.

A report over several runs labels every row with where it came from. The label is the device the run timed on
(`device_name`) when the runs differ in device, else the revision of fusebench they ran (`git_rev`) when they
differ in that, else the run's name: the first of these that differs is what a reader wants to compare. A run's
device is that of its natively timed rows (an emulated or compile-only row names the host or sm_90, which is not
where its times came from). Runs with the same label are pooled (repeated rows reduce to their median).

The side-by-side table puts each label's verdict and speedup for one (scenario, params, dtype, backend, variant)
on one line and says where the labels disagree, so a verdict that holds on one device and not on another stands
out without reading two reports.
"""

from __future__ import annotations

import re

import pandas as pd

from suite.kit.markdown import details, table
from suite.kit.store import Run
from suite.kit.tidy import fmt_size, fmt_x, speedups

FACET = "facet"
"""The column of the merged table holding each row's label."""
KINDS = ("device", "revision", "run")
CHOICES = (*KINDS, "auto")
FOLD = 40
"""A side-by-side table longer than this folds into <details>."""
KEY = ["scenario", "series_rank", "series", "size_axis", "size", "dtype_rank", "dtype", "impl", "variant", "params"]


def describe(run: Run, kind: str) -> str:
    """The run's label of one kind: its device(s), its revision(s) or its name."""
    rows = run.results
    if kind == "run":
        return run.name
    if kind == "device":
        names = _column(rows, "device_name")
        return _joined(names[_native(rows)]) or _joined(names) or "unknown device"
    return _joined(_column(rows, "git_rev")) or "unknown revision"


def _column(rows: pd.DataFrame, name: str) -> pd.Series:
    """A text column of a run's table; empty where a table from an older version lacks it."""
    return rows[name].fillna("").astype(str) if name in rows else pd.Series("", index=rows.index)


def _native(rows: pd.DataFrame) -> pd.Series:
    return (_column(rows, "status") == "ok") & (_column(rows, "mode") == "native")


def _joined(values: pd.Series) -> str:
    seen = [v for v in dict.fromkeys(values) if v]
    return " + ".join(seen)


def choose(runs: list[Run], facet: str) -> tuple[str, list[str]]:
    """The kind of label (`facet`, or with `auto` the first kind in which the runs differ) and each run's label.
    Run names are made unique by their parent folders where two runs share a name (two multiruns' job 0)."""
    if facet == "auto":
        facet = next((k for k in KINDS[:2] if len({describe(r, k) for r in runs}) > 1), "run")
    if facet != "run":
        return facet, [describe(r, facet) for r in runs]
    return facet, _unique_names(runs)


def _unique_names(runs: list[Run]) -> list[str]:
    depth = 1
    while True:
        names = ["/".join(r.path.resolve().parts[-depth:]) for r in runs]
        if len(set(names)) == len(names) or depth > max(len(r.path.resolve().parts) for r in runs):
            return names
        depth += 1


def slug(label: str) -> str:
    """A folder name for a label: 'NVIDIA H200' -> 'nvidia-h200'."""
    return re.sub(r"[^a-z0-9.]+", "-", label.lower()).strip("-") or "runs"


def pairs_by_label(data: pd.DataFrame) -> pd.DataFrame:
    """The speedup pairs (suite.kit.tidy.speedups) of each label's rows on their own, with the label beside."""
    found = [speedups(rows).assign(**{FACET: label}) for label, rows in data.groupby(FACET, sort=False)]
    found = [f for f in found if not f.empty]
    return pd.concat(found, ignore_index=True) if found else pd.DataFrame(columns=[*KEY, "baseline", FACET])


def side_by_side(data: pd.DataFrame, labels: list[str]) -> str:
    """The verdicts of every label on one line per comparison, and a column saying where the labels differ."""
    pairs = pairs_by_label(data)
    if pairs.empty:
        return "No label timed a pair of variants natively, so there is no verdict to set side by side."
    body, differ = [], 0
    for key, group in pairs.groupby([*KEY, "baseline"], sort=True):
        case = dict(zip([*KEY, "baseline"], key, strict=True))
        mine = {row[FACET]: row for _, row in group.iterrows()}
        cells = [
            f"{mine[label]['verdict']} {fmt_x(mine[label]['speedup'])}" if label in mine else "–" for label in labels
        ]
        where = differs(mine, labels)
        differ += bool(where)
        body.append(
            [
                case["scenario"],
                case["series"],
                f"{case['size_axis']} = {fmt_size(case['size'])}",
                case["dtype"],
                case["impl"],
                f"{case['variant']} vs {case['baseline']}",
                *cells,
                where,
            ]
        )
    head = ["scenario", "case", "size", "dtype", "backend/device", "comparison", *labels, "where they differ"]
    note = (
        f"Each label's verdict and measured speedup for every comparison timed natively under any label "
        f"({len(body)} lines; – where a label did not time it). The labels differ on {differ} of them."
    )
    text = table(head, body)
    return note + "\n\n" + (details(f"{len(body)} comparisons", text) if len(body) > FOLD else text)


def differs(mine: dict[str, pd.Series], labels: list[str]) -> str:
    """Where the labels disagree on one comparison: the verdicts when they differ, the labels that lack it."""
    said = {label: str(mine[label]["verdict"]) for label in labels if label in mine}
    parts = []
    if len(set(said.values())) > 1:
        parts.append("verdict: " + ", ".join(f"{verdict} on {label}" for label, verdict in said.items()))
    missing = [label for label in labels if label not in mine]
    if missing:
        parts.append("not timed on " + ", ".join(missing))
    return "; ".join(parts)


def runs_table(runs: list[Run], labels: list[str]) -> str:
    """Which run went into which label, with its device, revision and how many of its rows were timed."""
    body = []
    for run, label in zip(runs, labels, strict=True):
        rows = run.results
        native = int(_native(rows).sum())
        body.append(
            [label, str(run.path), describe(run, "device"), describe(run, "revision"), str(len(rows)), str(native)]
        )
    return table(["label", "run", "device", "revision", "rows", "timed natively"], body)
