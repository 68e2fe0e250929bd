"""add_rmsnorm's report section: what fusion removed per case, measured beside the ledger's prediction.

The generic report gives verdicts, the rivals and the full ledger; this section puts, per case, what the fused
kernel no longer moves or holds — launches, bytes (with the re-read past the tile), ΔQ and the modeled peak
memory — beside each implementation's measured speedup and the ledger's prediction for it. The table is built
from the family's ledger alone (`ledger_table`), so swiglu, whose ledger has the same shape, uses it too. Reads
tidy rows, never runs a kernel.
"""

from __future__ import annotations

import pandas as pd

from suite.core.scenario import get
from suite.kit.markdown import table
from suite.kit.tidy import fmt_size, fmt_x, json_dict, speedups, tidy


def _mb(value: float) -> str:
    return "0" if not value else f"{value / 1e6:.3g} MB"


def ledger_table(data: pd.DataFrame) -> str:
    """Per case and dtype: launches, bytes unfused and fused (write-once), the fused re-read, ΔQ of the removed
    intermediates, the modeled peak memory of each, and the predicted speedup."""
    head = [
        "case",
        "dtype",
        "launches",
        "unfused bytes",
        "fused bytes",
        "of which re-read",
        "ΔQ removed",
        "peak unfused",
        "peak fused",
        "predicted (write-once)",
    ]
    body = []
    for r in data.drop_duplicates(["params", "dtype"]).sort_values(["dtype", "size"]).itertuples():
        params = json_dict(r.params)
        lg = get(r.scenario).ledger(params, r.dtype)
        unfused, fused = lg["unfused"], lg["fused"]
        moved = {v: lg[v].bytes_read + lg[v].bytes_written for v in ("unfused", "fused")}
        reread = sum(getattr(k, "reread_bytes", 0) for k in fused.kernels)
        case = ", ".join(f"{k}={v}" for k, v in params.items())
        body.append(
            [
                case,
                r.dtype,
                f"{unfused.launches} → {fused.launches}",
                _mb(moved["unfused"]),
                _mb(moved["fused"]),
                _mb(reread),
                _mb(fused.saved_bytes),
                _mb(unfused.peak_bytes or 0),
                _mb(fused.peak_bytes or 0),
                fmt_x(moved["unfused"] / moved["fused"]),
            ]
        )
    return table(head, body)


def measured_lines(data: pd.DataFrame) -> list[str]:
    """One line per implementation and dtype: fused against unfused at each size, the prediction beside it."""
    pairs = speedups(data)
    pairs = pairs[pairs["variant"] == "fused"] if len(pairs) else pairs
    if pairs.empty:
        return ["Nothing was timed natively, so there is no measured speedup; the predictions are in the table."]
    out = []
    for (impl, dtype), line in pairs.groupby(["impl", "dtype"]):
        line = line.sort_values("size")
        each = ", ".join(
            f"{fmt_size(s)}: {fmt_x(m)} [{fmt_x(lo)}, {fmt_x(hi)}] (predicted {fmt_x(p)})"
            for s, m, lo, hi, p in zip(
                line["size"], line["speedup"], line["speedup_lo"], line["speedup_hi"], line["predicted"], strict=True
            )
        )
        share = line["speedup"] / line["predicted"]
        gist = "delivered most of" if (share >= 0.75).all() else "fell short of"
        out.append(
            f"- **{impl}, {dtype}**: fused over unfused — {each}; the kernels {gist} the ledger's "
            f"prediction ({share.min():.0%}–{share.max():.0%} of it)."
        )
    return out


def fusion_section(frame: pd.DataFrame, title: str = "What fusion removed (add_rmsnorm)") -> str:
    data = frame.copy() if "impl" in frame else tidy(frame)
    if data.empty:
        return ""
    note = (
        "Per case, the ledger at the outer-memory boundary, each read and write counted once (the traffic "
        "ledger below adds the CPU's write-allocate reads); ΔQ is 2·N·s per removed matrix and 2·rows·4 per "
        "row statistic; the peaks are the ledgers' live buffers (inputs and outputs throughout, each "
        "intermediate from the kernel that writes it to the last that reads it)."
    )
    return "\n\n".join([f"### {title}", *measured_lines(data), note, ledger_table(data)])
