"""The field's published figures live in one data file with their sources, and the check's summary puts each one
under its family, beside the row it describes, with what this GPU measured for that row."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from suite.core import scenario
from suite.gpu_check import anchors, bundle, stack


def test_every_anchor_names_a_registered_family_a_figure_and_its_source() -> None:
    found = anchors.load()
    assert {"rmsnorm", "softmax", "cross_entropy", "add_rmsnorm", "attention", "matmul"} <= {a["family"] for a in found}
    for a in found:
        assert a["family"] in scenario.discover() and a["kind"] in ("peak_share", "time_ms", "ratio")
        assert isinstance(a["figure"], float) and a["source"] and a["gpu"] and a["dtype"]
    (liger,) = [a for a in found if a["family"] == "add_rmsnorm"]
    assert (liger["figure"], liger["unfused_ms"], liger["params"]) == (0.184, 0.340, {"rows": 2048, "cols": 16384})


def row(family: str, backend: str, variant: str, time_ms: float, **extra: object) -> dict:
    """A timed forward row at the family's summary case in float16."""
    scn = scenario.get(family)
    params = {axis: 1 for axis in scn.axes} | scn.summary
    return {"scenario": family, "params": json.dumps(params, sort_keys=True), "dtype": "float16", "device": "cuda",
            "backend": backend, "variant": variant, "phase": "forward", "status": "ok", "time_ms": time_ms,
            "gbps": 3000.0, "pct_of_ceiling": 91.0, "size": scn.size(params), "baseline": "", "rival": "",
            "speedup": None, "speedup_lo": None, "speedup_hi": None, "rival_speedup": None, "rival_lo": None,
            "rival_hi": None} | extra  # fmt: skip


def test_the_summary_puts_each_anchor_beside_its_row() -> None:
    rows = pd.DataFrame(
        [row(f, "triton", "fused", 0.5) for f in ("rmsnorm", "softmax", "cross_entropy", "attention")]
        + [row("attention", "torch", "library", 0.4), row("add_rmsnorm", "liger", "library", 0.25)]
        + [row("matmul", "triton", "tiled", 1.2), row("matmul", "torch", "library", 1.0)]
    )
    text = bundle.summary(rows, peak_gbps=stack.peak_gbps({"mem_clock_max_mhz": 2619, "memory_bus_bits": 5120}))
    for a in anchors.load():
        (at,) = [i for i, line in enumerate(text) if line.startswith(f"    anchor  {a['name']}:")]
        header = max(i for i, line in enumerate(text[:at]) if line.startswith("  ") and not line.startswith("    "))
        assert text[header].split()[0] == a["family"], (a["name"], text[header])
        assert "no matching row" not in text[at] and anchors.describe(a) in text[at], text[at]
    joined = "\n".join(text)
    assert (
        "QuACK RMSNorm: 90% of peak HBM (H100 SXM (3.35 TB/s), bfloat16); here: triton 0.500 ms, 3000 GB/s (91% of this GPU's copy) (89% of its specified peak) float16"
        in joined
    )
    assert (
        "hand attention against SDPA: 1.00× the time of torch/library" in joined
        and "triton 1.25× (0.500 against 0.400 ms" in joined
    )
    assert "Liger fused add + RMSNorm: 0.184 ms against 0.34 ms unfused (H100, float32); here: liger 0.250 ms" in joined


def test_the_specified_peak_comes_from_the_memory_clock_and_bus_width() -> None:
    assert stack.peak_gbps({"mem_clock_max_mhz": 2619, "memory_bus_bits": 5120}) == pytest.approx(3352, rel=1e-3)
    assert stack.peak_gbps({"mem_clock_max_mhz": 2619}) is None
