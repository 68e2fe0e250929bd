"""A backend added from outside the tree: found through the `fusebench.backends` entry-point group, listed, its
option validated against its own schema, and given rows, numerics, charts and a report, with no file of `suite/`
knowing its name. Each step runs the real command line in a subprocess, as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
NAME = "plugged"


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    """An environment where a distribution declares `plugged = tests.plugins.plugged` in the entry-point group."""
    site = tmp_path_factory.mktemp("site")
    dist = site / "fusebench_plugged-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fusebench-plugged\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[fusebench.backends]\n{NAME} = tests.plugins.plugged\n")
    paths = [str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), "COLUMNS": "200"}


def suite(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "suite", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)  # fmt: skip


def test_suite_never_names_the_plugin():
    for path in (ROOT / "suite").rglob("*.py"):
        assert NAME not in path.read_text(encoding="utf-8"), path


def test_listed(env):
    result = suite(env, "list")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if NAME in line]
    assert any("elementwise_chain" in line and "native" in line for line in lines), result.stdout
    assert any("chunk" in line and "1..1048576" in line and "4096" in line for line in lines), result.stdout


def test_own_option_is_validated(env):
    result = suite(env, f"backend_options.{NAME}.chunk=0")
    assert result.returncode == 2
    assert result.stderr.strip() == f"fusebench: error: backend_options.{NAME}.chunk=0 must be an integer in 1..1048576"
    result = suite(env, f"backend_options.{NAME}.colour=1")
    assert result.returncode == 2 and f"unknown option backend_options.{NAME}.colour; valid: chunk" in result.stderr


def test_rows_numerics_charts_and_report(env, tmp_path):
    out = tmp_path / "run"
    result = suite(env, "preset=S", f"backends=[{NAME}]", "device=cpu", "timing=quick", "dtype=float32",
                   f"backend_options.{NAME}.chunk=1000", f"hydra.run.dir={out}")  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    rows = pd.read_csv(out / "results.csv")
    assert set(rows["backend"]) == {NAME} and set(rows["variant"]) == {"fused", "unfused"}
    assert (rows["status"] == "ok").all(), rows[["variant", "status", "reason"]]
    assert (rows["max_rel_err"] <= rows["tolerance"]).all() and (rows["bytes_modeled"] > 0).all()
    assert rows["time_ms"].notna().all() and rows.loc[rows["variant"] == "fused", "verdict"].notna().all()
    passes = {v: json.loads(e)["passes"] for v, e in zip(rows["variant"], rows["extra"], strict=True)}
    assert passes["fused"] == 1 and passes["unfused"] > 1  # the plug-in's Launch notes reach the row
    assert {p.name for p in (out / "charts").glob("*.png")} >= {
        "speedup_elementwise_chain.png",
        "time_vs_size_elementwise_chain.png",
        "bandwidth_elementwise_chain.png",
    }
    assert NAME in (out / "report.md").read_text(encoding="utf-8")
