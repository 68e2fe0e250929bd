"""`hydra/launcher=slurm` against a real SLURM: a two-job sweep runs as a job array bound to one CPU per job and
merges into one table, `resume=true` skips the finished jobs, a job cancelled mid-sweep becomes `error` rows
while the others keep theirs and resume completes it, and a request SLURM refuses stops in one line before any
job is queued (or, refused only at submission, still merges). `nox -s slurm` brings up a single-node SLURM on
this machine (suite.sweep.cluster.local) and runs these; elsewhere they skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
PARTITION = os.environ.get("FUSEBENCH_SLURM_PARTITION")
pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(PARTITION is None, reason="needs a running SLURM: nox -s slurm brings one up on this machine"),
]
SWEEP = ["-m", "scenario.ops=[scale,gelu]", "preset=S", "backends=[numba]", "device=cpu", "timing=quick",
         "dtype=float32", "hydra/launcher=slurm", f"hydra.launcher.partition={PARTITION}",
         "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=2"]  # fmt: skip
"""Tiny jobs, one CPU and 2 GB each, so that two run side by side on a 2-core node."""


def suite(*args: str, path: str | None = None, wait: bool = True) -> subprocess.CompletedProcess | subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "PATH": path or os.environ["PATH"]}
    command = [sys.executable, "-m", "suite", *args]
    if not wait:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def queued() -> list[str]:
    return subprocess.run(["squeue", "-h", "-r", "-o", "%i"], capture_output=True, text=True).stdout.split()


def job(sweep: Path, num: int) -> dict:
    return json.loads((sweep / str(num) / "job.json").read_text())


def test_a_sweep_runs_as_a_job_array_one_cpu_per_job_merges_and_resume_skips_finished_jobs(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    done = suite(*SWEEP, "scenario.n=4096,65536", f"hydra.sweep.dir={sweep}")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = pd.read_csv(sweep / "results.csv")
    assert len(rows) == 4 and (rows["status"] == "ok").all() and (sweep / "report.md").exists()
    states = [job(sweep, n) for n in (0, 1)]
    assert [s["status"] for s in states] == ["done", "done"]
    assert len({s["slurm_job"].split("_")[0] for s in states}) == 1  # one job array
    for n in (0, 1):  # Numba's threads are the one CPU SLURM bound the job to, in the worker that timed
        cpu = json.loads((sweep / str(n) / "environment.json").read_text())["cpu"]
        assert cpu["usable_cpus"] == 1 and cpu["numba_threads"] == 1, cpu
    resumed = suite(*SWEEP, "scenario.n=4096,65536", f"hydra.sweep.dir={sweep}", "resume=true")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert [job(sweep, n) for n in (0, 1)] == states  # skipped, not rerun
    assert len(pd.read_csv(sweep / "results.csv")) == 4


def test_a_job_cancelled_mid_sweep_becomes_error_rows_the_others_keep_theirs_and_resume_completes_it(
    tmp_path: Path,
) -> None:
    sweep = tmp_path / "sweep"
    args = [*SWEEP, "scenario.n=4096,65536,1000", "hydra.launcher.array_parallelism=2", f"hydra.sweep.dir={sweep}"]
    started = time.monotonic()
    running = suite(*args, wait=False)
    while not (sweep / "1" / "job.json").exists():  # job 1 has begun its cases; job 2 waits for a free CPU
        assert running.poll() is None and time.monotonic() - started < 300, running.communicate()
        time.sleep(0.2)
    mine = [j for j in queued() if j.endswith(("_1", "_2"))]
    subprocess.run(["scancel", *mine], check=True)
    out, err = running.communicate(timeout=300)
    assert running.returncode != 0 and time.monotonic() - started < 240  # the wait ended, within bounds
    rows = pd.read_csv(sweep / "results.csv")
    kept, lost = rows[rows["run_id"] == "sweep/0"], rows[rows["run_id"] != "sweep/0"]
    assert len(kept) == 2 and (kept["status"] == "ok").all()
    assert len(lost) == 4 and (lost["status"] == "error").all(), lost[["run_id", "status", "reason"]]
    for n in (1, 2):
        reasons = lost.loc[lost["run_id"] == f"sweep/{n}", "reason"]
        assert reasons.str.contains(f"job {n} .* did not finish: it failed.*SLURM job \\d+_{n}").all(), reasons
    said = out + err
    assert "2 of 3 jobs did not finish" in said, said[-3000:]
    assert "hydra/launcher=slurm" in said.split("Complete it with:")[1]
    resumed = suite(*args, "resume=true")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    rows = pd.read_csv(sweep / "results.csv")
    assert len(rows) == 6 and (rows["status"] == "ok").all()


def test_a_request_the_partition_cannot_satisfy_is_one_line_before_any_job_is_queued(tmp_path: Path) -> None:
    before = queued()
    args = [a for a in SWEEP if not a.startswith(("hydra.launcher.cpus", "hydra.launcher.mem"))]
    refused = suite(*args, "scenario.n=4096,65536", f"hydra.sweep.dir={tmp_path / 'sweep'}")  # 8 CPUs, 64 GB
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.startswith("fusebench: error: hydra/launcher=slurm: SLURM would refuse 8 CPUs, 64 GB and "
                                     f"no GPU per job in partition {PARTITION} (")  # fmt: skip
    assert "its nodes have at most" in refused.stderr and "Traceback" not in refused.stderr
    assert queued() == before and not (tmp_path / "sweep").exists()


def test_a_submission_slurm_refuses_still_merges_its_rows_report_and_resume_command(tmp_path: Path) -> None:
    shim = tmp_path / "bin" / "sbatch"  # sbatch as a site's QOS limits make it: --test-only passes, submitting fails
    shim.parent.mkdir()
    real = subprocess.run(["which", "sbatch"], capture_output=True, text=True).stdout.strip()
    shim.write_text(f'#!/bin/sh\ncase " $* " in *" --test-only "*) exec {real} "$@";; esac\n'
                    'echo "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy" >&2\nexit 1\n')  # fmt: skip
    shim.chmod(0o755)
    sweep = tmp_path / "sweep"
    done = suite(
        *SWEEP, "scenario.n=4096,65536", f"hydra.sweep.dir={sweep}", path=f"{shim.parent}:{os.environ['PATH']}"
    )
    assert done.returncode != 0
    rows = pd.read_csv(sweep / "results.csv")
    assert len(rows) == 4 and (rows["status"] == "error").all()
    assert rows["reason"].str.endswith("it failed: SLURM refused the submission of the sweep's job array").all()
    assert (sweep / "report.md").exists() and (sweep / "reps.csv").exists()
    assert "Complete it with: python -m suite -m" in done.stdout and "hydra/launcher=slurm" in done.stdout
