"""Hand fusion against the compiler in the report: the section's verdicts and wording, and the chart's file.

The synthetic table is one made-up scenario (size axis inferred: cols) on one device, two sizes and two dtypes:
a hand-fused kernel paired with the compiled variant (rival columns set), its unfused partner, and the compiled,
library and eager variants of another backend. The float16 case at the larger size loses to the compiler, whose
kernel there left a full-size intermediate behind.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from suite.core.row import Row, params_json
from suite.kit.tidy import tidy, timed
from suite.report import rivals
from suite.report.plots import make_charts
from suite.report.report import write_report
from suite.report.rival_chart import normalised

SCENARIO = "rivaldemo"
SIZES = (1024, 4096)
DTYPES = ("float32", "float16")
RIVAL = {  # (size, dtype) -> rival_speedup, lo, hi, verdict of the hand-fused kernel over the compiler
    (1024, "float32"): (1.35, 1.30, 1.41, "pays"),
    (4096, "float32"): (1.01, 0.99, 1.03, "neutral"),
    (1024, "float16"): (2.5, 2.4, 2.6, "pays"),
    (4096, "float16"): (0.85, 0.80, 0.90, "loses"),
}
ONE_KERNEL = {"kernels": 1, "generated": ["cpp_fused_0"], "extern": [], "full_size_intermediates": 0,
              "largest_intermediate": [64], "cache": "cold", "mode": "default", "dynamic": False,
              "first_call_s": 2.5, "graphs": 1}  # fmt: skip
THREE_KERNELS = {**ONE_KERNEL, "kernels": 3, "generated": ["triton_red_0"], "cache": "warm",
                 "extern": ["extern_kernels.mm", "extern_kernels.bmm"], "full_size_intermediates": 1,
                 "largest_intermediate": [1, 4, 2048, 2048]}  # fmt: skip


def _row(cols: int, dtype: str, backend: str, variant: str, time_ms: float, **fields: object) -> dict:
    params = params_json({"rows": 64, "cols": cols})
    row = Row(SCENARIO, params, dtype, backend, "cpu", variant, "ok", mode="native", size=cols, **fields)
    row.time_ms, row.time_q1_ms, row.time_q3_ms, row.reps = time_ms, 0.95 * time_ms, 1.05 * time_ms, 20
    row.bytes_modeled = (2 if variant == "fused" else 6) * 64 * cols * 4
    return row.as_record()


def synthetic(cases: tuple[int, ...] = SIZES) -> pd.DataFrame:
    rows = []
    for cols in cases:
        for dtype in DTYPES:
            speedup, lo, hi, said = RIVAL.get((cols, dtype), (1.5, 1.4, 1.6, "pays"))
            compiled = 0.01 * cols / 1024
            paired = {"rival_speedup": speedup, "rival_lo": lo, "rival_hi": hi, "rival_verdict": said}
            rows.append(_row(cols, dtype, "hand", "fused", compiled / speedup, rival="torch/compiled", **paired))
            rows.append(_row(cols, dtype, "hand", "unfused", 2 * compiled))
            info = THREE_KERNELS if cols == 4096 else ONE_KERNEL
            rows.append(_row(cols, dtype, "torch", "compiled", compiled, extra={"compiler": info}, compile_ms=2500.0))
            rows.append(_row(cols, dtype, "torch", "library", 0.8 * compiled))
            rows.append(_row(cols, dtype, "torch", "eager", 3 * compiled))
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def text() -> str:
    found = rivals.section(tidy(synthetic()))
    assert found is not None
    return found


def _line(text: str, *words: str) -> str:
    return next(line for line in text.splitlines() if all(w in line for w in words))


def test_every_pair_carries_its_verdict_and_interval(text: str) -> None:
    assert text.startswith("### Hand fusion against the compiler")
    assert "#### cpu, float32" in text and "#### cpu, float16" in text
    head = _line(text, "| case | cols |")
    for column in ("hand/cpu fused ms", "torch/compiled ms", "torch/library ms", "torch/eager ms",
                   "hand/cpu fused vs torch/compiled", "what torch/compiled made"):  # fmt: skip
        assert column in head
    assert "pays 1.35× [1.30–1.41]" in text
    assert "neutral 1.01× [0.99–1.03]" in text
    assert "pays 2.50× [2.40–2.60]" in text
    assert text.count("| rows=64 |") == len(SIZES) * len(DTYPES)


def test_a_losing_case_says_it_loses(text: str) -> None:
    float16 = text.split("#### cpu, float16", 1)[1]
    assert "loses 0.85× [0.80–0.90]" in _line(float16, "| rows=64 | 2¹² |")
    bullet = _line(text, "- **hand/cpu, float16**")
    assert "hand fusion beat torch/compiled in 1 of 2 cases (2.5×)" in bullet and "lost in 1 (0.85×)" in bullet
    bullet = _line(text, "- **hand/cpu, float32**")
    assert "in 1 of 2 cases (1.35×)" in bullet and "was neutral in 1 (1.01×)" in bullet


def test_what_the_compiler_made_comes_from_the_extra(text: str) -> None:
    assert _line(text, "| rows=64 | 2¹⁰ |").endswith("| 1 kernel; first call 2.5 s |")
    made = "3 kernels (2 library calls); kept 1 full-size intermediate 1×4×2048×2048; first call 2.5 s (warm cache)"
    assert _line(text, "| rows=64 | 2¹² |").endswith(f"| {made} |")
    many = {**THREE_KERNELS, "full_size_intermediates": 2, "cache": "cold", "graphs": 2}
    said = "3 kernels (2 library calls); kept 2 full-size intermediates (largest 1×4×2048×2048)"
    assert rivals.describe(many) == said + "; 2 graphs (graph breaks); first call 2.5 s"


def test_no_section_without_a_rival() -> None:
    frame = synthetic()
    for col in ("rival", "rival_verdict"):
        frame[col] = ""
    frame[["rival_speedup", "rival_lo", "rival_hi"]] = None
    assert rivals.section(tidy(frame)) is None
    assert rivals.section(tidy(frame.drop(columns=["rival", "rival_speedup"]))) is None  # an older table


def test_long_tables_fold() -> None:
    sizes = tuple(2**k for k in range(4, 17))
    found = rivals.section(tidy(synthetic(sizes)))
    assert found is not None and found.count(f"<details><summary>{len(sizes)} cases</summary>") == len(DTYPES)


def test_chart_divides_by_the_compiler() -> None:
    ratios = normalised(timed(tidy(synthetic())))
    assert "compiled" not in set(ratios["variant"])
    by = ratios.set_index(["size", "dtype", "impl", "variant"])["ratio"]
    assert by[(1024, "float32", "torch/cpu", "eager")] == pytest.approx(3.0)
    assert by[(1024, "float32", "hand/cpu", "fused")] == pytest.approx(1 / 1.35)


def test_chart_and_report_when_the_compiler_was_timed(tmp_path: Path) -> None:
    frame = synthetic()
    charts = make_charts(frame, tmp_path / "charts")
    chart = tmp_path / "charts" / f"vs_compiler_{SCENARIO}.png"
    assert chart in charts and chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = write_report(frame, charts, tmp_path).read_text(encoding="utf-8")
    verdict, after = report.split("### Verdict", 1)[1].split("### Hand fusion against the compiler", 1)
    assert "### Speedup" not in verdict and "### Speedup" in after
    assert f"](charts/vs_compiler_{SCENARIO}.png)" in report


def test_no_chart_without_the_compiler(tmp_path: Path) -> None:
    frame = synthetic()
    frame = frame[frame["variant"] != "compiled"]
    charts = make_charts(frame, tmp_path / "charts")
    assert charts and not (tmp_path / "charts" / f"vs_compiler_{SCENARIO}.png").exists()
    assert not any(p.name.startswith("vs_compiler") for p in charts)
