"""The report's split of fusion's gain into launch overhead and memory traffic, from CUDA-graph timings.

Fusion saves two things at once: kernel launches (each one costs the host an enqueue, and a short kernel can
wait on it) and the traffic of the intermediates it keeps on chip. With `timing.graphs=true` a CUDA row carries
`time_graph_ms` (the variant's launcher, all its kernels, replayed from a CUDA graph behind a spin: its kernels
alone) and `extra.time_paced_ms` (the launcher timed with the GPU waiting on the host: each kernel's enqueue
inside the window wherever the GPU waited on it; suite.run.graph_timing). `time_ms` cannot stand in for the
paced time: a spin ahead of its start event keeps the enqueue out, so its difference from the graph time is
near zero by design. For a fused/unfused pair of one case the paced gain splits exactly:

    gain = unfused paced ms - fused paced ms
         = launch part + with-graphs part
    launch part      = (unfused paced ms - unfused time_graph_ms) - (fused paced ms - fused time_graph_ms)
    with-graphs part = unfused time_graph_ms - fused time_graph_ms

Rows from runs that did not time the paced window fall back to `time_ms`, and the table says which (`host`).

The with-graphs part is set against what the ledger predicts it to be: the bytes fusion removes (unfused
bytes_modeled - fused bytes_modeled, both under the device's store model) at the copy ceiling measured in the
same run (`ceiling_gbps`). That column and not the row's `gbps`: `gbps` divides the bytes by the variant's own
time (a row from an older run may hold launch overhead in it), and a bandwidth worked out from the unfused graph
time would predict a share of the number it is compared with. The copy ceiling
is measured apart from both variants, so the prediction is the least time the removed bytes can take in device
memory: well above it (ratio > 1), the unfused kernels moved their bytes below the ceiling or lost more than
traffic; well below it, a cache served the intermediates. It is the same rate `fusion_efficiency` uses.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from suite.kit.markdown import details, table
from suite.kit.tidy import CASE, fmt_size, json_dict, speedups, timed

PAIRS = (("fused", "unfused"), ("compiled", "eager"))
"""(candidate, baseline): the variant that fuses against the one that runs the same decomposition unfused."""
FOLD = 12
"""Tables longer than this fold into <details>."""
HEAD = [
    "case",
    "size",
    "dtype",
    "backend/device",
    "comparison",
    "host",
    "baseline ms",
    "baseline graph ms",
    "variant ms",
    "variant graph ms",
    "gain ms",
    "launch overhead ms",
    "with graphs ms",
    "bytes predict ms",
    "with graphs / predicted",
]


def split(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per fusion pair of `rows` (tidy rows of one scenario) where both variants have a graph time,
    with the pair's columns of `suite.kit.tidy.speedups` and time_graph_ms(_base), ceiling_gbps, gain_ms,
    launch_ms, graph_ms, saved_bytes, predicted_ms and realised (graph_ms / predicted_ms)."""
    pairs = speedups(rows)
    pairs = pairs[[(v, b) in PAIRS for v, b in zip(pairs["variant"], pairs["baseline"], strict=True)]]
    graph = _graph_medians(rows)
    pairs = pairs.merge(graph, on=[*CASE, "variant"], how="inner")
    base = graph.rename(
        columns={
            "variant": "baseline",
            "time_graph_ms": "time_graph_ms_base",
            "ceiling_gbps": "ceiling_gbps_base",
            "paced_ms": "paced_ms_base",
        }
    )
    out = pairs.merge(base, on=[*CASE, "baseline"], how="inner")
    out = out[out["time_graph_ms"].notna() & out["time_graph_ms_base"].notna()].copy()
    paced = out["paced_ms"].notna() & out["paced_ms_base"].notna()
    out["host"] = np.where(paced, "paced", "time_ms")
    out["host_ms"] = out["paced_ms"].where(paced, out["time_ms"])
    out["host_ms_base"] = out["paced_ms_base"].where(paced, out["time_ms_base"])
    out["gain_ms"] = out["host_ms_base"] - out["host_ms"]
    out["launch_ms"] = (out["host_ms_base"] - out["time_graph_ms_base"]) - (out["host_ms"] - out["time_graph_ms"])
    out["graph_ms"] = out["time_graph_ms_base"] - out["time_graph_ms"]
    out["saved_bytes"] = out["bytes_modeled_base"] - out["bytes_modeled"]
    ceiling = out["ceiling_gbps"].fillna(out["ceiling_gbps_base"]).where(lambda c: c > 0)
    out["predicted_ms"] = out["saved_bytes"] / (ceiling * 1e9) * 1e3
    out["realised"] = out["graph_ms"] / out["predicted_ms"].where(out["predicted_ms"] > 0)
    return out.reset_index(drop=True)


def _graph_medians(rows: pd.DataFrame) -> pd.DataFrame:
    """Median graph time, paced time (extra.time_paced_ms) and copy ceiling per (case, implementation, variant)
    over the timed rows with a graph time; tidy keeps time_graph_ms as text, so it is made numeric here."""
    data = timed(rows).copy()
    data["time_graph_ms"] = _numeric(data, "time_graph_ms").where(lambda t: t > 0)
    said = [json_dict(e).get("time_paced_ms") for e in data["extra"]] if "extra" in data else []
    data["paced_ms"] = pd.to_numeric(pd.Series(said, index=data.index, dtype=object), errors="coerce")
    data = data[data["time_graph_ms"].notna()]
    return data.groupby([*CASE, "variant"], as_index=False)[["time_graph_ms", "paced_ms", "ceiling_gbps"]].median()


def _numeric(rows: pd.DataFrame, col: str) -> pd.Series:
    if col not in rows:
        return pd.Series(np.nan, index=rows.index)
    return pd.to_numeric(rows[col], errors="coerce")


def section(rows: pd.DataFrame) -> str | None:
    """Markdown for one scenario's tidy rows; None when no row was timed from a CUDA graph."""
    if not (timed(rows).pipe(_numeric, "time_graph_ms") > 0).any():
        return None
    found = split(rows)
    parts = [
        "### Fusion's gain: launch overhead and traffic (CUDA graphs)",
        "Each fusion pair timed both ways: launch by launch with the GPU waiting on the host (ms, host `paced`; "
        "`time_ms` where a run did not time that window, whose launch part is then near zero by design) and "
        "replayed from a CUDA graph (graph ms, launch overhead mostly gone). The gain (baseline ms − variant ms) "
        "splits into the launch "
        "overhead fusion saved (the difference of the two variants' ms − graph ms) and the part that remains "
        "with graphs (baseline graph ms − variant graph ms), which the ledger predicts as the removed bytes at "
        "the copy ceiling measured in the same run.",
    ]
    if found.empty:
        parts.append("No fusion pair has a graph time on both sides, so there is nothing to split.")
    else:
        parts.append(dominant(found))
        body = [_cells(r) for r in found.sort_values(["series_rank", "size", "dtype_rank", "impl"]).itertuples()]
        text = table(HEAD, body)
        parts.append(details(f"{len(body)} pairs", text) if len(body) > FOLD else text)
    parts += [text for text in [_not_captured(rows)] if text]
    return "\n\n".join(parts)


def dominant(found: pd.DataFrame) -> str:
    """One sentence for the scenario: which part of the gain dominates, in how many of the pairs that gained,
    its median share of the gain, and how the with-graphs part compares with the ledger's prediction."""
    name, gained = found["scenario"].iloc[0], found[found["gain_ms"] > 0]
    lost = len(found) - len(gained)
    if gained.empty:
        return (
            f"In {name}, fusion gained nothing in any of the {len(found)} pairs timed from graphs: no share dominates."
        )
    launch = int((gained["launch_ms"] > gained["graph_ms"]).sum())
    graphs = len(gained) - launch
    realised = gained["realised"].dropna()
    against = f"a median {realised.median():.2g}× what the removed bytes take at the copy ceiling"
    against = against if len(realised) else "not predicted (no copy ceiling or no bytes removed)"
    tail = f"; fusion gained nothing in {lost} of {len(found)} pairs" if lost else ""
    of = f"{len(gained)} pairs that gained"
    if launch > graphs:
        return (
            f"In {name}, launch overhead dominates fusion's gain: it is the larger part in {launch} of {of} (a "
            f"median {_median_share(gained, 'launch_ms')} of the gain); the part that remains with graphs is "
            f"{against}{tail}."
        )
    if graphs > launch:
        return (
            f"In {name}, traffic dominates fusion's gain: the part that remains with graphs is the larger in "
            f"{graphs} of {of} (a median {_median_share(gained, 'graph_ms')} of the gain) and {against}{tail}."
        )
    return (
        f"In {name}, neither part dominates: launch overhead is the larger in {launch} of {of} and the part "
        f"that remains with graphs in the others, {against}{tail}."
    )


def _median_share(gained: pd.DataFrame, part: str) -> str:
    return f"{(gained[part] / gained['gain_ms']).median():.0%}"


def _not_captured(rows: pd.DataFrame) -> str:
    """Why launchers were not captured, from their rows' extra["graph"]; "" when every timed launcher was."""
    data = timed(rows)
    said = [json_dict(e).get("graph") for e in data["extra"]] if "extra" in data else []
    reasons = pd.Series([s if isinstance(s, str) else None for s in said], index=data.index, dtype=object)
    missing = data[reasons.notna().to_numpy()].assign(graph=reasons.dropna().to_numpy())
    if missing.empty:
        return ""
    body = [
        [why, str(len(g)), ", ".join(sorted(set(g["impl"] + " " + g["variant"])))]
        for why, g in missing.groupby("graph")
    ]
    rows_word = "row has" if len(missing) == 1 else "rows have"
    return f"{len(missing)} timed {rows_word} no graph time:\n\n" + table(["reason", "rows", "implementations"], body)


def _cells(r: Any) -> list[str]:
    """A row of `split` as table cells; each part's share of the gain where there was a gain."""
    return [
        r.series,
        fmt_size(r.size),
        r.dtype,
        r.impl,
        f"{r.variant} vs {r.baseline}",
        r.host,
        _ms(r.host_ms_base),
        _ms(r.time_graph_ms_base),
        _ms(r.host_ms),
        _ms(r.time_graph_ms),
        _ms(r.gain_ms),
        _ms(r.launch_ms) + _share(r.launch_ms, r.gain_ms),
        _ms(r.graph_ms) + _share(r.graph_ms, r.gain_ms),
        _ms(r.predicted_ms),
        "" if r.realised != r.realised else f"{r.realised:.2g}×",
    ]


def _share(part: float, gain: float) -> str:
    return f" ({part / gain:.0%})" if gain > 0 and part == part else ""


def _ms(value: float) -> str:
    return "" if value is None or value != value else f"{value:.4g}"
