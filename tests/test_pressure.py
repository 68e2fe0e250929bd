"""The report's resource-pressure section, on synthetic rows: spilling kernels are named with their verdict."""

from __future__ import annotations

import json

import pandas as pd

from suite.kit.tidy import tidy
from suite.report import pressure

PARAMS = json.dumps({"cols": 16384, "rows": 4096, "tile": 16384})


def _kernel(name: str, regs: int, spill: int, occupancy: float, threads: int = 64) -> dict:
    return {"name": name, "regs": regs, "spill_store_bytes": spill // 2, "spill_load_bytes": spill - spill // 2,
            "smem_bytes": 128, "occupancy": occupancy, "limiter": "registers", "threads": threads, "launches": 1,
            "local_bytes": spill}  # fmt: skip


def _rows(fused_spill: int, status: str = "ok") -> pd.DataFrame:
    fused = [_kernel("ln_fused", 255 if fused_spill else 134, fused_spill, 0.125 if fused_spill else 0.21875)]
    unfused = [_kernel("mean_step", 31, 0, 1.0), _kernel("scale_shift_step", 32, 0, 0.75)]
    base = {"scenario": "layernorm", "params": PARAMS, "dtype": "float32", "backend": "cupy", "device": "cuda",
            "status": status, "size": 16384}  # fmt: skip
    frame = pd.DataFrame([
        {**base, "variant": "fused", "extra": json.dumps({"kernels": fused})},
        {**base, "variant": "unfused", "extra": json.dumps({"kernels": unfused})},
        {**base, "device": "cpu", "backend": "numba", "variant": "fused", "extra": ""},
    ])  # fmt: skip
    return tidy(frame)


def _pairs(verdict: str, speedup: float) -> pd.DataFrame:
    return pd.DataFrame([{"params": PARAMS, "dtype": "float32", "impl": "cupy/cuda", "variant": "fused",
                          "baseline": "unfused", "verdict": verdict, "speedup": speedup}])  # fmt: skip


def test_a_spilling_fused_kernel_is_named_with_its_bytes_and_the_measured_verdict() -> None:
    text = pressure.section(_rows(5020), _pairs("loses", 0.8))
    lead = text.split("<details>")[0]
    assert "`ln_fused` spills 5,020 bytes per thread (255 registers, occupancy 12.5%)" in lead
    assert "the unfused kernels: at most 32 registers, no spills, occupancy ≥ 75%" in lead
    rows = _rows(5020)
    rows["extra"] = rows["extra"].str.replace('"occupancy": 0.75', '"occupancy": 1.0')
    assert "no spills, full theoretical occupancy." in pressure.section(rows, pd.DataFrame())
    assert "Measured: loses (0.80× against unfused)" in lead
    table = text.split("<details>")[1]
    assert table.count("| cols=16384, rows=4096, tile=16384 |") == 3  # every CUDA kernel, no CPU row
    assert "| `ln_fused` | 1 | 64 | 255 | 5,020 | 128 | 12.5% | registers |" in table


def test_untimed_rows_say_the_spill_comes_from_the_build() -> None:
    text = pressure.section(_rows(5020, status="skipped"), pd.DataFrame())
    assert "Not timed here (skipped)" in text and "Measured" not in text


def test_without_spills_the_lowest_occupancy_is_reported() -> None:
    text = pressure.section(_rows(0), _pairs("pays", 2.4))
    assert "No kernel spills. Lowest theoretical occupancy: 21.9% (`ln_fused`" in text
    assert "limited by registers" in text


def test_no_cuda_kernels_no_section() -> None:
    rows = _rows(0)
    assert pressure.section(rows[rows["device"] == "cpu"], pd.DataFrame()) == ""


def test_kernels_without_occupancy_still_get_their_table() -> None:
    rows = _rows(0)
    rows["extra"] = rows["extra"].str.replace('"occupancy": 0.21875', '"occupancy": null')
    rows["extra"] = rows["extra"].str.replace('"occupancy": 1.0', '"occupancy": null')
    rows["extra"] = rows["extra"].str.replace('"occupancy": 0.75', '"occupancy": null')
    text = pressure.section(rows, pd.DataFrame())
    assert text.split("\n\n")[1] == "No kernel spills." and "Every kernel (3 distinct builds)" in text
