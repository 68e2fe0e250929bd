"""`python -m suite report`: one run rebuilt as the run wrote it; several merged, labelled by what tells them apart.

The runs are synthetic results tables with the real column set (suite.core.row), written to tmp_path as a run
writes them, with the paired verdicts set by hand so each test knows which labels should agree; one test merges
a committed GPU run (results/h200_matmul/g3a, an older table without row ids) through a subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from suite.cli import main as cli_main
from suite.core.row import COLUMNS, Row, params_json
from suite.report import facets, merged
from suite.run.result import Result
from suite.sweep.merge import finalize

ROOT = Path(__file__).resolve().parent.parent
SIZES = [2**16, 2**18, 2**20]
PAYS, LOSES = {2**16: 1.5, 2**18: 2.0, 2**20: 3.0}, {2**16: 1.5, 2**18: 2.0, 2**20: 0.5}
"""Speedups of the fused kernel per size: both runs pay at the small sizes; LOSES loses at the largest."""


def _rows(speedups: dict[int, float], device_name: str, git_rev: str, run_id: str) -> list[Row]:
    rows = []
    for n in SIZES:
        for variant in ("unfused", "fused"):
            base = 0.001 * n / 2**10
            t = base / speedups[n] if variant == "fused" else base
            moved = 8 * n if variant == "fused" else 16 * n
            row = Row(scenario="elementwise_chain", params=params_json({"n": n, "ops": ["scale", "gelu"]}),
                      dtype="float32", backend="numba", device="cpu", variant=variant, status="ok", mode="native",
                      size=n, time_ms=t, time_q1_ms=0.98 * t, time_q3_ms=1.02 * t, reps=20, bytes_modeled=moved,
                      bytes_read=moved // 2, bytes_written=moved // 2, store_model="write-allocate",
                      launches=1 if variant == "fused" else 2, gbps=moved / t / 1e6, ceiling_gbps=20.0,
                      max_rel_err=1e-7, device_name=device_name, git_rev=git_rev, run_id=run_id,
                      command="python -m suite scenario=elementwise_chain", versions='{"numba": "0.61.2"}')  # fmt: skip
            if variant == "fused":
                s = speedups[n]
                row.baseline, row.speedup, row.speedup_lo, row.speedup_hi = "unfused", s, 0.97 * s, 1.03 * s
                row.verdict = "pays" if s > 1.05 else "loses" if s < 0.95 else "neutral"
            rows.append(row)
    for i, row in enumerate(rows):
        row.row_id = f"{run_id}#{i}"
    return rows


def write_run(directory: Path, speedups: dict[int, float], device_name: str, git_rev: str) -> Path:
    """A finished run's directory as the runner leaves it: results.csv (the real columns, in order)."""
    directory.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame([r.as_record() for r in _rows(speedups, device_name, git_rev, directory.name)])
    assert list(frame.columns) == COLUMNS
    frame.to_csv(directory / "results.csv", index=False)
    return directory


def _report(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as stop:
        cli_main(["report", *argv])
    out, err = capsys.readouterr()
    return int(stop.value.code), out, err


def _headings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("#")]


def test_one_run_rebuilt_as_finalize_made_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    made = write_run(tmp_path / "made", PAYS, "AMD EPYC", "abc1234")
    gpu = {"name": "NVIDIA H200", "uuid": "GPU-1", "temperature_c": 40}  # the provenance line reads it from disk
    (made / "environment.json").write_text(json.dumps({"nvml": {"start": gpu, "end": {**gpu, "temperature_c": 47}}}))
    finalize(Result.read(made))
    capsys.readouterr()  # finalize's summary of the run
    rebuilt = tmp_path / "rebuilt"
    shutil.copytree(made, rebuilt, ignore=shutil.ignore_patterns("charts", "report.md"))
    code, out, err = _report([str(rebuilt)], capsys)
    assert (code, err) == (0, "")
    assert str(rebuilt / "report.md") in out
    expected = (made / "report.md").read_text(encoding="utf-8")
    assert (rebuilt / "report.md").read_text(encoding="utf-8") == expected
    assert "## elementwise_chain" in _headings(expected) and "NVIDIA H200 `GPU-1`" in expected
    charts = sorted(p.name for p in (made / "charts").iterdir())
    assert "speedup_elementwise_chain.png" in charts
    assert sorted(p.name for p in (rebuilt / "charts").iterdir()) == charts

    elsewhere = tmp_path / "elsewhere"  # --out: the same report, beside a copy of the table it cites
    assert _report([str(made), "--out", str(elsewhere)], capsys)[0] == 0
    assert (elsewhere / "report.md").read_text(encoding="utf-8") == expected
    assert (elsewhere / "results.csv").read_bytes() == (made / "results.csv").read_bytes()
    assert len(pd.read_parquet(elsewhere / "results.parquet")) == 2 * len(SIZES)


@pytest.fixture(scope="module")
def two_devices(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("devices")
    cpu = write_run(root / "cpu_run", PAYS, "AMD EPYC", "abc1234")
    gpu = write_run(root / "gpu_run", LOSES, "NVIDIA H200", "abc1234")
    assert merged.main([str(cpu), str(gpu), "--out", str(root / "out")]) == 0
    return root / "out"


def test_devices_merge_with_the_device_as_facet(two_devices: Path) -> None:
    table = pd.read_csv(two_devices / "results.csv")
    assert table.groupby(facets.FACET).size().to_dict() == {"AMD EPYC": 6, "NVIDIA H200": 6}
    assert list(table.columns[: len(COLUMNS)]) == COLUMNS
    assert {Path(p).name for p in table[merged.SOURCE]} == {"cpu_run", "gpu_run"}
    typed = pd.read_parquet(two_devices / "results.parquet")
    assert typed["param_n"].dtype == "Int64" and set(typed[facets.FACET]) == {"AMD EPYC", "NVIDIA H200"}
    for folder in ("amd-epyc", "nvidia-h200"):
        assert (two_devices / "charts" / folder / "speedup_elementwise_chain.png").stat().st_size > 0


def _side_by_side(report: str) -> list[list[str]]:
    part = report.split("## Verdicts side by side", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in part.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines]


def test_side_by_side_holds_both_verdicts_and_flags_where_they_differ(two_devices: Path) -> None:
    report = (two_devices / "report.md").read_text(encoding="utf-8")
    head, _, *body = _side_by_side(report)
    assert head[-3:] == ["AMD EPYC", "NVIDIA H200", "where they differ"]
    by_size = {row[2]: row for row in body}
    assert len(body) == len(SIZES) == len(by_size)
    assert by_size["n = 2²⁰"][-3:] == ["pays 3.0×", "loses 0.50×", "verdict: pays on AMD EPYC, loses on NVIDIA H200"]
    assert by_size["n = 2¹⁸"][-3:] == ["pays 2.0×", "pays 2.0×", ""]
    assert "The labels differ on 1 of them." in report
    # each label's part is its own report: its verdicts from its rows only, its charts from its folder
    cpu, gpu = report.split("\n## AMD EPYC\n", 1)[1].split("\n## NVIDIA H200\n", 1)
    assert "#### Verdict" in cpu and "charts/amd-epyc/speedup_elementwise_chain.png" in cpu
    assert "charts/nvidia-h200/speedup_elementwise_chain.png" in gpu and "amd-epyc" not in gpu
    assert "0.50×" not in cpu.split("#### Timings")[0] and "0.50×" in gpu
    assert "comes from the rows of `results.csv` labelled NVIDIA H200: 6 rows" in gpu


def test_same_device_different_revision_labels_by_revision(tmp_path: Path) -> None:
    old = write_run(tmp_path / "old", PAYS, "AMD EPYC", "1111111")
    new = write_run(tmp_path / "new", LOSES, "AMD EPYC", "2222222")
    assert merged.main([str(old), str(new), "--out", str(tmp_path / "out")]) == 0
    table = pd.read_csv(tmp_path / "out" / "results.csv", dtype=str)
    assert set(table[facets.FACET]) == {"1111111", "2222222"}
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "with the revision it came from" in report
    assert _side_by_side(report)[0][-3:] == ["1111111", "2222222", "where they differ"]


def test_facet_choice_and_run_names(tmp_path: Path) -> None:
    """auto: device before revision before run; two runs named alike are told apart by their parents."""
    a = write_run(tmp_path / "sweep_a" / "0", PAYS, "AMD EPYC", "1111111")
    b = write_run(tmp_path / "sweep_b" / "0", PAYS, "AMD EPYC", "1111111")
    runs = merged.load_runs([str(a), str(b), str(a)])
    assert len(runs) == 2
    assert facets.choose(runs, "auto") == ("run", ["sweep_a/0", "sweep_b/0"])
    assert facets.choose(runs, "device") == ("device", ["AMD EPYC", "AMD EPYC"])
    assert merged.main([str(a), str(b), "--facet", "device", "--out", str(tmp_path / "pooled")]) == 0
    head, _, *body = _side_by_side((tmp_path / "pooled" / "report.md").read_text(encoding="utf-8"))
    assert head[-2:] == ["AMD EPYC", "where they differ"] and len(body) == len(SIZES)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["{tmp}/nope"], "no run at {tmp}/nope"),
        ([], "report needs at least one RUN"),
        (["{tmp}", "--facet", "gpu"], "invalid choice: 'gpu'"),
        (["{tmp}/a", "{tmp}/b", "--out", "{tmp}/a"], "--out {tmp}/a is one of the runs merged"),
    ],
    ids=["missing-run", "no-run", "bad-facet", "out-is-a-run"],
)
def test_bad_input_is_one_line_exit_2(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tables = {name: write_run(tmp_path / name, PAYS, "AMD EPYC", "abc1234") / "results.csv" for name in "ab"}
    before = {name: path.read_bytes() for name, path in tables.items()}
    code, out, err = _report([a.format(tmp=tmp_path) for a in argv], capsys)
    assert code == 2 and out == ""
    assert err.startswith("fusebench: error: ") and err.count("\n") == 1
    assert says.format(tmp=tmp_path) in err
    assert {name: path.read_bytes() for name, path in tables.items()} == before  # nothing written over a run
    assert "--facet" not in argv or all(choice in err for choice in facets.CHOICES)  # valid choices named


def test_command_line_merges_a_committed_gpu_run(tmp_path: Path) -> None:
    cpu = write_run(tmp_path / "cpu_run", PAYS, "AMD EPYC", "abc1234")
    gpu = ROOT / "results" / "h200_matmul" / "g3a"
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "suite", "report", str(cpu), str(gpu), "--out", str(out)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"report: {out / 'report.md'}" in done.stdout
    report = (out / "report.md").read_text(encoding="utf-8")
    head = _side_by_side(report)[0]
    assert head[-3:] == ["AMD EPYC", "NVIDIA H200", "where they differ"]
    assert "## NVIDIA H200" in report and "### matmul" in report
    assert (out / "charts" / "nvidia-h200" / "speedup_matmul.png").exists()
