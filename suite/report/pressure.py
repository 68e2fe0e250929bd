"""The report's resource-pressure section: what each CUDA kernel costs the SM, beside what fusion bought.

Fusing grows a kernel's live working set. When that set outgrows the registers, ptxas spills it to local
memory (traffic the ledger does not count), and when registers or shared memory per block grow, fewer warps
fit on an SM. results.csv keeps the variant's worst kernel; this section lists every kernel
(`extra["kernels"]`, from the sm_90 build of the case's own params) and calls out the spilling ones next to
the verdict of their pair, so a fused kernel that loses shows why. It reads rows of every status: a CUDA
kernel compiled but not run (no GPU) still has resources worth showing.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from suite.core.scenario import lookup
from suite.kit.markdown import details, table
from suite.kit.tidy import json_dict

HEAD = [
    "case",
    "dtype",
    "backend",
    "variant",
    "kernel",
    "launches",
    "threads",
    "regs",
    "spill B/thread",
    "smem B",
    "occupancy",
    "limited by",
]


def section(rows: pd.DataFrame, pairs: pd.DataFrame) -> str:
    """Markdown: a sentence per spilling variant (or one saying none spills), then every kernel, folded."""
    kernels = _kernels(rows)
    if kernels.empty:
        return ""
    lines = ["### Resource pressure (sm_90 builds)"]
    spilling = kernels[kernels["spill"] > 0]
    if spilling.empty and kernels["occupancy"].isna().all():
        lines.append("No kernel spills.")
    elif spilling.empty and (kernels["occupancy"] >= 1.0).all():
        lines.append("No kernel spills, and every kernel can reach full theoretical occupancy.")
    elif spilling.empty:
        low = kernels.loc[kernels["occupancy"].idxmin()]
        lines.append(
            f"No kernel spills. Lowest theoretical occupancy: {_pct(low.occupancy)} (`{low.kernel}`, "
            f"{low.variant}, {low.case} {low['dtype']}: {_limited(low)})."
        )
    else:
        for key, group in spilling.groupby(["case", "dtype", "impl", "variant"], sort=False):
            lines.append("- " + _spill_sentence(key, group, kernels, pairs))
    same = ["dtype", "impl", "variant", "kernel", "threads", "regs", "spill", "smem", "occupancy", "limiter"]
    distinct = kernels.fillna({"limiter": ""}).groupby(same, sort=False, dropna=False)
    body = [
        [
            _cases(group["case"]),
            dtype,
            impl,
            variant,
            f"`{kernel}`",
            _int(group["launches"].max()),
            _int(threads),
            _int(regs),
            _int(spill),
            _int(smem),
            _pct(occ),
            limiter,
        ]
        for (dtype, impl, variant, kernel, threads, regs, spill, smem, occ, limiter), group in distinct
    ]
    lines.append(details(f"Every kernel ({len(body)} distinct builds)", table(HEAD, body)))
    return "\n\n".join(lines)


def _cases(cases: pd.Series) -> str:
    """The cases a build serves: one kernel is often the same at every size of a sweep."""
    seen = list(dict.fromkeys(cases))
    return "; ".join(seen) if len(seen) <= 2 else f"{seen[0]}; … ({len(seen)} cases)"


def _kernels(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (results row, kernel) with the kernel's resources; CUDA rows that recorded kernels only."""
    out: list[dict[str, Any]] = []
    for row in rows[rows["device"] == "cuda"].itertuples():
        for k in json_dict(row.extra).get("kernels", []):
            if "error" in k:
                continue
            out.append(
                {
                    "case": lookup(row.scenario).series(json_dict(row.params), ""),
                    "dtype": row.dtype,
                    "impl": row.impl,
                    "variant": row.variant,
                    "params": row.params,
                    "status": row.status,
                    "kernel": k.get("name", "?"),
                    "launches": k.get("launches"),
                    "threads": k.get("threads"),
                    "regs": k.get("regs"),
                    "spill": (k.get("spill_store_bytes") or 0) + (k.get("spill_load_bytes") or 0),
                    "smem": k.get("smem_bytes"),
                    "occupancy": k.get("occupancy"),
                    "limiter": k.get("limiter", ""),
                }
            )
    frame = pd.DataFrame(out)
    if not frame.empty:
        frame["occupancy"] = pd.to_numeric(frame["occupancy"], errors="coerce")
    return frame


def _spill_sentence(key: tuple, group: pd.DataFrame, kernels: pd.DataFrame, pairs: pd.DataFrame) -> str:
    """'cupy/cuda fused, cols=16384 float32: `k` spills N B per thread (R registers, occupancy O); the
    unfused kernels: at most R' registers, no spills. Verdict: ...'"""
    case, dtype, impl, variant = key
    worst = group.loc[group["spill"].idxmax()]
    text = (
        f"**{impl} {variant}, {case} {dtype}**: `{worst.kernel}` spills {worst.spill:,.0f} bytes per thread "
        f"({worst.regs:.0f} registers, occupancy {_pct(worst.occupancy)})"
    )
    same = (kernels["case"] == case) & (kernels["dtype"] == dtype) & (kernels["impl"] == impl)
    for other, theirs in kernels[same & (kernels["variant"] != variant)].groupby("variant", sort=False):
        spill = theirs["spill"].max()
        text += (
            f"; the {other} kernels: at most {theirs['regs'].max():.0f} registers, "
            + (f"{spill:,.0f} bytes spilled" if spill else "no spills")
            + _lowest(theirs["occupancy"])
        )
    return text + ". " + _verdict(pairs, worst)


def _verdict(pairs: pd.DataFrame, kernel: pd.Series) -> str:
    """The measured verdict of the spilling variant against its baseline, or why there is none."""
    if not pairs.empty:
        mine = pairs[
            (pairs["params"] == kernel["params"])
            & (pairs["dtype"] == kernel["dtype"])
            & (pairs["impl"] == kernel["impl"])
            & (pairs["variant"] == kernel["variant"])
        ]
        if len(mine):
            p = mine.iloc[0]
            return f"Measured: {p['verdict']} ({p['speedup']:.2f}× against {p.get('baseline', 'unfused')})."
    if kernel["status"] != "ok":
        return f"Not timed here ({kernel['status']}): the spill is what the sm_90 build reports; a GPU run times it."
    return "Not timed natively here (numerics checked in emulation); a GPU run times it."


def _lowest(occupancy: pd.Series) -> str:
    low = occupancy.min()
    if low != low:
        return ""
    return ", full theoretical occupancy" if low >= 1.0 else f", occupancy ≥ {_pct(low)}"


def _limited(k: pd.Series) -> str:
    return f"limited by {k.limiter}" if k.limiter else "limiter unknown"


def _pct(fraction: float) -> str:
    """Theoretical occupancy as a percentage: 0.125 -> '12.5%' (warps come in sixty-fourths of an SM)."""
    return "" if fraction != fraction else f"{100 * fraction:.3g}%"


def _int(value: Any) -> str:
    return "" if value is None or value != value else f"{int(value):,}"
