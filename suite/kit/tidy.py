"""Views of a results table shared by the report and the families' own charts: typed columns, labels, pairs.

They live in the core because a scenario family (which imports only `suite.core`) draws its charts and writes
its report sections from the same views as the generic ones. How a case is labelled and ordered is the
scenario's to say (`Scenario.series`, `title`, `order`); a table from a scenario not installed here gets the
defaults.

`speedups` is the one place where a variant's row is paired with its baseline's (same scenario, params, dtype,
backend and device): measured speedup = baseline time / variant time; predicted = baseline bytes / variant
bytes, the ledger's ratio under the device's store model. A compiled variant's bytes are the ledger's plus the
traffic of the buffers its generated code kept between kernels (`bytes_kept`): the ledger credits it with the
fused kernel's traffic, which it moves only where it kept nothing.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pandas as pd

from suite.core.ledger import STORE_MODEL, WRITE_ALLOCATE
from suite.core.row import COLUMNS
from suite.core.scenario import discover, lookup

NUMERIC = [
    "time_ms",
    "bytes_modeled",
    "flops_modeled",
    "gbps",
    "max_rel_err",
    "size",
    "time_min_ms",
    "time_q1_ms",
    "time_q3_ms",
    "reps",
    "compile_ms",
    "bytes_read",
    "bytes_written",
    "launches",
    "intermediates_removed",
    "bytes_saved",
    "ceiling_gbps",
    "ceiling_streaming_gbps",
    "pct_of_ceiling",
    "tolerance",
    "peer_err",
    "seed",
    "speedup",
    "speedup_lo",
    "speedup_hi",
    "fusion_efficiency",
    "regs",
    "spill_bytes",
    "smem_bytes",
    "occupancy",
    "cache_bytes",
    "rival_speedup",
    "rival_lo",
    "rival_hi",
    "peak_bytes_modeled",
    "peak_bytes",
    "saved_bytes",
    "saved_bytes_modeled",
    "memory_ratio",
    "memory_saved_mib",
    "rival_memory_ratio",
]
PAID, LOST = 1.1, 0.9
"""Without a paired interval (rows from before it existed), a speedup ≥ PAID pays, ≤ LOST loses."""
BASELINE = "unfused"
CASE = ["scenario", "phase", "params", "dtype", "backend", "device"]
"""Columns shared by the variants of one (case, implementation) pair."""
GROUP = ["impl", "dtype_rank", "dtype", "variant"]
"""One line of speedups against size per case: what the report's verdict speaks about."""


def chart_name(kind: str, scenario: str) -> str:
    return f"{kind}_{scenario}.png"


def tidy(frame: pd.DataFrame) -> pd.DataFrame:
    """A typed copy with derived columns: impl (backend/device), size_axis, series (the case minus its size),
    title (a chart facet's; both led by the model's name on a model's rows, so a sweep over models draws each
    in its own facets), order and series_rank (for sorting), dtype_rank; pct_of_ceiling filled in where a
    ceiling was measured. Labels and order come from each row's scenario (see `Scenario.series`)."""
    out = frame.copy()
    for col in [*COLUMNS, *NUMERIC]:  # tables written by older versions lack the newer columns
        if col not in out:
            out[col] = None
    for col in NUMERIC:
        out[col] = pd.to_numeric(out[col], errors="coerce")
    text = [c for c in COLUMNS if c not in NUMERIC and c != "cold_cache"]
    out[text] = out[text].astype(object).fillna("").astype(str)
    out["impl"] = out["backend"] + "/" + out["device"]
    parsed = out["params"].map(json_dict)
    axes = _size_axes(out["scenario"], parsed, out["size"])
    out["size_axis"] = out["scenario"].map(axes).fillna("size")
    cases = list(zip(out["scenario"].map(lookup), parsed, out["size_axis"], strict=True))
    out["phase"] = out["phase"].replace("", "forward")  # tables written before phases: forward passes
    staged = [f"{p}: " if p != "forward" else "" for p in out["phase"]]  # a backward's rows: their own lines, facets
    named = [s + (f"{m}: " if m else "") for s, m in zip(staged, out["model"], strict=True)]
    out["series"] = [m + scn.series(p, axis) for m, (scn, p, axis) in zip(named, cases, strict=True)]
    out["title"] = [m + scn.title(p, axis) for m, (scn, p, axis) in zip(named, cases, strict=True)]
    out["order"] = [scn.order(p) for scn, p, _ in cases]
    out["dtype_rank"] = out["dtype"].map(dtype_rank)
    lines = list(zip(out["order"], out["series"], strict=True))
    rank = {line: i for i, line in enumerate(sorted(set(lines), key=lambda c: (c[0], _natural(c[1]))))}
    out["series_rank"] = [rank[line] for line in lines]
    out["bytes_kept"] = [
        kept_bytes(json_dict(e), d, m or STORE_MODEL.get(dev, ""))
        for e, d, m, dev in zip(out["extra"], out["dtype"], out["store_model"], out["device"], strict=True)
    ]
    fill = out["pct_of_ceiling"].isna() & (out["ceiling_gbps"] > 0)
    out.loc[fill, "pct_of_ceiling"] = 100 * out.loc[fill, "gbps"] / out.loc[fill, "ceiling_gbps"]
    return out


ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}


def kept_bytes(extra: dict[str, Any], dtype: str, store_model: str) -> float:
    """The traffic of the buffers a compiler's generated code allocated between its kernels (`extra.compiler`'s
    `buffer_elements`), each written once and read once (and, under write-allocate, read before it is written),
    at the row's element size (a compiler that keeps a wider type moves more); 0 for a row with none. A row
    written before `buffer_elements` was recorded counts its largest kept buffer only: a lower bound."""
    info = extra.get("compiler")
    if not isinstance(info, dict):
        return 0.0
    elements = info.get("buffer_elements")
    if elements is None and isinstance(info.get("largest_intermediate"), list):
        elements = math.prod(int(d) for d in info["largest_intermediate"]) if info["largest_intermediate"] else 0
    if not isinstance(elements, (int, float)) or elements <= 0:
        return 0.0
    passes = 3 if store_model == WRITE_ALLOCATE else 2
    return float(elements) * ITEMSIZE.get(dtype, 4) * passes


def json_dict(text: Any) -> dict[str, Any]:
    """A JSON object from a results cell (params, extra), or {} for an empty cell or anything else."""
    try:
        value = json.loads(text) if text else {}
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _size_axes(scenarios: pd.Series, parsed: pd.Series, sizes: pd.Series) -> dict[str, str]:
    """Each scenario's declared size axis; for one not installed here, the parameter equal to `size` in every
    row of that scenario (checked over all rows: a single row can match by coincidence, rows = cols)."""
    declared = {name: s.size_axis for name, s in discover().items()}
    out = {}
    for name in scenarios.unique():
        mine = scenarios == name
        params, size = parsed[mine], sizes[mine]
        keys = set.intersection(*(set(p) for p in params)) if len(params) else set()
        fits = [k for k in sorted(keys) if all(p[k] == n for p, n in zip(params, size, strict=True))]
        out[name] = declared[name] if declared.get(name) in keys else next(iter(fits), "size")
    return out


def _natural(label: str) -> list[tuple[int, str | int]]:
    """Sort key reading digit runs as numbers: cols=256 before cols=1024."""
    return [(1, int(part)) if part.isdigit() else (0, part) for part in re.split(r"(\d+)", label)]


def dtype_rank(dtype: str) -> int:
    """Sort key putting the widest type first: float64, float32, then the 16-bit types."""
    return -int("".join(ch for ch in dtype if ch.isdigit()) or 0)


def timed(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows timed for real: status ok, run natively (not emulated, not compile-only), with a median time."""
    keep = (frame["status"] == "ok") & frame["mode"].isin(["native", ""]) & (frame["time_ms"] > 0)
    return frame[keep]


def speedups(frame: pd.DataFrame, baseline: str = BASELINE) -> pd.DataFrame:
    """One row per (case, implementation, compared variant) with measured and predicted speedup.

    A row names its own baseline (fused against unfused, tiled against unblocked); rows that do not are
    compared with `baseline`. Measured speedup, its interval and the verdict are the runner's paired ones
    (interleaved rounds, bootstrap interval: see suite.core.fusion) where present; otherwise the ratio of medians,
    an interquartile span and the PAID/LOST thresholds. Repeated rows of one key are reduced to their median.
    """
    rows = timed(frame).copy()
    rows["baseline"] = rows["baseline"].where(rows["baseline"] != "", baseline)
    labels = ["impl", "size_axis", "series", "title", "order", "series_rank", "dtype_rank", "baseline"]
    cols = ["size", "time_ms", "time_q1_ms", "time_q3_ms", "bytes_modeled", "bytes_kept", "flops_modeled"]
    cols += ["pct_of_ceiling", "bytes_saved"]
    cols += [*PAIRED, *RESOURCES]
    med = rows.groupby([*CASE, *labels, "variant"], as_index=False, dropna=False)[cols].median()
    verdicts = rows.groupby([*CASE, "variant"])["verdict"].agg(lambda v: v.mode().iloc[0] if len(v) else "")
    base = med[[*CASE, "variant", *cols[1:]]].rename(columns={"variant": "baseline"})
    pairs = med[med["variant"] != med["baseline"]].merge(base, on=[*CASE, "baseline"], suffixes=("", "_base"))
    pairs = pairs.merge(verdicts.rename("verdict").reset_index(), on=[*CASE, "variant"], how="left")
    ratio = pairs["time_ms_base"] / pairs["time_ms"]
    paired = pairs["speedup"].notna()
    pairs["speedup"] = pairs["speedup"].where(paired, ratio)
    pairs["speedup_lo"] = pairs["speedup_lo"].where(paired, pairs["time_q1_ms_base"] / pairs["time_q3_ms"])
    pairs["speedup_hi"] = pairs["speedup_hi"].where(paired, pairs["time_q3_ms_base"] / pairs["time_q1_ms"])
    pairs["speedup_lo"] = pairs["speedup_lo"].fillna(pairs["speedup"])
    pairs["speedup_hi"] = pairs["speedup_hi"].fillna(pairs["speedup"])
    moved = pairs["bytes_modeled"] + pairs["bytes_kept"].fillna(0)
    pairs["predicted"] = (pairs["bytes_modeled_base"] + pairs["bytes_kept_base"].fillna(0)) / moved
    fallback = pairs["speedup"].map(verdict)
    pairs["verdict"] = pairs["verdict"].where(pairs["verdict"].isin(VERDICTS), fallback)
    return pairs.sort_values(["scenario", *GROUP, "series_rank", "size"], ignore_index=True)


def crossover(line: pd.DataFrame) -> float | None:
    """The smallest size from which every larger measured size pays (one case, implementation, dtype)."""
    line = line.sort_values("size")
    said, sizes = line["verdict"].to_numpy(), line["size"].to_numpy()
    start = next((i for i in range(len(said)) if (said[i:] == "pays").all()), None)
    return None if start is None else float(sizes[start])


def crossovers(pairs: pd.DataFrame) -> pd.DataFrame:
    """One row per (scenario, series, dtype, implementation, variant) swept over at least two sizes."""
    keys = ["scenario", "series", "dtype", "impl", "variant", "baseline", "size_axis"]
    out = []
    for key, line in pairs.groupby(keys):
        if line["size"].nunique() > 1:
            out.append(
                {
                    **dict(zip(keys, key, strict=True)),
                    "pays_from": crossover(line),
                    "sizes": len(line),
                    "largest": line["size"].max(),
                }
            )
    return pd.DataFrame(out, columns=[*keys, "pays_from", "sizes", "largest"])


PAIRED = ["speedup", "speedup_lo", "speedup_hi", "fusion_efficiency"]
RESOURCES = ["spill_bytes", "occupancy", "regs", "launches", "bytes_read", "bytes_written", "cache_bytes"]
VERDICTS = ("pays", "neutral", "loses")


def verdict(speedup: float) -> str:
    if speedup >= PAID:
        return "pays"
    return "loses" if speedup <= LOST else "neutral"


def fmt_size(n: float) -> str:
    """Sizes as people read them: powers of two from 2¹⁰ as 2²⁰, others with thousands separators; `?` for a
    row that never learnt its size (a job that died before its case started)."""
    if n is None or (isinstance(n, float) and not math.isfinite(n)):
        return "?"
    n = int(n)
    if n >= 1024 and n & (n - 1) == 0:
        return "2" + str(n.bit_length() - 1).translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹"))
    return f"{n:,}"


def fmt_x(value: float) -> str:
    """A ratio such as a speedup: 1.04×, 3.9×, 16×."""
    if not math.isfinite(value):
        return "–"
    return f"{value:.2f}×" if value < 2 else f"{value:.1f}×" if value < 10 else f"{value:.0f}×"
