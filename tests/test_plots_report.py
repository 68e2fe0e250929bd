"""Charts and report from a synthetic results table: files, tables, links and verdicts are there and right.

The synthetic table mimics a CPU-only run of elementwise_chain (Numba CPU timed; Triton emulated; CuPy
compile-only; a few failures) plus a made-up timed GPU backend on which the fused kernel clearly loses.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scenarios.elementwise_chain import ALL8, FLOPS
from suite.core.ledger import STORE_MODEL, stream_bytes
from suite.core.row import Row, params_json
from suite.kit.tidy import fmt_size, speedups, tidy
from suite.report.plots import make_charts
from suite.report.report import write_report

SIZES = [2**16, 2**18, 2**20, 2**22, 2**24]
CHAINS = [["gelu"], ["scale", "gelu"], ["scale", "shift", "tanh", "gelu"], ALL8]
CEILING = {"cpu": 20.0, "cuda": 4000.0}
PROVENANCE = {
    "device_name": "AMD EPYC 7B13 (2 cores)",
    "versions": json.dumps({"numba": "0.61.2", "numpy": "2.3.1", "python": "3.12.3"}),
    "git_rev": "abc1234",
    "command": "python -m suite scenario=elementwise_chain",
    "run_id": "synthetic",
}


def _time(n: int, s: int, ops: list[str], variant: str, device: str) -> float:
    """A plausible median in ms: each kernel pays a launch and the larger of its memory and compute times.

    Working sets under 32 MB run from cache at 6× the copy ceiling; float16 arithmetic is slow on the CPU.
    On the made-up GPU backend the fused kernel "spills" and runs far slower: a clear loss.
    """
    alloc = 3 if device == "cpu" else 2
    dram = 0.8 if variant == "fused" else 0.88  # the fused kernel streams a little less well
    bw = CEILING[device] * (6.0 if device == "cpu" and 2 * n * s < 32e6 else dram) * 1e6  # bytes per ms
    flop_rate = {"cpu": 30e6 if s == 4 else 10e6, "cuda": 5e9}[device]  # flops per ms
    launch = {"cpu": 0.002, "cuda": 0.004}[device]
    kernels = [ops] if variant == "fused" else [[op] for op in ops]
    total = sum(launch + max(alloc * n * s / bw, sum(FLOPS[op] for op in k) * n / flop_rate) for k in kernels)
    return total * (3.0 * len(ops) if device == "cuda" and variant == "fused" else 1.0)


def _row(n: int, ops: list[str], dtype: str, backend: str, device: str, variant: str, mode: str) -> Row:
    s = np.dtype(dtype).itemsize
    k = len(ops) if variant == "unfused" else 1
    model = STORE_MODEL[device]
    moved = k * stream_bytes(n, s, model)
    row = Row(
        scenario="elementwise_chain",
        params=params_json({"n": n, "ops": ops}),
        dtype=dtype,
        backend=backend,
        device=device,
        variant=variant,
        status="ok",
        mode=mode,
        size=n,
        bytes_modeled=moved,
        store_model=model,
        bytes_read=k * n * s,
        bytes_written=k * n * s,
        launches=k,
        max_rel_err=3e-7 if dtype == "float32" else 4e-4,
        intermediates_removed=len(ops) - 1 if variant == "fused" else 0,
        bytes_saved=2 * (len(ops) - 1) * n * s if variant == "fused" else 0,
        **PROVENANCE,
    )
    if mode == "native":
        t = _time(n, s, ops, variant, device)
        row.time_ms, row.time_q1_ms, row.time_q3_ms, row.reps = t, 0.97 * t, 1.04 * t, 50
        row.gbps, row.ceiling_gbps = moved / t / 1e6, CEILING[device]
        row.pct_of_ceiling = 100 * row.gbps / row.ceiling_gbps
    else:
        row.reason = {
            "emulated": "Triton interpreter: numerics only",
            "compile": "compiled for sm_90, not run",
        }[mode]
        row.status = "skipped" if mode == "compile" else row.status  # as the runner records NotRunnable
    return row


def synthetic() -> pd.DataFrame:
    rows = []
    impls = [("numba", "cpu", "native"), ("fakegpu", "cuda", "native"), ("triton", "cuda", "emulated")]
    impls.append(("cupy", "cuda", "compile"))
    for n in SIZES:
        for ops in CHAINS:
            for dtype in ("float32", "float16"):
                for backend, device, mode in impls:
                    if backend == "fakegpu" and dtype == "float16":
                        continue
                    rows += [_row(n, ops, dtype, backend, device, v, mode) for v in ("fused", "unfused")]
    bad = _row(2**20, ALL8, "float16", "numba", "cuda", "fused", "emulated")
    bad.status, bad.reason, bad.max_rel_err = "mismatch", "max_rel_err 3.1e-02 > tolerance 2.0e-03", 0.031
    err = _row(2**20, ["gelu"], "float32", "cupy", "cuda", "unfused", "compile")
    err.status, err.reason = "error", "NVRTC: identifier 'tanhf2' is undefined"
    skip = _row(2**24, ["gelu"], "float16", "numba", "cuda", "fused", "emulated")
    skip.status, skip.reason = "skipped", "CUDA simulator: n above emulation limit"
    return pd.DataFrame([r.as_record() for r in [*rows, bad, err, skip]])


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], str]:
    out = tmp_path_factory.mktemp("run")
    frame = synthetic()
    frame.to_csv(out / "results.csv", index=False)
    frame = pd.read_csv(out / "results.csv", dtype={"params": str, "reason": str})  # as a real run reads it
    charts = make_charts(frame, out / "charts")
    report = write_report(frame, charts, out)
    return charts, report.read_text(encoding="utf-8")


def test_charts_exist_and_are_not_trivial(written: tuple[list[Path], str]) -> None:
    charts, _ = written
    names = {p.name for p in charts}
    for kind in ("time_vs_size", "speedup", "bandwidth", "speedup_vs_chain"):
        assert f"{kind}_elementwise_chain.png" in names
    for path in charts:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert path.stat().st_size > 20_000


def test_report_has_provenance_tables_and_links(written: tuple[list[Path], str]) -> None:
    _, text = written
    assert "abc1234" in text and "AMD EPYC 7B13" in text and "numba 0.61.2" in text
    assert "write-allocate" in text and "write-once" in text
    assert "20.0 GB/s" in text  # the measured ceiling
    for heading in ("Speedup: measured vs predicted", "Timings", "Traffic ledger", "Rows that are not ok"):
        assert heading in text
    assert "| case | n | dtype |" in text
    assert "](charts/speedup_elementwise_chain.png)" in text
    assert "](charts/time_vs_size_elementwise_chain.png)" in text


def test_verdict_names_the_win_and_the_loss(written: tuple[list[Path], str]) -> None:
    _, text = written
    win = next(line for line in text.splitlines() if line.startswith("- **numba/cpu, float32"))
    assert "fused beat unfused at every size" in win and "predicted 8.0×" in win
    assert "served from cache" in win  # small sizes: the unfused kernels beat the DRAM copy ceiling
    loss = next(line for line in text.splitlines() if line.startswith("- **fakegpu/cuda, float32"))
    assert "fused lost to unfused at every size" in loss
    assert "limited by something other than memory traffic" in loss


def test_verdict_names_the_size_where_fusion_starts_paying(tmp_path: Path) -> None:
    rows = []
    for n, speedup in zip(SIZES, [1.0, 0.95, 1.05, 2.9, 3.1], strict=True):
        rows.append(_pair("unfused", speedup, 8 * n, n=n))
        rows.append(_pair("fused", 1.0, 2 * n, n=n))
    text = write_report(pd.DataFrame(rows), [], tmp_path).read_text(encoding="utf-8")
    line = next(line for line in text.splitlines() if line.startswith("- **numba/cpu, float32"))
    assert "fused beat unfused from n = 2²² up: 2.9–3.1×, against a predicted 4.0×" in line
    assert "below that it was neutral (0.95–1.05×)" in line
    assert "None: every row is ok." in text and "Nothing" not in text


def test_not_ok_rows_and_untimed_counts(written: tuple[list[Path], str]) -> None:
    _, text = written
    section = text.split("## Rows that are not ok", 1)[1]
    assert "mismatch" in section and "tolerance 2.0e-03" in section
    assert "error" in section and "tanhf2" in section and "skipped" in section
    emulated = 2 * len(SIZES) * len(CHAINS) * 2
    assert f"{emulated} emulated rows" in text and "not timed" in text
    assert f"{emulated + 1} compile-only rows" in text  # the NVRTC error row was compile-only too


def _pair(variant: str, time_ms: float, bytes_modeled: int, backend: str = "numba", n: int = 1024) -> dict:
    row = Row(
        "elementwise_chain",
        params_json({"n": n, "ops": ["scale", "gelu"]}),
        "float32",
        backend,
        "cpu",
        variant,
        "ok",
        time_ms=time_ms,
        bytes_modeled=bytes_modeled,
        size=n,
        mode="native",
    )
    return row.as_record()


def test_speedup_pairing_by_hand() -> None:
    frame = pd.DataFrame(
        [
            _pair("unfused", 6.0, 24_576),
            _pair("fused", 2.0, 12_288),
            _pair("library", 3.0, 12_288),
            _pair("fused", 1.0, 12_288, backend="other"),  # no unfused partner: no pair
            {**_pair("fused", 9.0, 12_288), "status": "mismatch"},  # not ok: never paired
        ]
    )
    pairs = speedups(tidy(frame)).set_index("variant")
    assert sorted(pairs.index) == ["fused", "library"]
    assert pairs.loc["fused", "speedup"] == pytest.approx(3.0)
    assert pairs.loc["library", "speedup"] == pytest.approx(2.0)
    assert pairs.loc["fused", "predicted"] == pytest.approx(2.0)
    assert pairs.loc["fused", "verdict"] == "pays"
    assert pairs.loc["fused", "series"] == "scale→gelu"


def test_sizes_print_as_people_read_them() -> None:
    assert fmt_size(2**20) == "2²⁰"
    assert fmt_size(65_000) == "65,000"


def test_another_scenario_reuses_the_charts(tmp_path: Path) -> None:
    """A scenario unknown here (size axis inferred), five cases, a library variant: no chain chart."""
    rows = []
    for cols in (256, 1024, 4096, 8192, 16384):
        for n_rows in (2**10, 2**12, 2**14):
            for variant, time_ms, passes in (("unfused", 3.0, 5), ("fused", 1.0, 2), ("library", 1.5, 2)):
                params = params_json({"rows": n_rows, "cols": cols})
                row = Row("rownorm_demo", params, "float32", "numba", "cpu", variant, "ok", mode="native")
                row.time_ms, row.bytes_modeled = time_ms * n_rows / 1024, passes * 4 * n_rows * cols
                row.gbps, row.ceiling_gbps, row.size = 10.0, 20.0, n_rows
                rows.append(row.as_record())
    frame = pd.DataFrame(rows)
    charts = make_charts(frame, tmp_path / "charts")
    names = ["bandwidth_rownorm_demo.png", "speedup_rownorm_demo.png", "time_vs_size_rownorm_demo.png"]
    assert sorted(p.name for p in charts) == names
    text = write_report(frame, charts, tmp_path).read_text(encoding="utf-8")
    assert "- **numba/cpu, float32, library** (cols=16384): library beat unfused at every size measured" in text
    assert "| case | rows | dtype |" in text


def test_nothing_timed_still_reports(tmp_path: Path) -> None:
    frame = synthetic()
    frame = frame[frame["mode"] != "native"]
    assert make_charts(frame, tmp_path / "charts") == []
    text = write_report(frame, [], tmp_path).read_text(encoding="utf-8")
    assert "Nothing was timed natively" in text and "## Rows that are not ok" in text
    assert make_charts(pd.DataFrame(columns=frame.columns), tmp_path / "empty") == []
