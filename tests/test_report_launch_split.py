"""The report's split of fusion's gain into launch overhead and traffic, on synthetic CUDA rows with graph times.

The numbers are chosen so the split can be checked by hand: an unfused chain of three kernels and its fused
kernel, each timed launch by launch (time_ms) and from a CUDA graph (time_graph_ms), with a copy ceiling at which
the removed bytes take a round number of milliseconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from suite.core.row import Row, params_json
from suite.kit.tidy import tidy
from suite.report import launch_split
from suite.report.report import write_report

N = 2**20
OPS = ["scale", "shift", "gelu"]
SAVED = 2 * (len(OPS) - 1) * N * 4
"""Bytes fusion removes from the float32 chain: one write and one read per intermediate."""
CEILING = SAVED / 0.008 / 1e6
"""GB/s at which the removed bytes take exactly 0.008 ms."""
HEADING = "### Fusion's gain: launch overhead and traffic (CUDA graphs)"


def _row(variant: str, time_ms: float, graph_ms: float | None, n: int = N, **fields: object) -> dict:
    kernels = 1 if variant in ("fused", "compiled") else len(OPS)
    row = Row("elementwise_chain", params_json({"n": n, "ops": OPS}), "float32", fields.pop("backend", "cupy"),
              "cuda", variant, "ok", time_ms=time_ms, time_graph_ms=graph_ms, size=n, mode="native",
              bytes_modeled=2 * kernels * n * 4, launches=kernels, ceiling_gbps=CEILING * n / N)  # fmt: skip
    row.gbps = row.bytes_modeled / time_ms / 1e6
    for name, value in fields.items():
        setattr(row, name, value)
    return row.as_record()


def _frame(*rows: dict) -> pd.DataFrame:
    return pd.DataFrame(list(rows))


def test_split_by_hand() -> None:
    """gain 0.03 = launch 0.022 + with graphs 0.008; the bytes predict 0.008 at the ceiling."""
    found = launch_split.split(tidy(_frame(_row("unfused", 0.05, 0.02), _row("fused", 0.02, 0.012))))
    assert len(found) == 1
    pair = found.iloc[0]
    assert (pair["variant"], pair["baseline"]) == ("fused", "unfused")
    assert pair["gain_ms"] == pytest.approx(0.03)
    assert pair["launch_ms"] == pytest.approx(0.022)
    assert pair["graph_ms"] == pytest.approx(0.008)
    assert pair["launch_ms"] + pair["graph_ms"] == pytest.approx(pair["gain_ms"])
    assert pair["saved_bytes"] == SAVED
    assert pair["predicted_ms"] == pytest.approx(0.008)
    assert pair["realised"] == pytest.approx(1.0)


def test_launch_overhead_that_grows_with_fusion_is_negative() -> None:
    """A fused kernel whose own launch costs more than the three it replaced: the launch part is negative and
    the with-graphs part is more than the whole gain."""
    found = launch_split.split(tidy(_frame(_row("unfused", 0.05, 0.04), _row("fused", 0.03, 0.01))))
    assert found.iloc[0]["launch_ms"] == pytest.approx(-0.01)
    assert found.iloc[0]["graph_ms"] == pytest.approx(0.03)


def test_no_section_without_graph_timings(tmp_path: Path) -> None:
    frame = _frame(_row("unfused", 0.05, None), _row("fused", 0.02, None))
    assert launch_split.section(tidy(frame)) is None
    text = write_report(frame, [], tmp_path).read_text(encoding="utf-8")
    assert "launch overhead and traffic" not in text


def test_failed_rows_are_skipped() -> None:
    """A mismatching fused row is never paired, even with a graph time; the only graph times on failed rows: no
    section at all."""
    bad = _row("fused", 0.001, 0.0005, status="mismatch", reason="max_rel_err 1e-1 > tolerance 1e-5")
    good = _frame(_row("unfused", 0.05, 0.02), _row("fused", 0.02, 0.012), bad)
    found = launch_split.split(tidy(good))
    assert len(found) == 1 and found.iloc[0]["time_ms"] == pytest.approx(0.02)
    only_failed = _frame(_row("unfused", 0.05, None), bad)
    assert launch_split.section(tidy(only_failed)) is None


def test_a_pair_missing_a_graph_time_is_left_out_and_says_why() -> None:
    """One launcher not captured (NaN graph time, extra.graph saying why): its pair is not split; the section
    says so and names the reason, while another case's complete pair is split."""
    why = "not captured: CudaError: cuStreamEndCapture (the launcher did something a graph cannot hold)"
    frame = _frame(_row("unfused", 0.05, 0.02), _row("fused", 0.02, 0.012),
                   _row("unfused", 0.5, 0.45, n=2 * N), _row("fused", 0.2, float("nan"), n=2 * N, extra={"graph": why}),
                   _row("fused", 0.01, 0.005, backend="lonely"))  # fmt: skip
    found = launch_split.split(tidy(frame))
    assert found["size"].tolist() == [N]
    text = launch_split.section(tidy(frame))
    assert text is not None and why in text and "1 timed row has no graph time" in text
    nothing = launch_split.section(tidy(frame[frame["size"] == 2 * N]))
    assert nothing is not None and "No fusion pair has a graph time on both sides" in nothing


def test_only_fusion_pairs_are_split() -> None:
    """compiled against eager is fusion by a compiler and is split; library against unfused is not fusion."""
    frame = _frame(_row("unfused", 0.05, 0.02), _row("library", 0.02, 0.012), _row("eager", 0.06, 0.02, backend="torch"),
                   _row("compiled", 0.03, 0.015, backend="torch", baseline="eager"))  # fmt: skip
    found = launch_split.split(tidy(frame))
    assert list(zip(found["variant"], found["baseline"], strict=True)) == [("compiled", "eager")]


def test_which_share_dominates() -> None:
    """Small cases: launches are most of the gain; large ones: traffic. A pair that lost is counted apart."""
    small = _frame(_row("unfused", 0.05, 0.02), _row("fused", 0.02, 0.012),
                   _row("unfused", 0.06, 0.02, n=2 * N), _row("fused", 0.02, 0.01, n=2 * N))  # fmt: skip
    said = launch_split.dominant(launch_split.split(tidy(small)))
    assert said.startswith(
        "In elementwise_chain, launch overhead dominates fusion's gain: it is the larger part in 2 of"
    )
    assert "a median 1.1× what the removed bytes take at the copy ceiling" in said
    large = _frame(_row("unfused", 2.0, 1.99), _row("fused", 1.0, 0.99),
                   _row("unfused", 1.0, 0.9, n=2 * N), _row("fused", 1.2, 1.0, n=2 * N))  # fmt: skip
    said = launch_split.dominant(launch_split.split(tidy(large)))
    assert said.startswith("In elementwise_chain, traffic dominates fusion's gain: the part that remains with graphs")
    assert "1 of 1 pairs that gained (a median 100% of the gain)" in said
    assert said.endswith("fusion gained nothing in 1 of 2 pairs.")


def test_the_report_of_a_run_has_the_section(tmp_path: Path) -> None:
    """A small GPU run written to results.csv and read back as a real run is: its report carries the split."""
    rows = [_row("unfused", 0.05, 0.02), _row("fused", 0.02, 0.012),
            _row("unfused", 0.06, 0.02, n=2 * N), _row("fused", 0.02, 0.01, n=2 * N)]  # fmt: skip
    for r in rows:
        r.update(versions=json.dumps({"cupy": "13.4"}), git_rev="abc1234", run_id="synthetic")
    pd.DataFrame(rows).to_csv(tmp_path / "results.csv", index=False)
    frame = pd.read_csv(tmp_path / "results.csv", dtype={"params": str, "reason": str})
    text = write_report(frame, [], tmp_path).read_text(encoding="utf-8")
    assert HEADING in text
    assert text.index("### Crossover") < text.index(HEADING) < text.index("### Charts")
    assert "In elementwise_chain, launch overhead dominates fusion's gain" in text
    row = "| scale→shift→gelu | 2²⁰ | float32 | cupy/cuda | fused vs unfused | time_ms | 0.05 | 0.02 | 0.02 | 0.012 | 0.03 |"
    assert row + " 0.022 (73%) | 0.008 (27%) | 0.008 | 1× |" in text


def test_the_paced_window_carries_the_launch_part() -> None:
    """Rows timed as a GPU run now times them: time_ms behind a spin (GPU time, so time_ms - time_graph_ms is
    near zero) and extra.time_paced_ms with the GPU waiting on the host. The split uses the paced window, so
    the launch part is what the host's enqueues cost: (0.05 - 0.02) - (0.02 - 0.012) = 0.022, not the ~0 that
    time_ms would give."""
    frame = _frame(_row("unfused", 0.0205, 0.02, extra={"time_paced_ms": 0.05}),
                   _row("fused", 0.0121, 0.012, extra={"time_paced_ms": 0.02}))  # fmt: skip
    pair = launch_split.split(tidy(frame)).iloc[0]
    assert pair["host"] == "paced"
    assert pair["gain_ms"] == pytest.approx(0.03)
    assert pair["launch_ms"] == pytest.approx(0.022)
    assert pair["graph_ms"] == pytest.approx(0.008)
    spun = launch_split.split(tidy(_frame(_row("unfused", 0.0205, 0.02), _row("fused", 0.0121, 0.012)))).iloc[0]
    assert spun["host"] == "time_ms" and abs(spun["launch_ms"]) < 0.001
