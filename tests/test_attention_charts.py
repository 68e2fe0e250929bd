"""Attention's own charts draw every variant a run timed, the torch eager and compiled rows included."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from scenarios.attention import charts
from suite.core import scenario as scenarios
from suite.core.row import Row, params_json

VARIANTS = {"numba": ("fused", "unfused"), "torch": ("library", "eager", "compiled"), "plugin": ("own",)}


def _frame() -> pd.DataFrame:
    rows = []
    for seq_len in (256, 512):
        params = {"batch": 1, "heads": 2, "seq_len": seq_len, "head_dim": 64, "causal": False,
                  "block_m": 64, "block_n": 64}  # fmt: skip
        for backend, variants in VARIANTS.items():
            for variant in variants:
                row = Row("attention", params_json(params), "float32", backend, "cpu", variant, "ok", mode="native",
                          size=seq_len, reason="", store_model="write-once")  # fmt: skip
                row.time_ms, row.reps = 1.0 + seq_len / 256, 5
                row.bytes_modeled = (3 if variant in ("unfused", "eager", "own") else 1) * 4 * seq_len * 64 * 4
                row.flops_modeled = 4 * 2 * seq_len * seq_len * 64
                rows.append(row.as_record())
    return pd.DataFrame(rows)


def test_traffic_chart_draws_the_compiler_and_a_plugin_variant(tmp_path: Path) -> None:
    scn = scenarios.get("attention")
    made = charts.traffic_chart(_frame(), tmp_path, scn)
    assert [p.name for p in made] == ["traffic_attention.png"]
    assert made[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
