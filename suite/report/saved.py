"""The report's "Kept for the backward pass" section: which activations each variant's forward keeps, and which
fusion stops keeping.

A training step holds what the forward saves until the backward pass reads it; on a model of many layers that,
more than any one kernel's scratch, is what runs out of memory. Each backward or train row carries the bytes
its implementation's forward kept (`saved_bytes`, the buffers it allocated, each named in `extra.saved`) and the
family's model of them (`saved_bytes_modeled`). Per family and case, the section lists each variant's kept
tensors and bytes, and says in one line which tensors the fused variant keeps that the unfused one does not and
which it stops keeping.
"""

from __future__ import annotations

import pandas as pd

from suite.kit.markdown import details, table
from suite.kit.tidy import fmt_size, json_dict

MIB = 2**20


def section(rows: pd.DataFrame) -> str | None:
    """Markdown for one family's tidy rows; None where no row of a backward or train phase says what it kept."""
    staged = rows[(rows["phase"] != "forward") & (rows["saved_bytes"].notna() | rows["saved_bytes_modeled"].notna())]
    if staged.empty:
        return None
    lines, body = [], []
    for (impl, dtype, series, size), case in staged.groupby(["impl", "dtype", "series", "size"], sort=True):
        kept = {r["variant"]: json_dict(r["extra"]).get("saved", {}) for _, r in case.iterrows()}
        for _, r in case.sort_values("variant").iterrows():
            names = ", ".join(f"{k} {v / MIB:,.2f}" for k, v in sorted(kept[r["variant"]].items())) or "—"
            body.append([series, fmt_size(size), impl, dtype, r["variant"], names, _mib(r["saved_bytes"]),
                         _mib(r["saved_bytes_modeled"]), _mib(r["peak_bytes"])])  # fmt: skip
        if "fused" in kept and "unfused" in kept and kept["unfused"]:
            gone = sorted(set(kept["unfused"]) - set(kept["fused"]))
            more = sorted(set(kept["fused"]) - set(kept["unfused"]))
            said = f"{', '.join(gone)}" if gone else "nothing"
            lines.append(
                f"- {series}, {case['size_axis'].iloc[0]} = {fmt_size(size)}, {impl} {dtype}: fused stops keeping {said}"
                + (f" and keeps {', '.join(more)} instead" if more else "")
                + f" ({_mib(_sum(kept['unfused']))} → {_mib(_sum(kept['fused']))} MiB)"
            )
    head = ["case", "size", "implementation", "dtype", "variant", "kept (MiB each)", "kept MiB", "modeled MiB",
            "peak MiB"]  # fmt: skip
    intro = (
        "What each variant's forward keeps for its backward pass (measured: the buffers the implementation "
        "allocated; modeled: the family's account), and the peak of the call."
    )
    return "\n\n".join(["### Kept for the backward pass", intro, *(["\n".join(lines)] if lines else []),
                        details(f"{len(body)} rows", table(head, body))])  # fmt: skip


def _sum(kept: dict) -> float:
    return float(sum(kept.values()))


def _mib(value: float) -> str:
    return "" if pd.isna(value) else f"{value / MIB:,.2f}"
