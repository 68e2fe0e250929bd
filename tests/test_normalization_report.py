"""The normalization chart and report section from a synthetic results table: where fusion stopped paying,
the ledger's re-read beside it, the library compared, and the chart written."""

from __future__ import annotations

import pandas as pd

from scenarios.normalization import LayerNorm
from scenarios.normalization.charts import effective_bandwidth_chart, with_ledger
from scenarios.normalization.report import fusion_section
from suite.core.ledger import STORE_MODEL
from suite.core.row import Row, params_json
from suite.kit.tidy import fmt_size
from suite.report.plots import make_charts
from suite.report.report import write_report

SCN = LayerNorm()
COLS = [256, 1024, 4096, 8192, 32768]
TILE = 4096


def _row(cols: int, variant: str, backend: str = "numba") -> Row:
    params = {"rows": 512, "cols": cols, "tile": TILE}
    lg = SCN.ledger(params, "float32")[variant]
    model = STORE_MODEL["cpu"]
    minimal = 2 * 512 * cols * 4
    # fused streams at 80% of a 20 GB/s copy; unfused pays its bytes; past the tile fused slows to a loss at 32768
    speed = {"fused": 16.0, "unfused": 16.0, "library": 12.0}[variant] * 1e6  # bytes per ms
    t = lg.bytes_moved(model) / speed if variant != "library" else minimal / speed
    if variant == "fused" and cols == 32768:
        t = 1.2 * SCN.ledger(params, "float32")["unfused"].bytes_moved(model) / speed
    return Row(scenario="layernorm", params=params_json(params), dtype="float32", backend=backend if variant != "library" else "torch",
               device="cpu", variant=variant, status="ok", mode="native", size=cols, time_ms=t, time_q1_ms=0.98 * t,
               time_q3_ms=1.02 * t, reps=20, bytes_modeled=lg.bytes_moved(model), bytes_read=lg.bytes_read,
               bytes_written=lg.bytes_written, store_model=model, launches=lg.launches, ceiling_gbps=20.0,
               gbps=(lg.bytes_read + lg.bytes_written) / t / 1e6, max_rel_err=1e-4)  # fmt: skip


def _frame() -> pd.DataFrame:
    rows = [_row(c, v) for c in COLS for v in ("fused", "unfused", "library")]
    return pd.DataFrame([r.as_record() for r in rows])


def test_with_ledger_adds_minimal_bytes_and_rereads() -> None:
    data = with_ledger(_frame())
    fused = data[data["variant"] == "fused"].set_index("cols")
    assert fused.loc[1024, "minimal_bytes"] == 2 * 512 * 1024 * 4 + 2 * 1024 * 4
    assert fused.loc[4096, "reread_bytes"] == 0 and fused.loc[8192, "reread_bytes"] == 512 * 8192 * 4


def test_section_says_where_fusion_stopped_paying_and_why() -> None:
    text = fusion_section(_frame())
    assert "### Where fusion stopped paying" in text
    assert f"fusion stopped paying at cols = {fmt_size(32768)} —" in text
    assert f"From cols = {fmt_size(8192)} the row exceeds the tile of 4096 columns" in text
    assert "prediction falls from 3.7× to 2.7×" in text and "did not deliver" in text
    assert f"| 512 | {fmt_size(8192)} | 4096 | float32 | 5 → 1 | 134 MB | 50.4 MB | 16.8 MB | 2.7× |" in text
    assert "Library (torch)" in text


def test_chart_and_report_are_written(tmp_path) -> None:  # type: ignore[no-untyped-def]
    frame = _frame()
    (path,) = effective_bandwidth_chart(frame, tmp_path)
    assert path.name == "effective_bandwidth_layernorm.png" and path.stat().st_size > 10_000
    charts = make_charts(frame, tmp_path / "charts")
    assert "effective_bandwidth_layernorm.png" in {p.name for p in charts}
    report = write_report(frame, charts, tmp_path).read_text()
    assert "effective_bandwidth_layernorm.png" in report and "Where fusion stopped paying" in report


def test_nothing_timed_gives_no_chart_and_a_plain_section(tmp_path) -> None:  # type: ignore[no-untyped-def]
    frame = _frame().assign(mode="emulated", time_ms=None)
    assert effective_bandwidth_chart(frame, tmp_path) == []
    assert "Nothing was timed natively" in fusion_section(frame)
