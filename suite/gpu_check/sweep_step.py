"""The check's sweep: every family's cases in one worker process, into one table.

One worker for the whole sweep, where a Hydra multirun starts one per job: the ceiling is measured once per
device, Numba's and Triton's JIT caches and torch.compile's compiled graphs stay warm from family to family,
and the kernels a case compiled are not compiled again by another process (the worker restarts only after a
crash, and is handed the ceilings). Inductor's on-disk cache is one folder for the check
(TORCHINDUCTOR_CACHE_DIR), so even a restarted worker reuses it. torch.compile is built at each family's
summary case only (`plan.RARE`): elsewhere its rows are `skipped` with that reason, not absent. Each case's rows
are appended as they come; a case that fails is rows with status and reason, and the sweep goes on.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import TextIO

import pandas as pd

from suite.cli import compose_jobs
from suite.core.row import Row
from suite.gpu_check import plan as check_plan
from suite.kit import store
from suite.run import result_rows, runner, validate
from suite.run.job import Case, Job
from suite.run.results import Table, read
from suite.run.stages import Check, Stages
from suite.run.worker import Settings, Worker, WorkerLost


def run_sweep(jobs: list[list[str]], outdir: Path, log: TextIO) -> pd.DataFrame:
    """Every job's cases in one worker; the table of all their rows (results.csv, reps and parquet in outdir)."""
    configs = [cfg for overrides in jobs for cfg in compose_jobs(overrides)]
    plans = [validate.plan(cfg) for cfg in configs]
    devices = sorted({t for p in plans for t in p.targets})
    table = Table(outdir, fresh=True, run_id=outdir.name)
    worker = Worker(Settings(emulate=False, devices=devices))
    try:
        (outdir / "ceilings.json").write_text(
            json.dumps({d: vars(c) for d, c in worker.info["ceilings"].items()}, indent=2) + "\n"
        )
        store.write_environment(outdir, worker.info["environment"])
        for cfg, plan in zip(configs, plans, strict=True):
            summary = check_plan.summary_case(plan.scenario, plan.cases, plan.dtypes)
            for whole in runner.jobs(cfg, plan, outdir, set(), outdir.name):
                job, left_out = narrowed(whole, check_plan.rare_skip(plan.scenario, whole.params, whole.dtype, summary))
                started = time.monotonic()
                try:
                    rows = worker.run(job, float(cfg.timing.case_timeout_s)) if job.impls() else []
                except WorkerLost as exc:  # lost while timing: the case cannot be attributed to one kernel
                    rows = result_rows.lost(job, str(exc))
                rows += left_out
                for row in rows:
                    table.append(row)
                bad = sum(r.status in ("error", "mismatch") for r in rows)
                log.write(
                    f"{job.scenario} {json.dumps(job.params)} {job.dtype}: {len(rows)} rows, {bad} failed, "
                    f"{time.monotonic() - started:.1f} s\n"
                )
                log.flush()
    finally:
        worker.close()
        table.close()
        store.write_parquet(outdir)
    return read(table.path)


def narrowed(job: Job, skip: set[tuple[str, str, str]]) -> tuple[Job, list[Row]]:
    """`job` without the implementations in `skip`, and a `skipped` row for each of those it would have run."""
    keys = [k for k in job.keys() if (k.backend, k.device, k.variant) in skip]
    if not keys:
        return job, []
    stages = Stages(check=Check("skipped", check_plan.RARE_REASON))
    return replace(job, skip=job.skip | skip), [result_rows.assemble(k, Case.lost(job), stages) for k in keys]
