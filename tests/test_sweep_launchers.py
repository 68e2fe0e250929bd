"""A sweep run through Hydra's parallel launchers is the sweep run serially: the same rows, statuses and ledger
bytes in one merged table, with jobs that time on the CPU never overlapping; a job killed mid-run leaves the other
job's rows and an error row per case it did not write, and `resume=true` completes the sweep. Each test runs the
real command line in a subprocess (no SLURM here: submitit's local executor takes the same code path)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from suite.core.row import KEY

ROOT = Path(__file__).resolve().parent.parent
SWEEP = ["-m", "scenario.n=4096,65536", "scenario.ops=[scale,gelu]", "preset=S", "backends=[numba]", "device=cpu",
         "timing=quick", "dtype=float32"]  # fmt: skip
SAME = [*KEY, "status", "bytes_modeled", "bytes_read", "bytes_written", "launches"]
"""What must not depend on the launcher: which rows, their statuses and the ledger's bytes (times do)."""

pytest.importorskip("hydra_plugins.hydra_joblib_launcher", reason="the pool launcher needs .[pool]")
pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="submitit_local needs .[slurm]")


def suite(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", **(env or {})}
    return subprocess.run([sys.executable, "-m", "suite", *args], cwd=ROOT, env=environ, capture_output=True,
                          text=True, timeout=900)  # fmt: skip


def table(sweep: Path) -> pd.DataFrame:
    rows = pd.read_csv(sweep / "results.csv")
    return rows[SAME].astype(str).sort_values(list(KEY)).reset_index(drop=True)


@pytest.fixture(scope="module")
def serial(tmp_path_factory) -> Path:
    sweep = tmp_path_factory.mktemp("serial") / "sweep"
    done = suite(*SWEEP, f"hydra.sweep.dir={sweep}")
    assert done.returncode == 0, done.stderr[-3000:]
    return sweep


@pytest.mark.parametrize("launcher", [["hydra/launcher=pool", "hydra.launcher.n_jobs=2"], ["hydra/launcher=submitit_local"]],
                         ids=["pool", "submitit_local"])  # fmt: skip
def test_parallel_launchers_merge_into_the_serial_table(serial: Path, tmp_path: Path, launcher: list[str]) -> None:
    sweep = tmp_path / "sweep"
    done = suite(*SWEEP, *launcher, f"hydra.sweep.dir={sweep}")
    assert done.returncode == 0, done.stderr[-3000:]
    pd.testing.assert_frame_equal(table(sweep), table(serial))
    assert len(table(serial)) == 4 and (table(serial)["status"] == "ok").all()
    states = [json.loads((sweep / job / "job.json").read_text()) for job in ("0", "1")]
    assert [s["status"] for s in states] == ["done", "done"] and [s["job"] for s in states] == [0, 1]
    first, second = sorted(states, key=lambda s: s["started"])
    assert first["ended"] <= second["started"], "two jobs timing on the CPU overlapped"
    for job in ("0", "1"):  # every job kept its own rows, ids and report inputs
        rows = pd.read_csv(sweep / job / "results.csv")
        assert len(rows) == 2 and rows["row_id"].str.startswith(f"sweep/{job}#").all()
    assert (sweep / "report.md").exists() and (sweep / "results.parquet").exists()


def test_a_killed_job_keeps_the_other_jobs_rows_and_resume_completes_the_sweep(tmp_path: Path) -> None:
    sweep, trigger = tmp_path / "sweep", tmp_path / "doom"
    trigger.touch()
    args = ["-m", "scenario.n=4096,[1000,65536]", "scenario.ops=[scale,gelu]", "preset=S", "backends=[doomed]",
            "plugins=[tests.plugins.doomed]", "device=cpu", "timing=quick", "dtype=float32",
            "hydra/launcher=submitit_local", f"hydra.sweep.dir={sweep}"]  # fmt: skip
    env = {"FUSEBENCH_DOOM": str(trigger), "FUSEBENCH_DOOM_N": "65536"}
    killed = suite(*args, env=env)
    assert killed.returncode != 0 and not trigger.exists()
    rows = pd.read_csv(sweep / "results.csv")
    ok, lost = rows[rows["status"] == "ok"], rows[rows["status"] != "ok"]
    assert sorted(json.loads(p)["n"] for p in ok["params"]) == [
        1000,
        1000,
        4096,
        4096,
    ]  # job 0's and job 1's first case
    assert len(lost) == 2 and (lost["status"] == "error").all()
    assert {json.loads(p)["n"] for p in lost["params"]} == {65536}
    assert lost["reason"].str.contains("job 1 .* did not finish: its process .* ended without saying how").all()
    assert "resume=true" in killed.stdout and "1 of 2 jobs did not finish" in killed.stdout

    finished = (sweep / "0" / "job.json").read_text()
    resumed = suite(*args, "resume=true", env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert (sweep / "0" / "job.json").read_text() == finished  # the finished job was skipped, not rerun
    assert json.loads((sweep / "1" / "job.json").read_text())["status"] == "done"
    rows = pd.read_csv(sweep / "results.csv")
    assert len(rows) == 6 and (rows["status"] == "ok").all(), rows[["params", "status", "reason"]]
    assert rows["row_id"].is_unique
