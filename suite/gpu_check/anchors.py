"""The field's published figures beside the check's own rows: each anchor of anchors.yaml, under its family in the
summary, next to the row it describes.

A memory-bound anchor (QuACK's share of peak HBM) is read against the row's bandwidth and its share of the copy
bandwidth measured on this GPU (`pct_of_ceiling`); a time (Liger's fused add + RMSNorm) against the row's time; a
ratio (hand attention against SDPA, Triton against cuBLAS) against the two rows' times at the same case. Where
the GPU's specified peak is known (from its memory clock and bus width), a row's bandwidth is given as its share. The
figures stay in the data file with their sources, so a newer publication is an edit there, not here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

ANCHORS = Path(__file__).with_name("anchors.yaml")


def load(path: Path = ANCHORS) -> list[dict[str, Any]]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def for_family(family: str, anchors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [a for a in anchors if a["family"] == family]


def matching(anchor: dict[str, Any], rows: pd.DataFrame, variant: str, backend: str | None) -> pd.DataFrame:
    """The timed forward rows of `variant` (and `backend`) at a case the anchor holds for: its params, its least
    size (the family's size axis, the row's width here)."""
    from suite.core.scenario import lookup

    found = rows[
        (rows["variant"] == variant) & rows["time_ms"].notna() & (rows["phase"] == anchor.get("phase", "forward"))
    ]
    if backend:
        found = found[found["backend"] == backend]
    scn = lookup(anchor["family"])
    params = found["params"].map(json.loads)
    keep = params.map(lambda p: all(p.get(k) == v for k, v in anchor.get("params", {}).items()))
    if "min_cols" in anchor:
        keep &= params.map(lambda p: scn.size(p) >= anchor["min_cols"])
    return found[keep]


def describe(anchor: dict[str, Any]) -> str:
    """The published figure, in words, with where and in what it was measured."""
    where = f"{anchor['gpu']}, {anchor['dtype']}"
    if anchor["kind"] == "peak_share":
        return f"{anchor['figure']:.0%} of peak HBM ({where})"
    if anchor["kind"] == "time_ms":
        unfused = f" against {anchor['unfused_ms']} ms unfused" if "unfused_ms" in anchor else ""
        return f"{anchor['figure']} ms{unfused} ({where})"
    return f"{anchor['figure']:.2f}× the time of {anchor['rival']} ({where})"


def ours(anchor: dict[str, Any], rows: pd.DataFrame, peak_gbps: float | None = None) -> str:
    """What the check measured for the anchor's row, or why there is none."""
    found = matching(anchor, rows, anchor["variant"], anchor.get("backend"))
    if found.empty:
        return "no matching row timed"
    if anchor["kind"] == "ratio":
        backend, variant = anchor["rival"].split("/")
        rival = matching({**anchor, "backend": backend}, rows, variant, backend)
        pairs = found.merge(rival, on=["params", "dtype"], suffixes=("", "_rival"))
        if pairs.empty:
            return f"no {anchor['rival']} row timed beside it"
        return ", ".join(
            f"{r.backend} {r.time_ms / r.time_ms_rival:.2f}× ({r.time_ms:.3f} against {r.time_ms_rival:.3f} ms, {r.dtype})"
            for r in pairs.itertuples()
        )
    return ", ".join(
        f"{r.backend} {r.time_ms:.3f} ms, {r.gbps:.0f} GB/s"
        + (f" ({r.pct_of_ceiling:.0f}% of this GPU's copy)" if pd.notna(r.pct_of_ceiling) else "")
        + (f" ({r.gbps / peak_gbps:.0%} of its specified peak)" if peak_gbps and pd.notna(r.gbps) else "")
        + f" {r.dtype}"
        for r in found.itertuples()
    )


def lines(
    family: str, rows: pd.DataFrame, anchors: list[dict[str, Any]] | None = None, peak_gbps: float | None = None
) -> list[str]:
    """One line per anchor of `family`: the published figure, then ours (beside the GPU's specified peak
    bandwidth, `stack.peak_gbps`, where known)."""
    found = for_family(family, load() if anchors is None else anchors)
    return [f"    anchor  {a['name']}: {describe(a)}; here: {ours(a, rows, peak_gbps)}" for a in found]
