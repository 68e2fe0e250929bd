"""The normalization family's own chart and report section: effective bandwidth against cols with the tile
boundary marked, and where fusion stopped paying with the ledger's reason beside it.

Registered with `suite.report.extras` for layernorm, rmsnorm and softmax; both functions read the tidy rows of one
scenario and never run a kernel. Effective bandwidth is the *minimal* traffic — x read once, weight and bias
once, y written once — over the median time, the same bytes for every variant, so the lines compare times on
the scale of the measured copy ceiling. The re-read a fused kernel pays for a row wider than its tile comes
from the scenario's ledger (`reread_bytes`).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from suite.report.extras import charts_for, section_for
from suite.report.frames import fmt_size, fmt_x, json_dict, speedups, tidy, timed
from suite.report.markdown import table
from suite.report.plots import CEILING_LEGEND, DPI, STYLE, draw_ceilings

SCENARIOS = ("layernorm", "rmsnorm", "softmax")
MAX_COLS = 4


def _ledgers(scenario: str, params: dict, dtype: str) -> dict:
    from suite.core.scenario import get

    return get(scenario).ledger(params, dtype)


def with_ledger(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with cols, rows, tile, the minimal bytes and the fused kernel's re-read bytes added."""
    from scenarios.normalization import reread_bytes

    data = frame.copy() if "impl" in frame else tidy(frame)
    parsed = data["params"].map(json_dict)
    for key in ("rows", "cols", "tile"):
        data[key] = parsed.map(lambda p, k=key: p.get(k, math.nan)).astype(float)
    minimal, reread = [], []
    for scenario, p, dtype in zip(data["scenario"], parsed, data["dtype"], strict=True):
        try:
            lg = _ledgers(scenario, p, dtype)
        except Exception:  # a row of a case this tree cannot model: no bytes rather than no chart
            minimal.append(math.nan)
            reread.append(math.nan)
            continue
        minimal.append(lg["library"].bytes_read + lg["library"].bytes_written)
        reread.append(reread_bytes(lg["fused"]))
    data["minimal_bytes"], data["reread_bytes"] = minimal, reread
    data["case"] = [f"rows={r:.0f}, tile={t:.0f}" for r, t in zip(data["rows"], data["tile"], strict=True)]
    return data.dropna(subset=["rows", "cols", "tile", "minimal_bytes"])


@charts_for(*SCENARIOS)
def effective_bandwidth_chart(frame: pd.DataFrame, outdir: Path) -> list[Path]:
    """Minimal bytes / median time against cols per backend/device and variant, the copy ceiling dotted and
    the tile (beyond which a fused kernel reads x twice) dashed."""
    rows = timed(with_ledger(frame))
    rows = rows[rows["minimal_bytes"] > 0]
    if rows.empty:
        return []
    scenario = str(rows["scenario"].iloc[0])
    rows = rows.assign(effective=rows["minimal_bytes"] / (rows["time_ms"] * 1e6))
    impls = sorted(rows["impl"].unique())
    colors = dict(zip(impls, sns.color_palette("colorblind", len(impls)), strict=False))
    cases = sorted(rows["case"].unique())[:MAX_COLS]
    rows = rows[rows["case"].isin(cases)]
    dtypes = sorted(rows["dtype"].unique(), reverse=True)

    def draw(data: pd.DataFrame, **_: object) -> None:
        ax = plt.gca()
        for (impl, variant), line in data.groupby(["impl", "variant"]):
            line = line.groupby("cols", as_index=False)["effective"].median()
            ls, marker = STYLE.get(variant, ("-.", "D"))
            ax.plot(line["cols"], line["effective"], ls=ls, marker=marker, color=colors[impl], ms=5)
        draw_ceilings(ax, data)
        for tile in data["tile"].dropna().unique():
            if data["cols"].min() <= tile * 2 and tile <= data["cols"].max() * 2:
                ax.axvline(tile, color="0.5", ls="--", lw=1.1)
                ax.annotate(f"tile {tile:.0f}", (tile, 0.02), xycoords=("data", "axes fraction"), xytext=(3, 0),
                            textcoords="offset points", fontsize=8, color="0.35")  # fmt: skip

    legend = {**{i: Line2D([], [], color=c, lw=2.5) for i, c in colors.items()},
              **{v: Line2D([], [], color="0.2", ls=STYLE.get(v, ("-.", "D"))[0], marker=STYLE.get(v, ("-.", "D"))[1])
                 for v in sorted(rows["variant"].unique())},
              **CEILING_LEGEND,
              "tile: wider rows are read twice by fused": Line2D([], [], color="0.5", ls="--", lw=1.1)}  # fmt: skip
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.9):
        grid = sns.FacetGrid(rows, col="case", row="dtype" if len(dtypes) > 1 else None, col_order=cases,
                             row_order=dtypes if len(dtypes) > 1 else None, height=3.3, aspect=1.3,
                             margin_titles=True, sharey=True, despine=False)  # fmt: skip
        grid.map_dataframe(draw)
        grid.set_titles(col_template="{col_name}", row_template="{row_name}")
        for ax in grid.axes.flat:
            _log2_x(ax, rows["cols"])
            ax.set_ylim(bottom=0)
        grid.set_axis_labels("cols (elements per row, log scale)", "effective bandwidth (GB/s)")
        grid.add_legend(legend_data=legend, title="")
        only = "" if len(dtypes) > 1 else f" [{dtypes[0]}]"
        title = f"{scenario}: effective bandwidth, minimal bytes (x once, y once) / median time{only}"
        grid.figure.suptitle(title, y=1.0, va="bottom", fontsize=12)
    path = Path(outdir) / f"effective_bandwidth_{scenario}.png"
    grid.figure.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(grid.figure)
    return [path]


def _log2_x(ax: plt.Axes, values: pd.Series) -> None:
    ax.set_xscale("log", base=2)
    span = math.log2(max(values.max(), 2)) - math.log2(max(values.min(), 1))
    ax.xaxis.set_major_locator(LogLocator(base=4 if span >= 8 else 2))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _line_verdict(line: pd.DataFrame) -> str:
    """One sentence for one implementation/dtype/case: where fusion paid, where it stopped, and why."""
    line = line.sort_values("cols")
    paid = line["verdict"] == "pays"
    each = ", ".join(f"{fmt_size(c)}: {fmt_x(s)} (predicted {fmt_x(p)})"
                     for c, s, p in zip(line["cols"], line["speedup"], line["predicted"], strict=True))  # fmt: skip
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
        out.append(f"From cols = {fmt_size(wide['cols'].iloc[0])} the row exceeds the tile of "
                   f"{int(wide['tile'].iloc[0])} columns and the fused kernel reads x twice: the ledger's "
                   f"prediction falls from {fmt_x(narrow['predicted'].iloc[-1])} to "
                   f"{fmt_x(wide['predicted'].iloc[0])}.")  # fmt: skip
    elif len(wide):
        out.append(f"Every row exceeds the tile of {int(wide['tile'].iloc[0])} columns: the fused kernel reads x "
                   "twice, which the prediction includes.")  # fmt: skip
    lost = line[~paid]
    predicted_loss = lost[lost["predicted"] < 1.1]
    if len(predicted_loss):
        out.append(f"At cols = {', '.join(fmt_size(c) for c in predicted_loss['cols'])} the ledger itself predicts "
                   "no gain.")  # fmt: skip
    unexplained = lost[lost["predicted"] >= 1.1]
    if len(unexplained):
        where = (
            "compute — exp, half-precision conversions — or chunks re-read from DRAM rather than L2"
            if (line["device"] == "cpu").all()
            else "spills, occupancy, chunks re-read from HBM rather than L2"
        )
        out.append(f"At cols = {', '.join(fmt_size(c) for c in unexplained['cols'])} the ledger still predicts a gain "
                   f"the kernels did not deliver: the time went where the ledger does not look ({where}).")  # fmt: skip
    short = line[paid & (line["speedup"] < 0.75 * line["predicted"])]
    if len(short):
        out.append(f"At cols = {', '.join(fmt_size(c) for c in short['cols'])} fusion paid under 75% of the "
                   "prediction: the unfused intermediates were partly served from cache, or launches and "
                   "compute rather than bytes set the time.")  # fmt: skip
    return out


@section_for(*SCENARIOS)
def fusion_section(frame: pd.DataFrame) -> str:
    """Where fusion stopped paying along cols, per implementation and dtype, and what the ledger says."""
    data = with_ledger(frame)
    if data.empty:  # rows of another scenario of that name, or of an older schema: nothing to say
        return ""
    lines = ["### Where fusion stopped paying (normalization)"]
    pairs = speedups(data)
    pairs = pairs[pairs["variant"] == "fused"] if len(pairs) else pairs
    if pairs.empty:
        lines.append("Nothing was timed natively, so there is no measured speedup; the ledger's predictions are in "
                     "the traffic ledger below.")  # fmt: skip
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
    head = ["rows", "cols", "tile", "dtype", "launches", "unfused bytes", "fused bytes", "of which re-read",
            "predicted (write-once)"]  # fmt: skip
    body = []
    for r in data.drop_duplicates(["params", "dtype"]).sort_values(["dtype", "rows", "cols"]).itertuples():
        lg = _ledgers(r.scenario, json_dict(r.params), r.dtype)
        moved = {v: lg[v].bytes_read + lg[v].bytes_written for v in ("unfused", "fused")}
        body.append([int(r.rows), fmt_size(r.cols), int(r.tile), r.dtype, f"{lg['unfused'].launches} → 1",
                     _mb(moved["unfused"]), _mb(moved["fused"]), _mb(r.reread_bytes),
                     fmt_x(moved["unfused"] / moved["fused"])])  # fmt: skip
    note = ("Per case, the ledger's bytes at the outer-memory boundary, each read and write counted once (the "
            "traffic ledger below adds the CPU's write-allocate reads). A fused kernel re-reads x once when "
            "cols > tile.")  # fmt: skip
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
