"""Matmul charts and report section from a synthetic results table: the files exist and the numbers are right.

The table mimics a CPU-only tile sweep: Numba CPU timed (unblocked, tiled at three tiles, fused and unfused
with the epilogue), NumPy and torch as libraries, Triton emulated and CuPy compile-only rows, and a `fused`
row without an epilogue (what a run that asks every variant produces) that must not be reported.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from scenarios.matmul import Matmul
from scenarios.matmul.charts import rows_of
from scenarios.matmul.report import matmul_section
from suite.core.ledger import STORE_MODEL
from suite.core.row import Row, params_json
from suite.kit.tidy import tidy
from suite.report.plots import make_charts
from suite.report.report import write_report

MM = Matmul()
N = 512
TILES = [[32, 32, 32], [64, 64, 32], [128, 128, 64]]
GFLOPS = {"unblocked": 0.5, "library": 200.0, "unfused": 50.0, "fused": 60.0}
TILED_GFLOPS = {32: 20.0, 64: 40.0, 128: 80.0}


def _row(epilogue: str, tile: list[int], backend: str, variant: str, mode: str = "native") -> Row:
    params = {"m": N, "n": N, "k": N, "epilogue": epilogue, "tile": tile}
    device = "cuda" if backend in ("triton", "cupy") else "cpu"
    lg = MM.ledger(params, "float32")[variant]
    row = Row(scenario="matmul", params=params_json(params), dtype="float32", backend=backend, device=device,
              variant=variant, status="ok" if mode != "compile" else "skipped", mode=mode, size=N,
              store_model=STORE_MODEL[device], bytes_read=lg.bytes_read, bytes_written=lg.bytes_written,
              bytes_modeled=lg.bytes_moved(STORE_MODEL[device]), flops_modeled=lg.flops, launches=lg.launches,
              max_rel_err=1e-6)  # fmt: skip
    if mode == "native":
        rate = TILED_GFLOPS[tile[0]] if variant == "tiled" else GFLOPS[variant]
        row.time_ms = lg.flops / rate / 1e6
        row.time_q1_ms, row.time_q3_ms, row.reps, row.ceiling_gbps = 0.98 * row.time_ms, 1.02 * row.time_ms, 9, 20.0
    return row


def _frame() -> pd.DataFrame:
    rows = []
    for tile in TILES:
        rows += [_row("none", tile, "numba", v) for v in ("unblocked", "tiled")]
        rows += [_row("bias_gelu", tile, "numba", v) for v in ("unfused", "fused")]
        rows += [_row(e, tile, "numpy", "library") for e in ("none", "bias_gelu")]
        rows += [_row(e, tile, "triton", "tiled", "emulated") for e in ("none", "bias_gelu")]
        rows += [_row("none", tile, "cupy", "tiled", "compile")]
    rows.append(_row("none", [64, 64, 32], "numba", "fused"))  # not compared without an epilogue
    return pd.DataFrame([r.as_record() for r in rows])


def test_rows_of_keeps_the_compared_variants_and_derives_rates() -> None:
    rows = rows_of(tidy(_frame()))
    assert not ((rows["variant"] == "fused") & rows["case"].str.endswith("none")).any()
    tiled = rows[(rows["variant"] == "tiled") & (rows["backend"] == "numba")].set_index("tile")
    assert tiled.loc["128×128×64", "gflops"] == pytest.approx(80.0)
    assert tiled.loc["32×32×32", "intensity"] == pytest.approx(2 * N**3 / tiled.loc["32×32×32", "bytes_modeled"])


def test_section_says_what_tiling_bought_and_how_far_the_library_is() -> None:
    text = matmul_section(tidy(_frame()))
    line = next(s for s in text.splitlines() if "numba/cpu, float32, 512×512×512, none" in s)
    assert "tiled at its best tile (128×128×64) ran 80.0 GFLOP/s" in line
    assert "160× the speed of unblocked" in line and "40% of the library (numpy/cpu, 200.0 GFLOP/s)" in line
    fused = next(s for s in text.splitlines() if "512×512×512, bias_gelu" in s and "fused at" in s)
    assert "1.20× the speed of unfused" in fused and "30% of the library" in fused
    assert text.count("| 512×512×512, none | float32 | numba/cpu | tiled |") == len(TILES)


def test_charts_and_report_include_the_matmul_figures(tmp_path: Path) -> None:
    frame = _frame()
    charts = make_charts(frame, tmp_path / "charts")
    names = {p.name for p in charts}
    assert {"tile_sweep_matmul.png", "gflops_matmul.png", "roofline_matmul.png"} <= names
    assert all(p.stat().st_size > 10_000 for p in charts)
    report = write_report(frame, charts, tmp_path).read_text()
    assert "![tile sweep](charts/tile_sweep_matmul.png)" in report
    assert "### Tiling, fusion and the library" in report and "#### Tile sweep" in report
    assert json.loads(frame["params"].iloc[0])["tile"] == TILES[0]
