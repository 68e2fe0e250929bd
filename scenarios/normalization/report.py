"""The normalization family's report section: where fusion stopped paying along cols, and why.

The generic verdict says where fusion paid; for a row-wise op the interesting question is where it *stopped*,
and the ledger knows one reason: past the tile, the fused kernel reads x twice. This section puts the measured
speedups beside the ledger's prediction per case, names the cols at which the re-read starts, tells losses the
ledger predicts from those it does not, and compares the library with the best hand-fused kernel. Used by
layernorm, rmsnorm and softmax (`RowNormalization.report_sections`); reads tidy rows, never runs a kernel.
"""

from __future__ import annotations

import pandas as pd

from scenarios.normalization.charts import ledgers, with_ledger
from suite.kit.markdown import table
from suite.kit.tidy import fmt_size, fmt_x, json_dict, speedups, timed


def _line_verdict(line: pd.DataFrame) -> str:
    """One sentence for one implementation/dtype/case: where fusion paid, where it stopped, and why."""
    line = line.sort_values("cols")
    paid = line["verdict"] == "pays"
    each = ", ".join(
        f"{fmt_size(c)}: {fmt_x(s)} (predicted {fmt_x(p)})"
        for c, s, p in zip(line["cols"], line["speedup"], line["predicted"], strict=True)
    )
    if paid.all():
        head = "fusion paid at every cols measured"
    elif not paid.any():
        head = "fusion never paid"
    else:
        head = f"fusion stopped paying at cols = {', '.join(fmt_size(c) for c in line.loc[~paid, 'cols'])}"
    return f"{head} — {each}. " + " ".join(_reasons(line, paid))


def _reasons(line: pd.DataFrame, paid: pd.Series) -> list[str]:
    """What the ledger says about the shape of the line: the re-read past the tile, losses it does not predict,
    gains well under its prediction."""
    out = []
    wide, narrow = line[line["reread_bytes"] > 0], line[line["reread_bytes"] == 0]
    if len(wide) and len(narrow):
        out.append(
            f"From cols = {fmt_size(wide['cols'].iloc[0])} the row exceeds the tile of "
            f"{int(wide['tile'].iloc[0])} columns and the fused kernel reads x twice: the ledger's "
            f"prediction falls from {fmt_x(narrow['predicted'].iloc[-1])} to "
            f"{fmt_x(wide['predicted'].iloc[0])}."
        )
    elif len(wide):
        out.append(
            f"Every row exceeds the tile of {int(wide['tile'].iloc[0])} columns: the fused kernel reads x "
            "twice, which the prediction includes."
        )
    lost = line[~paid]
    predicted_loss = lost[lost["predicted"] < 1.1]
    if len(predicted_loss):
        out.append(
            f"At cols = {', '.join(fmt_size(c) for c in predicted_loss['cols'])} the ledger itself predicts no gain."
        )
    unexplained = lost[lost["predicted"] >= 1.1]
    if len(unexplained):
        where = (
            "compute — exp, half-precision conversions — or chunks re-read from DRAM rather than L2"
            if (line["device"] == "cpu").all()
            else "spills, occupancy, chunks re-read from HBM rather than L2"
        )
        out.append(
            f"At cols = {', '.join(fmt_size(c) for c in unexplained['cols'])} the ledger still predicts a gain "
            f"the kernels did not deliver: the time went where the ledger does not look ({where})."
        )
    short = line[paid & (line["speedup"] < 0.75 * line["predicted"])]
    if len(short):
        out.append(
            f"At cols = {', '.join(fmt_size(c) for c in short['cols'])} fusion paid under 75% of the "
            "prediction: the unfused intermediates were partly served from cache, or launches and "
            "compute rather than bytes set the time."
        )
    return out


def fusion_section(frame: pd.DataFrame) -> str:
    """Where fusion stopped paying along cols, per implementation and dtype, and what the ledger says."""
    data = with_ledger(frame)
    if data.empty:  # rows of another scenario of that name, or of an older schema: nothing to say
        return ""
    lines = ["### Where fusion stopped paying (normalization)"]
    pairs = speedups(data)
    pairs = pairs[pairs["variant"] == "fused"] if len(pairs) else pairs
    if pairs.empty:
        lines.append(
            "Nothing was timed natively, so there is no measured speedup; the ledger's predictions are in "
            "the traffic ledger below."
        )
    else:
        keys = ["scenario", "params", "dtype"]
        extra = data.drop_duplicates(keys)[[*keys, "cols", "tile", "case", "reread_bytes"]]
        pairs = pairs.merge(extra, on=keys, how="left")
        for (impl, dtype, case), line in pairs.groupby(["impl", "dtype", "case"]):
            lines.append(f"- **{impl}, {dtype}** ({case}): {_line_verdict(line)}")
    lines.append(_reread_table(data))
    lines.append(_library_note(data))
    return "\n\n".join(line for line in lines if line)


def _reread_table(data: pd.DataFrame) -> str:
    """Per case: launches, bytes unfused and fused (write-once), the fused re-read, the predicted speedup."""
    head = [
        "rows",
        "cols",
        "tile",
        "dtype",
        "launches",
        "unfused bytes",
        "fused bytes",
        "of which re-read",
        "predicted (write-once)",
    ]
    body = []
    for r in data.drop_duplicates(["params", "dtype"]).sort_values(["dtype", "rows", "cols"]).itertuples():
        lg = ledgers(r.scenario, json_dict(r.params), r.dtype)
        moved = {v: lg[v].bytes_read + lg[v].bytes_written for v in ("unfused", "fused")}
        body.append(
            [
                int(r.rows),
                fmt_size(r.cols),
                int(r.tile),
                r.dtype,
                f"{lg['unfused'].launches} → 1",
                _mb(moved["unfused"]),
                _mb(moved["fused"]),
                _mb(r.reread_bytes),
                fmt_x(moved["unfused"] / moved["fused"]),
            ]
        )
    note = (
        "Per case, the ledger's bytes at the outer-memory boundary, each read and write counted once (the "
        "traffic ledger below adds the CPU's write-allocate reads). A fused kernel re-reads x once when "
        "cols > tile."
    )
    return note + "\n\n" + table(head, body)


def _mb(value: float) -> str:
    return "0" if not value else f"{value / 1e6:.3g} MB"


def _library_note(data: pd.DataFrame) -> str:
    """How the library's time compares with the fastest hand-fused kernel of each case and device."""
    rows = timed(data)
    lib, fused = rows[rows["variant"] == "library"], rows[rows["variant"] == "fused"]
    if lib.empty or fused.empty:
        return ""
    best = fused.groupby(["params", "dtype", "device"])["time_ms"].min().rename("fused_ms").reset_index()
    merged = lib.merge(best, on=["params", "dtype", "device"])
    if merged.empty:
        return ""
    ratio = merged["fused_ms"] / merged["time_ms"]
    return (
        f"Library (torch) against the fastest hand-fused kernel of the same case and device: fused time / "
        f"library time ranged {ratio.min():.2f}–{ratio.max():.2f} (above 1, the library is faster)."
    )
