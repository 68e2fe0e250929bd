"""The verdict in words: where fusion paid, from which size on, against what the ledger predicted, and why.

Built from the fused/unfused pairs of `suite.kit.tidy.speedups`. For each implementation and dtype it speaks about the
case with the most to gain (the longest chain, the widest row), names the size from which every measured speedup is ≥ 1.1×,
says where the gain shrank, and uses the share of the measured copy ceiling each variant reached to say
whether memory traffic explains the result. Other cases get one number each at the largest size.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from suite.kit.tidy import BASELINE, GROUP, fmt_size, fmt_x
from suite.report import boundary
from suite.report.causes import CACHED_PCT, EXPLAINED, LAUNCH_FLOOR_MS, causes, needs_cause

SHRUNK = 0.6
"""A gain below this fraction of its peak is called out as shrunk."""
HEAVIEST = ["predicted", "series_rank", "bytes_modeled_base"]
"""Cases ranked by what fusion can gain, then by traffic: the last one leads the verdict."""


def verdicts(pairs: pd.DataFrame) -> str:
    """One markdown bullet per (implementation, dtype, variant)."""
    if pairs.empty:
        return "Nothing was timed natively, so there is no measured speedup; the ledger gives the prediction."
    out = []
    for (impl, _, dtype, variant), group in pairs.groupby(GROUP):
        lead = group.sort_values(HEAVIEST, kind="stable").iloc[-1]["series"]
        line = group[group["series"] == lead].sort_values("size")
        label = f"{impl}, {dtype}" + (f", {variant}" if variant != "fused" else "")
        text = " ".join(part for part in [_trend(line), _why(line), _cause(line, pairs), _others(group, lead)] if part)
        out.append(f"- **{label}** ({lead}): {text}")
    return "\n".join(out)


def _trend(line: pd.DataFrame) -> str:
    """Where the lead case paid, from which size on, and how the gain changed with size."""
    sp, sizes, said = line["speedup"].to_numpy(), line["size"].to_numpy(), line["verdict"].to_numpy()
    axis, variant, pred = line["size_axis"].iloc[0], line["variant"].iloc[0], _range(line["predicted"])
    base = _baseline(line)
    start = next((i for i in range(len(sp)) if (said[i:] == "pays").all()), None)
    if start is None:
        if (said == "loses").all():
            return f"{variant} lost to {base} at every size: {_range(sp)}, against a predicted {pred}."
        if (said == "neutral").all():
            return f"{variant} and {base} were indistinguishable at every size ({_range(sp)}), predicted {pred}."
        return f"no consistent result: {_range(sp)} across sizes, against a predicted {pred}."
    where = f"from {axis} = {fmt_size(sizes[start])} up" if start else "at every size measured"
    text = f"{variant} beat {base} {where}: {_range(sp[start:])}, against a predicted {pred}"
    if start:
        kinds = set(said[:start])
        word = {"loses": "lost", "neutral": "was neutral"}.get(kinds.pop()) if len(kinds) == 1 else None
        text += f"; below that it {word or 'was mixed'} ({_range(sp[:start])})"
    return text + _shape(line.iloc[start:]) + "."


def _shape(line: pd.DataFrame) -> str:
    """Where the gain fell well below its peak among the sizes that paid, and the likely reason."""
    sp, axis = line["speedup"].to_numpy(), line["size_axis"].iloc[0]
    peak = int(np.argmax(sp))
    low = next(i for i in range(peak + 1) if sp[i] >= SHRUNK * sp[peak])
    if low:
        small = line.iloc[:low]
        said = f". The gain shrank to {_range(sp[:low])} for {axis} ≤ {fmt_size(small['size'].iloc[-1])}"
        cached = small["pct_of_ceiling_base"].max()
        launches = small["launches_base"] if "launches_base" in small else pd.Series(1.0, index=small.index)
        per_launch = float((small["time_ms_base"] / launches.fillna(1.0).clip(lower=1.0)).min())
        floor = LAUNCH_FLOOR_MS.get(str(line["device"].iloc[0]) if "device" in line else "", 0.01)
        if cached > CACHED_PCT:
            return said + (
                f": the {_baseline(line)} kernels ran at up to {cached:.0f}% of the copy ceiling there, so their "
                f"intermediates were served from cache (rule: above {CACHED_PCT:.0f}% of the copy ceiling)"
            )
        if per_launch < floor:
            return said + (
                f": each {_baseline(line)} kernel took as little as {per_launch * 1e3:.0f} µs there, so fixed "
                f"per-launch costs, not memory traffic, dominate (rule: under {floor * 1e3:.0f} µs per launch)"
            )
        return said
    if sp[-1] < SHRUNK * sp[peak]:
        return f". The gain peaked at {fmt_x(sp[peak])} at {axis} = {fmt_size(line['size'].iloc[peak])}"
    return ""


def _why(line: pd.DataFrame) -> str:
    """At the largest size: measured against predicted, and how near each variant came to the copy ceiling."""
    last = line.iloc[-1]
    if last["predicted"] < 1 / 1.05:
        return (
            f"The ledger predicts a loss here ({fmt_x(last['predicted'])}): the {last['variant']} variant moves "
            f"more bytes than {_baseline(line)}."
        )
    if last["predicted"] < 1.05:
        return "The ledger predicts no gain here: fusion removes no intermediate."
    share = last["speedup"] / last["predicted"]
    at = f"{last['size_axis']} = {fmt_size(last['size'])}"
    text = f"At {at} the measured speedup was {share:.0%} of the predicted"
    fused, base = last["pct_of_ceiling"], last["pct_of_ceiling_base"]
    if np.isnan(fused) or np.isnan(base):
        return text + "."
    text += f"; {last['variant']} ran at {fused:.0f}% and {_baseline(line)} at {base:.0f}% of the copy ceiling"
    if boundary.resident(last):
        text += (
            f" (cache-resident: the {boundary.intermediates(last) / 1e6:.3g} MB of intermediates fusion removes "
            f"fit in the {last['cache_bytes'] / 2**20:.0f} MiB last-level cache, so the prediction is an upper "
            "bound)"
        )
    if share > 1 / EXPLAINED:
        return text + f", more than the bytes removed account for (rule: above {1 / EXPLAINED:.0%} of the predicted)."
    if share >= EXPLAINED:
        return text + f", so the bytes removed explain the gain (rule: at least {EXPLAINED:.0%} of the predicted)."
    if fused < SHRUNK * base:
        return text + (
            f": {last['variant']} is limited by something other than memory traffic, so the bytes removed buy less "
            f"than modeled (rule: under {SHRUNK:.0%} of {_baseline(line)}'s share of the ceiling)."
        )
    return text + "."


def _cause(line: pd.DataFrame, pairs: pd.DataFrame) -> str:
    """At the largest size, when fusion did not pay or realised little of its prediction: the likely causes."""
    last = line.iloc[-1]
    if not needs_cause(last):
        return ""
    same = (pairs["params"] == last["params"]) & (pairs["dtype"] == last["dtype"]) & (pairs["impl"] == last["impl"])
    library = pairs[same & (pairs["variant"] == "library")]["time_ms"]
    found = causes(last, float(library.iloc[0]) if len(library) else None)
    if not found:
        return "No cause stands out in the evidence (spills, occupancy, library, launch costs, caches, compute)."
    return "Likely cause: " + "; ".join(found) + "."


def _others(group: pd.DataFrame, lead: str) -> str:
    top = group[(group["size"] == group["size"].max()) & (group["series"] != lead)]
    if top.empty:
        return ""
    top = top.sort_values(HEAVIEST, ascending=False, kind="stable")
    each = [f"{fmt_x(r.speedup)} for {r.series} (predicted {fmt_x(r.predicted)})" for r in top.itertuples()]
    return f"Other cases at {top['size_axis'].iloc[0]} = {fmt_size(top['size'].iloc[0])}: {', '.join(each)}."


def _baseline(line: pd.DataFrame) -> str:
    """The variant the line is compared with (unfused, eager, unblocked)."""
    return str(line["baseline"].iloc[0]) if "baseline" in line and line["baseline"].iloc[0] else BASELINE


def _range(values: pd.Series | np.ndarray) -> str:
    low, high = fmt_x(float(np.min(values))), fmt_x(float(np.max(values)))
    return low if low == high else f"{low[:-1]}–{high}"
