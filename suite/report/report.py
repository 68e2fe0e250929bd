"""report.md of one run: provenance, per-scenario tables and charts, a verdict in words, and every row not ok.
The combinations no kernel is registered for have no row; one line names them (`suite.report.unregistered`).

Everything is derived from the results table. Tables are plain GitHub markdown (suite.kit.markdown, no
tabulate); long ones fold into <details>. The verdict in words comes from `suite.report.verdict`, and right
after it, where hand-fused kernels were timed beside the compiler, how they fared (`suite.report.rivals`). After
the crossover, where CUDA rows were also timed from graphs, how much of fusion's gain was launch overhead and how
much remains (`suite.report.launch_split`). Each scenario's part has the same sections whatever the family; a
family adds its own through `Scenario.captions` and `Scenario.report_sections`. Under the provenance, a line
says where GPU clocks were held back (`suite.report.throttle`) or a device's copy ceiling moved while the run
went on (`suite.report.drift`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from suite.core.ledger import STORE_MODEL, WRITE_ALLOCATE, WRITE_ONCE
from suite.core.scenario import lookup
from suite.kit.markdown import details, table
from suite.kit.store import ENVIRONMENT
from suite.kit.tidy import chart_name, fmt_size
from suite.report import boundary, glance, launch_split, measured, memory, pressure, rivals, saved, tables, unregistered
from suite.report.drift import drifted
from suite.report.host import host_cpu
from suite.report.plots import make_charts
from suite.report.precision import achieved
from suite.report.throttle import flagged, over_the_run
from suite.report.tidied import Tidied
from suite.report.verdict import verdicts

STORE_MEANING = {
    WRITE_ALLOCATE: "written bytes count twice: an ordinary store to a line not in cache first reads it "
    "(write-allocate)",
    WRITE_ONCE: "written bytes count once: stores reach device memory (HBM) without a prior read",
}
CAPTIONS = {
    "time_vs_size": "Median time against size (band: interquartile range)",
    "speedup": "Measured speedup (solid) against the ledger's prediction (dashed)",
    "bandwidth": "Achieved bandwidth under the copy ceiling measured in the same run",
    "vs_compiler": "Every variant's time over torch.compile's on the same case (below 1: faster than the compiler)",
    memory.KIND: memory.CAPTION,
}
"""The generic charts (suite.report.plots), in the order the report shows them, before the family's own."""


def write(frame: pd.DataFrame, outdir: Path) -> list[Path]:
    """The charts (under `outdir/charts`) and report.md of one results table, tidied once for both; their
    paths, report.md last."""
    tidied = Tidied.of(frame)
    charts = make_charts(tidied, Path(outdir) / "charts")
    return [*charts, write_report(tidied, charts, outdir)]


def write_report(frame: pd.DataFrame | Tidied, charts: list[Path], outdir: Path) -> Path:
    """Write `outdir/report.md` from a results table (or the `Tidied` view the charts were made from) and the
    charts made from it; return its path."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / "report.md"
    path.write_text("\n\n".join(sections(frame, charts, outdir)) + "\n", encoding="utf-8")
    return path


def sections(frame: pd.DataFrame | Tidied, charts: list[Path], outdir: Path) -> list[str]:
    """The report's parts in order: header and provenance, one part per scenario, the rows not ok. Chart links
    are relative to `outdir`; a report over many runs (suite.report.merged) nests these once per label."""
    tidied = Tidied.of(frame)
    data, left_out = unregistered.split(tidied.data)
    pairs = tidied.pairs
    title, intro, header = _header(data, _environment(outdir)).split("\n\n", 2)
    parts = [title, *[text for text in [glance.section(data)] if text], intro]
    parts += [text for text in [unregistered.line(left_out), header] if text]
    parts += [*flagged(data), *drifted(data), *achieved(data)]
    for scenario, rows in data.groupby("scenario"):
        parts.append(_scenario(rows, pairs[pairs["scenario"] == scenario], charts, outdir, data))
    parts.append(_not_ok(data))
    return parts


def _environment(outdir: Path) -> dict[str, Any]:
    """The environment.json beside the report (what the run ran on), {} where there is none or it is unreadable."""
    try:
        found = json.loads((Path(outdir) / ENVIRONMENT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _header(data: pd.DataFrame, environment: dict[str, Any]) -> str:
    ok = data["status"] == "ok"
    native = int((ok & data["time_ms"].notna()).sum())
    emulated = int((ok & (data["mode"] == "emulated")).sum())
    compiled = int((data["mode"] == "compile").sum())
    other_bad = int((~ok & (data["mode"] != "compile")).sum())
    lines = [
        "# fusebench report",
        f"Every number below comes from `results.csv` beside this file: {len(data)} rows, {native} timed "
        f"natively. {emulated} emulated rows (numerics checked in the Triton interpreter / Numba CUDA "
        f"simulator, not timed); {compiled} compile-only rows (built for sm_90, not run); "
        f"{other_bad} other rows not ok (listed at "
        "the end). Each verdict comes from the paired, interleaved repetitions of the two variants: *pays* "
        "when the whole 95% bootstrap interval of the median speedup lies above 1.02 (beyond a ±2% band of "
        "practical equivalence), *loses* when it lies below 0.98, *neutral* otherwise; predicted is the ledger's "
        "byte ratio under each device's store model (for a compiled variant, with the buffers its generated code "
        "kept between kernels).",
        "## Provenance",
        _devices(data),
        f"- git revision: {_distinct(data['git_rev'], code=True)}",
        f"- versions: {', '.join(sorted({_versions(v) for v in data['versions'].unique() if v}))}",
        f"- reproduce: {_distinct(_ran(data)['command'], code=True)}",
        f"- run: {_distinct(data['run_id'])}",
    ]
    if cpu := host_cpu(environment):
        lines.append(f"- CPU (environment.json): {cpu}")
    if gpu := over_the_run(environment):
        lines.append(f"- GPU at the run's start → end (NVML, environment.json): {gpu}")
    return "\n\n".join(lines[:4]) + "\n\n" + "\n".join(lines[4:])


def _ran(data: pd.DataFrame) -> pd.DataFrame:
    """The rows whose commands the report offers to reproduce: those timed natively, else those that ran at all
    (emulated, compile-only), else every row; never a skipped row's command ahead of one that ran."""
    ok = data["status"] == "ok"
    for keep in (ok & data["time_ms"].notna(), ok):
        if keep.any():
            return data[keep]
    return data


def _devices(data: pd.DataFrame) -> str:
    rows = []
    for device, sub in data.groupby("device"):
        timed = sub[sub["time_ms"].notna()]
        names = _distinct((timed if len(timed) else sub)["device_name"])
        model = next((m for m in sub["store_model"] if m), STORE_MODEL.get(device, ""))
        ceiling, streaming = sub["ceiling_gbps"].dropna(), sub["ceiling_streaming_gbps"].dropna()
        measured = _span(ceiling, "{:,.1f}") + " GB/s" if len(ceiling) else "not measured (nothing timed)"
        if (sub["ceiling_streaming_gbps"] > 1.05 * sub["ceiling_gbps"]).any():
            measured += f" (a copy with non-temporal stores: {_span(streaming, '{:,.1f}')} GB/s)"
        rows.append([device, names, model, STORE_MEANING.get(model, ""), measured])
    head = ["device", "device name", "store model", "what the ledger counts", "measured copy ceiling (ordinary stores)"]
    return table(head, rows)


def _scenario(rows: pd.DataFrame, pairs: pd.DataFrame, charts: list[Path], outdir: Path, data: pd.DataFrame) -> str:
    name = rows["scenario"].iloc[0]
    axis = rows["size_axis"].iloc[0]
    scn = lookup(name)
    parts = [f"## {name}", "### Verdict", verdicts(pairs)]
    parts += [text for text in [rivals.section(rows)] if text]
    parts += ["### Speedup: measured vs predicted", tables.speedup_table(pairs, axis)]
    parts += ["### Crossover", tables.crossover_table(pairs)]
    parts += [text for text in [launch_split.section(rows)] if text]
    parts += [text for text in [pressure.section(rows, pairs)] if text]
    parts += [text for text in [memory.section(rows)] if text]
    parts += [text for text in [saved.section(rows)] if text]
    parts += ["### Charts", *_chart_links(name, scn.captions, charts, outdir)]
    parts += scn.report_sections(data[data["scenario"].isin({name, *scn.composes})] if scn.composes else rows)
    parts += ["### Timings", details(f"All {len(rows)} rows", tables.summary_table(rows, axis))]
    parts += [text for text in [boundary.above_ceiling(rows)] if text]
    parts += ["### Traffic ledger", tables.ledger_table(rows, axis)]
    parts += [text for text in [measured.section(rows, charts, outdir)] if text]
    return "\n\n".join(parts)


def _chart_links(name: str, captions: dict[str, str], charts: list[Path], outdir: Path) -> list[str]:
    """Links to the scenario's charts: the generic ones in CAPTIONS order, then the family's as they were made."""
    named = {p.name: p for p in charts}
    generic = [named[chart_name(kind, name)] for kind in CAPTIONS if chart_name(kind, name) in named]
    own = [p for p in charts if p.name.endswith(f"_{name}.png") and p not in generic]
    out = []
    for path in [*generic, *own]:
        kind = path.stem.removesuffix(f"_{name}")
        caption = CAPTIONS.get(kind) or captions.get(kind) or kind.replace("_", " ")
        out.append(f"![{caption}]({Path(os.path.relpath(path, outdir)).as_posix()})")
    return out


def _not_ok(data: pd.DataFrame) -> str:
    bad = data[data["status"] != "ok"]
    if bad.empty:
        return "## Rows that are not ok\n\nNone: every row is ok."
    body = []
    for (status, reason), g in bad.groupby(["status", "reason"]):
        first = g.iloc[0]
        example = f"{first['scenario']} {first['series']}, {first['size_axis']} = {fmt_size(first['size'])}"
        body.append(
            [
                status,
                reason,
                str(len(g)),
                ", ".join(sorted(g["impl"].unique())),
                ", ".join(sorted(g["variant"].unique())),
                ", ".join(sorted(g["dtype"].unique())),
                example,
            ]
        )
    head = ["status", "reason", "rows", "backend/device", "variants", "dtypes", "example"]
    return "## Rows that are not ok\n\n" + table(head, body)


def _span(values: pd.Series, fmt: str) -> str:
    low, high = fmt.format(values.min()), fmt.format(values.max())
    return low if low == high else f"{low}–{high}"


def _distinct(values: pd.Series, code: bool = False) -> str:
    seen = [v for v in dict.fromkeys(values) if v]
    shown = [f"`{v}`" if code else v for v in seen[:3]]
    return (", ".join(shown) + (f" and {len(seen) - 3} more" if len(seen) > 3 else "")) or "unknown"


def _versions(text: str) -> str:
    """Versions as 'numba 0.61.2, numpy 2.3.1' when they are JSON, as written otherwise."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return ", ".join(f"{k} {v}" for k, v in sorted(value.items())) if isinstance(value, dict) else text
