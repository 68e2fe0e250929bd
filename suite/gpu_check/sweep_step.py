"""The check's sweep: every family's cases in one worker process, into one table.

One worker for the whole sweep, where a Hydra multirun starts one per job: the ceiling is measured once per
device, Numba's and Triton's JIT caches and torch.compile's compiled graphs stay warm from family to family,
and the kernels a case compiled are not compiled again by another process (the worker restarts only after a
crash, and is handed the ceilings). Inductor's on-disk cache is one folder for the check
(TORCHINDUCTOR_CACHE_DIR), so even a restarted worker reuses it. torch.compile is built at each family's
summary case only (`estimate.RARE`): elsewhere its rows are `skipped` with that reason, not absent. Each case's
rows are appended as they come; a case that fails is rows with status and reason, and the sweep goes on.

The estimate's constants are guesses, so the sweep also keeps a wall-clock deadline: no case starts past it and
none runs past it (its limit is the time left); what it did not reach is `skipped` rows saying so, and the
bundle is still written. Each case's time is recorded beside its estimate.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

import pandas as pd

from suite.cli import compose_jobs
from suite.core.row import Row, params_json
from suite.gpu_check.estimate import RARE_REASON, Estimate, rare_skip, summary_case
from suite.kit import store
from suite.run import result_rows, runner, validate
from suite.run.job import Case, Job
from suite.run.results import Table, read
from suite.run.stages import Check, Stages
from suite.run.worker import Settings, Worker, WorkerLost

LATE = "not reached: the GPU check's deadline passed before this case could start (suite/gpu_check/sweep_step.py)"
CUT = "cut by the GPU check's deadline while it ran (suite/gpu_check/sweep_step.py)"


@dataclass
class Sweep:
    """The sweep's rows, and each case's time beside its estimate (what the next revision calibrates from)."""

    rows: pd.DataFrame
    cases: list[dict] = field(default_factory=list)


def run_sweep(
    work: list[Estimate],
    outdir: Path,
    log: TextIO,
    deadline: float = float("inf"),
    clock: Callable[[], float] = time.monotonic,
) -> Sweep:
    """Every job's cases in one worker, none started past `deadline` (on `clock`) and none let run past it: a case
    not reached, or cut, is `skipped` rows with the reason. The table of all rows (results.csv, reps and parquet
    in outdir)."""
    configs = [compose_jobs(e.job.overrides)[0] for e in work]
    plans = [validate.plan(cfg) for cfg in configs]
    devices = sorted({t for p in plans for t in p.targets})
    table = Table(outdir, fresh=True, run_id=outdir.name)
    worker = Worker(Settings(emulate=False, devices=devices))
    timings: list[dict] = []
    try:
        (outdir / "ceilings.json").write_text(
            json.dumps({d: vars(c) for d, c in worker.info["ceilings"].items()}, indent=2) + "\n"
        )
        store.write_environment(outdir, worker.info["environment"])
        for cfg, plan, est in zip(configs, plans, work, strict=True):
            summary = summary_case(plan.scenario, plan.cases, plan.dtypes) if plan.cases else ("", "")
            for whole in runner.jobs(cfg, plan, outdir, set(), outdir.name):
                job, left_out = narrowed(whole, rare_skip(whole.params, whole.dtype, summary))
                started = clock()
                rows = run_case(worker, job, float(cfg.timing.case_timeout_s), deadline - started) + left_out
                for row in rows:
                    table.append(row)
                took = clock() - started
                guess = est.case_seconds.get((params_json(job.params), job.dtype), 0.0)
                timings.append({"family": est.job.label, "params": job.params, "dtype": job.dtype,
                                "estimated_s": round(guess, 1), "actual_s": round(took, 1)})  # fmt: skip
                bad = sum(r.status in ("error", "mismatch") for r in rows)
                log.write(
                    f"{est.job.label} {json.dumps(job.params)} {job.dtype}: {len(rows)} rows, {bad} failed, "
                    f"{took:.1f} s (estimated {guess:.1f} s)\n"
                )
                log.flush()
    finally:
        worker.close()
        table.close()
        store.write_parquet(outdir)
    return Sweep(read(table.path), timings)


def run_case(worker: Worker, job: Job, timeout_s: float, remaining_s: float) -> list[Row]:
    """One case's rows: `skipped` where no time remains, else timed within the lesser of its own limit and the
    time left (a case the deadline cuts is `skipped`, one past its own limit an `error`)."""
    if not job.impls():
        return []
    if remaining_s <= 0:
        return skipped(job, LATE)
    try:
        return worker.run(job, min(timeout_s, remaining_s))
    except WorkerLost as exc:  # lost while timing: the case cannot be attributed to one kernel
        return skipped(job, CUT) if remaining_s < timeout_s else result_rows.lost(job, str(exc))


def skipped(job: Job, reason: str) -> list[Row]:
    stages = Stages(check=Check("skipped", reason))
    return [result_rows.assemble(k, Case.lost(job), stages) for k in job.keys()]


def narrowed(job: Job, skip: set[tuple[str, str, str]]) -> tuple[Job, list[Row]]:
    """`job` without the implementations in `skip`, and a `skipped` row for each of those it would have run."""
    keys = [k for k in job.keys() if (k.backend, k.device, k.variant) in skip]
    if not keys:
        return job, []
    stages = Stages(check=Check("skipped", RARE_REASON))
    return replace(job, skip=job.skip | skip), [result_rows.assemble(k, Case.lost(job), stages) for k in keys]
