"""Where the memory boundary lies for a case: whether the intermediates fusion removes fit in the last-level
cache, and why a row ran faster than the copy ceiling.

The ledger counts every intermediate as a trip to memory and back (ΔQ = 2·N·s per intermediate, so the bytes the
intermediates hold are half the saving). Where those bytes fit in the last-level cache the row records
(`cache_bytes`: sysfs's largest CPU cache, the GPU's L2), the unfused kernels may find them there: the case is
*cache-resident*, and the ledger's bytes, like the speedup predicted from them, are an upper bound on the traffic
that crosses the memory boundary. A row faster than the copy ceiling is always given its reason, from the
row's own figures: under the non-temporal copy (the ledger counts an allocate read its stores skipped), its
working set within the cache, or neither (the ceiling is one copy beside the case on a shared host).
"""

from __future__ import annotations

import pandas as pd

from suite.kit.tidy import fmt_size

MIB = 2**20


def intermediates(row: pd.Series | object) -> float:
    """The bytes the removed intermediates hold (half of ΔQ), NaN where the row has no saving."""
    saved = _num(getattr(row, "bytes_saved", None))
    return saved / 2 if saved > 0 else float("nan")


def resident(row: pd.Series | object) -> bool:
    """The removed intermediates fit in the last-level cache the row recorded."""
    held, cache = intermediates(row), _num(getattr(row, "cache_bytes", None))
    return bool(held == held and cache > 0 and held <= cache)


def fit(row: pd.Series | object) -> str:
    """'14.9 MB in 300 MiB: cache-resident' or '478 MB over 32 MiB: memory'; '' where either is unknown."""
    held, cache = intermediates(row), _num(getattr(row, "cache_bytes", None))
    if held != held or not cache > 0:
        return ""
    if held <= cache:
        return f"{held / 1e6:.3g} MB in {cache / MIB:.0f} MiB: cache-resident"
    return f"{held / 1e6:.3g} MB over {cache / MIB:.0f} MiB: memory"


def above_ceiling(rows: pd.DataFrame) -> str | None:
    """One line per timed row above 100% of its copy ceiling, with its reason; None where none is."""
    over = rows[(rows["status"] == "ok") & (rows["pct_of_ceiling"] > 100)]
    if over.empty:
        return None
    lines = []
    for r in over.sort_values(["series_rank", "size", "impl", "variant"]).itertuples():
        head = f"- {r.series}, {r.size_axis} = {fmt_size(r.size)}, {r.impl} {r.variant}: {r.pct_of_ceiling:.0f}%"
        lines.append(f"{head}: {_reason(r)}")
    intro = (
        "Rows above the copy ceiling (the copy measured beside the case with ordinary stores), each with what "
        "its own figures say of it:"
    )
    return intro + "\n\n" + "\n".join(lines)


def _reason(r: object) -> str:
    gbps, streaming = _num(getattr(r, "gbps", None)), _num(getattr(r, "ceiling_streaming_gbps", None))
    cache = _num(getattr(r, "cache_bytes", None))
    launches = max(_num(getattr(r, "launches", None)), 1.0)
    working = (_num(getattr(r, "bytes_read", None)) + _num(getattr(r, "bytes_written", None))) / launches
    if streaming > 0 and gbps <= streaming and getattr(r, "store_model", "") == "write-allocate":
        return (
            f"{gbps:.1f} GB/s is within the non-temporal copy's {streaming:.1f} GB/s: its stores may skip the "
            "allocate read the ledger counts, so it moved fewer bytes than the ledger says"
        )
    if cache > 0 and working == working and working <= cache:
        return (
            f"a kernel's working set ({working / MIB:.3g} MiB) fits in the {cache / MIB:.0f} MiB last-level cache, "
            "which served part of its traffic: its ledger bytes are an upper bound on what reached memory"
        )
    return (
        "its own figures do not account for it (above the non-temporal copy, a working set larger than the "
        "cache): the ceiling is a single copy timed beside the case, on a host whose bandwidth moves"
    )


def _num(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")
