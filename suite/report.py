"""report.md of one run: provenance, per-scenario tables and charts, a verdict in words, and every row not ok.

Everything is derived from the results table: the verdict sentences name where fusion paid (measured speedup
≥ 1.1×), was neutral, or lost (≤ 0.9×), set the measured speedup against the ledger's prediction, and use the
fraction of the measured copy ceiling each variant reached to say whether memory traffic explains the difference.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from suite.frames import BASELINE, CHART_KINDS, GROUP, LOST, PAID, chart_name, fmt_size, fmt_x, speedups, tidy
from suite.ledger import STORE_MODEL, WRITE_ALLOCATE, WRITE_ONCE

STORE_MEANING = {
    WRITE_ALLOCATE: "written bytes count twice: an ordinary store to a line not in cache first reads it "
    "(write-allocate)",
    WRITE_ONCE: "written bytes count once: stores reach device memory (HBM) without a prior read",
}
CAPTIONS = {
    "time_vs_size": "Median time against size (band: interquartile range)",
    "speedup": "Measured speedup (solid) against the ledger's prediction (dashed)",
    "bandwidth": "Achieved bandwidth under the copy ceiling measured in the same run",
    "speedup_vs_chain": "Speedup against chain length at the largest size",
}
ORDER = ["scenario", "order", "series", "size", "dtype_rank", "impl", "variant"]


def write_report(frame: pd.DataFrame, charts: list[Path], outdir: Path) -> Path:
    """Write `outdir/report.md` from a results table and the charts made from it; return its path."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    data = tidy(frame)
    pairs = speedups(data)
    parts = [_header(data)]
    for scenario, rows in data.groupby("scenario"):
        parts.append(_scenario(rows, pairs[pairs["scenario"] == scenario], charts, outdir))
    parts.append(_not_ok(data))
    path = outdir / "report.md"
    path.write_text("\n\n".join(parts) + "\n", encoding="utf-8")
    return path


def _header(data: pd.DataFrame) -> str:
    ok = data["status"] == "ok"
    native = int((ok & data["time_ms"].notna()).sum())
    emulated, compiled = (int((ok & (data["mode"] == m)).sum()) for m in ("emulated", "compile"))
    lines = [
        "# fusebench report",
        f"Every number below comes from `results.csv` beside this file: {len(data)} rows, {native} timed natively. "
        f"{emulated} emulated rows (numerics checked in the Triton interpreter / Numba CUDA simulator, not timed); "
        f"{compiled} compile-only rows (built for sm_90, not run); {int((~ok).sum())} rows not ok (listed at the "
        "end). Paid means a measured speedup ≥ "
        f"{PAID}×, lost ≤ {LOST}×; predicted is the ledger's byte ratio under each device's store model.",
        "## Provenance",
        _devices(data),
        f"- git revision: {_distinct(data['git_rev'], code=True)}",
        f"- versions: {', '.join(sorted({_versions(v) for v in data['versions'].unique() if v}))}",
        f"- reproduce: {_distinct(data['command'], code=True)}",
        f"- run: {_distinct(data['run_id'])}",
    ]
    return "\n\n".join(lines[:4]) + "\n\n" + "\n".join(lines[4:])


def _devices(data: pd.DataFrame) -> str:
    rows = []
    for device, sub in data.groupby("device"):
        timed = sub[sub["time_ms"].notna()]
        names = _distinct((timed if len(timed) else sub)["device_name"])
        model = next((m for m in sub["store_model"] if m), STORE_MODEL.get(device, ""))
        ceiling = sub["ceiling_gbps"].dropna()
        measured = _span(ceiling, "{:,.1f}") + " GB/s" if len(ceiling) else "not measured (nothing timed)"
        rows.append([device, names, model, STORE_MEANING.get(model, ""), measured])
    head = ["device", "device name", "store model", "what the ledger counts", "measured copy ceiling"]
    return _table(head, rows)


def _scenario(rows: pd.DataFrame, pairs: pd.DataFrame, charts: list[Path], outdir: Path) -> str:
    name = rows["scenario"].iloc[0]
    axis = rows["size_axis"].iloc[0]
    parts = [f"## {name}", "### Verdict", _verdicts(pairs)]
    parts += ["### Speedup: measured vs predicted", _speedup_table(pairs, axis), "### Charts"]
    named = {p.name: p for p in charts}
    for kind in CHART_KINDS:
        if chart_name(kind, name) in named:
            link = Path(os.path.relpath(named[chart_name(kind, name)], outdir)).as_posix()
            parts.append(f"![{CAPTIONS[kind]}]({link})")
    parts += ["### Timings", _details(f"All {len(rows)} rows", _summary_table(rows, axis))]
    parts += ["### Traffic ledger", _ledger_table(rows, axis)]
    return "\n\n".join(parts)


def _verdicts(pairs: pd.DataFrame) -> str:
    if pairs.empty:
        return "Nothing was timed natively, so there is no measured speedup; see the ledger for the prediction."
    out = []
    for (impl, _, dtype, variant), group in pairs.groupby(GROUP):
        lead = group.sort_values(["predicted", "order"]).iloc[-1]["series"]
        line = group[group["series"] == lead].sort_values("size")
        label = f"{impl}, {dtype}" + (f", {variant}" if variant != "fused" else "")
        text = " ".join([_trend(line), _why(line), _others(group, lead)]).strip()
        out.append(f"- **{label}** ({lead}): {text}")
    return "\n".join(out)


def _trend(line: pd.DataFrame) -> str:
    """Where the lead case paid, from which size on, and how the gain changed with size."""
    sp, sizes = line["speedup"].to_numpy(), line["size"].to_numpy()
    axis, variant, pred = line["size_axis"].iloc[0], line["variant"].iloc[0], _pred(line["predicted"])
    start = next((i for i in range(len(sp)) if (sp[i:] >= PAID).all()), None)
    if start is None:
        if (sp <= LOST).all():
            return f"{variant} lost to {BASELINE} at every size: {_range(sp)}, against {pred}."
        if (sp < PAID).all() and (sp > LOST).all():
            return f"{variant} and {BASELINE} were within 10% at every size ({_range(sp)}), against {pred}."
        return f"no consistent result: {_range(sp)} across sizes, against {pred}."
    where = f"from {axis} = {fmt_size(sizes[start])} up" if start else f"at every size measured"
    text = f"{variant} beat {BASELINE} {where}: {_range(sp[start:])}, against {pred}"
    if start:
        text += f"; below that it {_word(sp[:start])} ({_range(sp[:start])})"
    return text + _shape(line.iloc[start:]) + "."


def _shape(line: pd.DataFrame) -> str:
    """Where the gain fell well below its peak within the sizes that paid, and the likely reason."""
    sp, axis = line["speedup"].to_numpy(), line["size_axis"].iloc[0]
    peak = int(np.argmax(sp))
    low = next((i for i in range(peak + 1) if sp[i] >= 0.6 * sp[peak]), 0)
    if low:
        small = line.iloc[:low]
        cached = small["pct_of_ceiling_base"].max()
        why = (f"the {BASELINE} kernels ran at up to {cached:.0f}% of the copy ceiling there, so their intermediates "
               "were served from cache" if cached > 100 else "fixed per-launch costs, not memory traffic, dominate")  # fmt: skip
        return f". The gain shrank to {_range(sp[:low])} for {axis} ≤ {fmt_size(small['size'].iloc[-1])}: {why}"
    if sp[-1] < 0.6 * sp[peak]:
        return f". The gain peaked at {fmt_x(sp[peak])} at {axis} = {fmt_size(line['size'].iloc[peak])}"
    return ""


def _why(line: pd.DataFrame) -> str:
    """At the largest size: measured against predicted, and how close each variant came to the copy ceiling."""
    last = line.iloc[-1]
    if last["predicted"] < 1.05:
        return "The ledger predicts no gain here: fusion removes no intermediate."
    share = last["speedup"] / last["predicted"]
    at = f"At {last['size_axis']} = {fmt_size(last['size'])} the measured speedup was {share:.0%} of the predicted"
    fused, base = last["pct_of_ceiling"], last["pct_of_ceiling_base"]
    if np.isnan(fused) or np.isnan(base):
        return at + "."
    at += f"; {last['variant']} ran at {fused:.0f}% and {BASELINE} at {base:.0f}% of the copy ceiling"
    if share >= 0.75:
        return at + ", so the bytes removed explain the gain."
    if fused < 0.6 * base:
        return at + f": {last['variant']} is not bound by memory traffic, so removing traffic helps less than modeled."
    return at + "."


def _others(group: pd.DataFrame, lead: str) -> str:
    top = group[(group["size"] == group["size"].max()) & (group["series"] != lead)]
    if top.empty:
        return ""
    top = top.sort_values("order", ascending=False)
    each = [f"{fmt_x(r.speedup)} for {r.series} (predicted {fmt_x(r.predicted)})" for r in top.itertuples()]
    return f"Other cases at {top['size_axis'].iloc[0]} = {fmt_size(top['size'].iloc[0])}: {', '.join(each)}."


def _word(values: np.ndarray) -> str:
    kinds = {"paid" if v >= PAID else "lost" if v <= LOST else "neutral" for v in values}
    return {"lost": "lost", "neutral": "was neutral"}.get(kinds.pop(), "was mixed") if len(kinds) == 1 else "was mixed"


def _pred(values: pd.Series) -> str:
    return f"a predicted {_range(values.to_numpy())}"


def _range(values: np.ndarray) -> str:
    low, high = fmt_x(float(np.min(values))), fmt_x(float(np.max(values)))
    return low if low == high else f"{low[:-1]}–{high}"


def _speedup_table(pairs: pd.DataFrame, axis: str) -> str:
    head = ["case", axis, "dtype", "backend/device", "variant", f"{BASELINE} ms", "variant ms", "measured",
            "predicted", "verdict"]  # fmt: skip
    rows = [
        [r.series, fmt_size(r.size), r.dtype, r.impl, r.variant, _num(r.time_ms_base), _num(r.time_ms),
         fmt_x(r.speedup), fmt_x(r.predicted), r.verdict]  # fmt: skip
        for r in pairs.itertuples()
    ]
    return _table(head, rows) if rows else "No pair of variants was timed on the same case."


def _summary_table(rows: pd.DataFrame, axis: str) -> str:
    head = ["case", axis, "dtype", "backend/device", "variant", "mode", "time ms", "GB/s", "% of ceiling",
            "max rel err", "status"]  # fmt: skip
    body = [
        [r.series, fmt_size(r.size) if r.size == r.size else "", r.dtype, r.impl, r.variant, r.mode,
         _num(r.time_ms), _num(r.gbps), _num(r.pct_of_ceiling, "{:.0f}"), _num(r.max_rel_err, "{:.1e}"), r.status]
        for r in rows.sort_values(ORDER).itertuples()
    ]  # fmt: skip
    return _table(head, body)


def _ledger_table(rows: pd.DataFrame, axis: str) -> str:
    """Per case, dtype and store model: what each variant moves and launches, and what fusion removed."""
    keys = ["order", "series", "size", "dtype", "store_model"]
    led = rows.dropna(subset=["bytes_modeled"]).groupby([*keys, "variant"], as_index=False).first()
    base = led[led["variant"] == BASELINE][[*keys, "bytes_modeled", "launches"]]
    pairs = led[led["variant"] != BASELINE].merge(base, on=keys, suffixes=("", "_base"))
    head = ["case", axis, "dtype", "store model", "variant", "launches", "bytes moved", "intermediates removed",
            "saved by fusion (Σ 2·N·s)", "predicted"]  # fmt: skip
    body = [
        [r.series, fmt_size(r.size), r.dtype, r.store_model, r.variant, f"{_int(r.launches_base)} → {_int(r.launches)}",
         f"{_bytes(r.bytes_modeled_base)} → {_bytes(r.bytes_modeled)}", _int(r.intermediates_removed),
         _bytes(r.bytes_saved), fmt_x(r.bytes_modeled_base / r.bytes_modeled)]
        for r in pairs.sort_values(keys).itertuples()
    ]  # fmt: skip
    note = ("Bytes moved count the store model of the device; the saving counts one write and one read per removed "
            "intermediate (ΔQ = 2·N·s); under write-allocate each removed intermediate also avoids an allocate read.")  # fmt: skip
    return (note + "\n\n" + _details(f"{len(body)} cases", _table(head, body))) if body else "No ledger rows."


def _not_ok(data: pd.DataFrame) -> str:
    bad = data[data["status"] != "ok"]
    if bad.empty:
        return "## Rows that are not ok\n\nNone: every row is ok."
    body = []
    for (status, reason), g in bad.groupby(["status", "reason"]):
        first = g.iloc[0]
        example = f"{first['scenario']} {first['series']}, {first['size_axis']} = {fmt_size(first['size'])}"
        body.append([status, reason, str(len(g)), ", ".join(sorted(g["impl"].unique())),
                     ", ".join(sorted(g["variant"].unique())), ", ".join(sorted(g["dtype"].unique())), example])  # fmt: skip
    head = ["status", "reason", "rows", "backend/device", "variants", "dtypes", "example"]
    return "## Rows that are not ok\n\n" + _table(head, body)


def _table(head: list[str], rows: list[list[str]]) -> str:
    """A GitHub markdown table; pipes inside cells are escaped."""

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

    return "\n".join([line(head), line(["---"] * len(head)), *(line(r) for r in rows)])


def _details(summary: str, body: str) -> str:
    return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>"


def _num(value: float, fmt: str = "{:.4g}") -> str:
    return "" if value is None or value != value else fmt.format(value)


def _int(value: float) -> str:
    return "" if value != value else f"{int(value)}"


def _bytes(value: float) -> str:
    if value != value:
        return ""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{int(value)} B"


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
