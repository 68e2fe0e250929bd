"""The report's figures say what they are: a compiled variant's prediction counts the buffers its generated code
kept, and the first screen has no blank library column."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from suite.kit.tidy import kept_bytes, speedups, tidy
from suite.report import glance

PARAMS = '{"cols": 4096, "rows": 1024}'


def _row(variant: str, backend: str, time_ms: float, bytes_modeled: float, **more: object) -> dict:
    return {"scenario": "swiglu", "params": PARAMS, "dtype": "float32", "backend": backend, "device": "cpu",
            "variant": variant, "status": "ok", "mode": "native", "time_ms": time_ms, "size": 4096,
            "bytes_modeled": bytes_modeled, "baseline": "eager" if variant == "compiled" else "", **more}  # fmt: skip


def test_a_compiled_variant_is_predicted_with_the_buffers_it_kept() -> None:
    n = 1024 * 4096
    kept = json.dumps({"compiler": {"buffer_elements": 2 * n}})
    rows = pd.DataFrame(
        [_row("eager", "torch", 3.0, 12 * n * 4), _row("compiled", "torch", 2.0, 4 * n * 4, extra=kept)]
    )
    pair = speedups(tidy(rows)).iloc[0]
    assert pair["variant"] == "compiled"
    assert pair["predicted"] == 12 / (4 + 2 * 3)  # two kept buffers, written (allocate-read first) and read once
    clean = pd.DataFrame([_row("eager", "torch", 3.0, 12 * n * 4), _row("compiled", "torch", 2.0, 4 * n * 4)])
    assert speedups(tidy(clean)).iloc[0]["predicted"] == 3.0


def test_kept_bytes_follow_the_store_model() -> None:
    info = {"compiler": {"buffer_elements": 10}}
    assert kept_bytes(info, "float32", "write-allocate") == 120
    assert kept_bytes(info, "bfloat16", "write-once") == 40
    assert kept_bytes({}, "float32", "write-once") == 0
    older = {"compiler": {"full_size_intermediates": 2, "largest_intermediate": [2, 5]}}  # no buffer_elements yet
    assert kept_bytes(older, "float32", "write-once") == 2 * 5 * 4 * 2  # the largest buffer alone: a lower bound
    assert kept_bytes({"compiler": {"largest_intermediate": []}}, "float32", "write-once") == 0


def _glance(with_library: bool) -> str:
    rows = [_row("fused", "numba", 1.0, 1e6), _row("unfused", "numba", 2.0, 2e6, speedup=None)]
    rows += [_row("library", "torch", 1.5, 1e6)] if with_library else []
    text = glance.section(tidy(pd.DataFrame(rows)))
    assert text is not None
    return text


def test_the_library_column_is_there_only_where_a_library_op_was_timed() -> None:
    without = _glance(False)
    assert "time vs library" not in without and "no library op was timed in this run" in without
    assert without.splitlines()[-3].endswith("| memory vs unfused |")  # no rival timed either: no blank column
    assert "torch.compile was not timed in this run" in without
    assert _glance(True).endswith("| 1.50× |")  # the library's median over the fused kernel's


def test_the_reproduce_line_starts_with_what_ran() -> None:
    from suite.report.report import sections

    skipped = _row("fused", "cupy", None, 1e6, device="cuda", status="skipped", mode="compile",
                   command="python -m suite 'backends=[cupy]' device=cuda")  # fmt: skip
    ran = _row("fused", "numba", 1.0, 1e6, command="python -m suite 'backends=[numba]' device=cpu")
    text = "\n".join(sections(pd.DataFrame([skipped, ran]), [], Path("/nonexistent")))
    line = next(line for line in text.splitlines() if line.startswith("- reproduce:"))
    assert line == "- reproduce: `python -m suite 'backends=[numba]' device=cpu`"
    nothing_ran = "\n".join(sections(pd.DataFrame([skipped]), [], Path("/nonexistent")))
    assert "- reproduce: `python -m suite 'backends=[cupy]' device=cuda`" in nothing_ran
