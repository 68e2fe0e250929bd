"""The check's one folder that travels, and its one-screen summary.

At most two levels deep and at most MAX_FILES files: the typed tables (results.parquet, reps.parquet), what
ran where (environment.json, with the check's stack, plan and test outcomes under `gpu_check`), report.md,
the check's log, and one chart sheet (charts.png: the first chart of each family on one page). The full run,
every chart beside its report, stays where the log says.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

MAX_FILES = 8
COPIED = ("results.parquet", "reps.parquet", "report.md")


def write(run: Path, out: Path, check: dict[str, Any], log: Path) -> list[Path]:
    """Fill `out` from the finished run in `run`; the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in COPIED:
        if (run / name).exists():
            written.append(Path(shutil.copy2(run / name, out / name)))
    environment = json.loads((run / "environment.json").read_text()) if (run / "environment.json").exists() else {}
    (out / "environment.json").write_text(json.dumps({**environment, "gpu_check": check}, indent=2, default=str))
    written.append(out / "environment.json")
    if log.resolve() != (out / "check.log").resolve():
        shutil.copy2(log, out / "check.log")
    written.append(out / "check.log")
    sheet = chart_sheet(sorted((run / "charts").glob("*.png")), out / "charts.png")
    written += [sheet] if sheet is not None else []
    assert len(written) <= MAX_FILES
    return written


def chart_sheet(charts: list[Path], path: Path, per_family: int = 1, most: int = 6) -> Path | None:
    """The first chart of each family (by the scenario its name ends in) on one page; None without charts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    picked: dict[str, list[Path]] = {}
    for chart in charts:
        family = chart.stem.split("_", 1)[-1]
        if len(picked.setdefault(family, [])) < per_family:
            picked[family].append(chart)
    chosen = [c for group in picked.values() for c in group][:most]
    if not chosen:
        return None
    cols = min(2, len(chosen))
    rows = math.ceil(len(chosen) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(8 * cols, 5.5 * rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, chart in zip(axes.flat, chosen, strict=False):
        ax.imshow(plt.imread(chart))
        ax.set_title(chart.name, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _interval(value: Any, lo: Any, hi: Any) -> str:
    if value is None or pd.isna(value):
        return "-"
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return f"{value:.2f}×"
    return f"{value:.2f}× [{lo:.2f}, {hi:.2f}]"


def summary(rows: pd.DataFrame, peak_gbps: float | None = None) -> list[str]:
    """Per family, at its summary case (`Scenario.summary`, float16 where timed): each backend's fused over unfused
    and hand-fused over torch.compile, with 95% intervals, and the field's published figures beside the rows they
    describe (`anchors`); then how many rows are not ok."""
    from suite.gpu_check import anchors

    out = ["summary   at each family's summary case (float16 where timed): speedup [95% interval]"]
    if rows.empty:
        return [*out, "  no rows"]
    data = rows[(rows["device"] == "cuda") & rows["time_ms"].notna() & (rows["phase"] == "forward")].copy()
    published = anchors.load()
    for family, group in data.groupby("scenario", sort=True):
        case = summary_rows(str(family), group)
        fused = case[(case["variant"] == "fused") & (case["baseline"] == "unfused")]
        rival = case[case["rival"].astype(str).str.endswith("compiled") & (case["variant"] == "fused")]
        vs_unfused = ", ".join(
            f"{r.backend} {_interval(r.speedup, r.speedup_lo, r.speedup_hi)}" for r in fused.itertuples()
        )
        vs_compile = ", ".join(
            f"{r.backend} {_interval(r.rival_speedup, r.rival_lo, r.rival_hi)}" for r in rival.itertuples()
        )
        out.append(f"  {family:<17} {case['params'].iloc[0]} {case['dtype'].iloc[0]}")
        out.append(f"    fused vs unfused        {vs_unfused or '-'}")
        out.append(f"    fused vs torch.compile  {vs_compile or '-'}")
        out += anchors.lines(str(family), group, published, peak_gbps)
    counts = rows["status"].value_counts().to_dict()
    out.append("rows      " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    return out


def summary_rows(family: str, group: pd.DataFrame) -> pd.DataFrame:
    """The family's timed rows at its summary case: the case it declares, else its largest (the one torch.compile
    was built for where there are several); float16 where timed."""
    from suite.core.scenario import lookup

    if (group["dtype"] == "float16").any():
        group = group[group["dtype"] == "float16"]
    wanted = lookup(family).summary
    declared = group["params"].map(lambda p: bool(wanted) and all(json.loads(p).get(k) == v for k, v in wanted.items()))
    if declared.any():
        return group[declared]
    largest = group[group["size"] == group["size"].max()]
    rivaled = largest.loc[largest["variant"] == "compiled", "params"]
    params = rivaled.iloc[0] if len(rivaled) else largest["params"].iloc[-1]
    return largest[largest["params"] == params]
