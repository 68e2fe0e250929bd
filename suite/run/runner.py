"""`run(plan, outdir) -> Result`: the whole sweep of one configuration, apart from Hydra so tests can call it.

Cases are sent to the worker one at a time (to each of `timing.processes` workers in turn, their repetitions
pooled: `suite.run.pooled`); every row is appended to results.csv and flushed the moment the
case returns. A timeout or a crashed worker turns the case into `error` rows; Ctrl-C stops the sweep but keeps
every row written, and `resume=true` into the same directory skips what is already there. Beside the table:
environment.json (what the run ran on, from the worker; NVML's reading of the GPU added again as the last case
returns), ceilings.json, and at the end (or on Ctrl-C) the typed Parquet copies of the rows and their
repetitions (`suite.kit.store`). The Result holds the table, the directory and the files written
(`suite.run.result`); what the run exits with is computed from it, by whoever started the run.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from suite.core.row import Row, params_json
from suite.kit import store
from suite.run import pooled, profile, progress, provenance, result_rows
from suite.run.config import TimingConfig
from suite.run.job import Job
from suite.run.result import CEILINGS, RUN_FILES, Result
from suite.run.results import Table, read
from suite.run.validate import Plan, prepare
from suite.run.worker import InProcess, Settings, Worker, WorkerLost


def jobs(cfg: DictConfig, p: Plan, outdir: Path, done: set[tuple[str, ...]], run_id: str = "") -> list[Job]:
    timing = TimingConfig(**OmegaConf.to_container(cfg.timing, resolve=True))
    options = OmegaConf.to_container(cfg.backend_options, resolve=True)
    out = []
    for params in p.cases:
        for dtype in p.dtypes:
            head = (p.scenario.name, params_json(params), dtype)
            skip = {k[3:6] for k in done if k[:3] == head and k[6:] in ((p.phase,), ())}
            out.append(
                Job(
                    p.scenario.name,
                    params,
                    dtype,
                    p.backends,
                    p.targets,
                    p.variants,
                    int(cfg.seed),
                    timing,
                    bool(cfg.device.emulate),
                    int(cfg.device.emulate_max_elements),
                    options,
                    str(outdir / "io") if cfg.save_io else None,
                    skip,
                    strict=bool(cfg.variants),
                    run_id=run_id or outdir.name,
                    cache_dir=str(outdir.resolve() / "cache"),
                    arch=cfg.device.get("arch"),
                    model=str(cfg.model.name) if cfg.get("model") else "",
                    layer=str(cfg.get("layer") or ""),
                    phase=p.phase,
                )
            )
    return out


def run(
    what: Plan | DictConfig,
    outdir: Path,
    show_progress: bool = True,
    run_id: str = "",
    job: int | None = None,
    sweep: progress.Sweep | None = None,
) -> Result:
    """Run every case of the plan, appending rows as they come; return the run's Result (its whole table, the
    files written). A composed config is planned here first, with its plug-ins (`validate.prepare`): a Hydra job
    and a test hand one in. `run_id` (default: the directory's name) is recorded in every row and starts its row
    id; `job` is the run's number in the multirun `sweep` (its progress counts the whole sweep's cases)."""
    p = what if isinstance(what, Plan) else prepare(what)
    cfg = p.config
    outdir = Path(outdir)
    run_id = run_id or outdir.name
    table = Table(outdir, fresh=not cfg.resume, run_id=run_id)
    done = table.done_keys() if cfg.resume else set()
    todo = jobs(cfg, p, outdir, done, run_id)
    settings = Settings(bool(cfg.device.emulate), p.targets, list(cfg.plugins))
    worker = Worker(settings) if cfg.isolate else InProcess(settings)
    processes = max(1, int(cfg.timing.processes)) if cfg.isolate else 1
    workers = [worker, *(Worker(settings) for _ in range(processes - 1))]  # the first's ceilings are handed on
    (outdir / CEILINGS).write_text(
        json.dumps({d: vars(c) for d, c in worker.info["ceilings"].items()}, indent=2) + "\n"
    )
    environment = worker.info["environment"]  # a restarted worker's info holds its own, later start reading
    if p.sizing is not None:  # why preset=DRAM's sizes are what they are: the cache they were chosen from
        environment = {**environment, "sizing": p.sizing.record()}
    store.write_environment(outdir, environment)
    try:
        with progress.Bar(len(todo), enabled=show_progress, job=job, sweep=sweep) as bar:
            for job in todo:
                bar.start(job)
                rows = _timed_in(workers, job, cfg.timing.case_timeout_s)
                if cfg.profile == "ncu":  # each CUDA row timed here, rerun once under Nsight Compute
                    rows = profile.measure_rows(rows, job, profile.Profiler.of(cfg))
                for row in rows:
                    table.append(row)
                bar.advance(rows)
    finally:
        _record_end(outdir, environment)
        for each in workers:
            each.close()
        table.close()
        store.write_parquet(outdir)
    return Result(read(table.path), outdir, tuple(outdir / name for name in RUN_FILES))


def _timed_in(workers: list[Any], job: Job, timeout: float) -> list[Row]:
    """The case's rows, timed in each worker in turn with its share of the budget and pooled
    (`suite.run.pooled`); a worker lost on the case costs its share, not the rows the others timed."""
    share = replace(job, timing=pooled.split_timing(job.timing, len(workers)))
    runs, lost = [], None
    for each in workers:
        try:
            runs.append(each.run(share, timeout))
        except WorkerLost as exc:
            lost = lost or str(exc)
    return pooled.pool(runs) if runs else result_rows.lost(job, lost or "no worker answered")


def _record_end(outdir: Path, environment: dict[str, Any]) -> None:
    """environment.json again, with NVML's reading of the GPU after the last case (`provenance.ended`), taken
    before the worker closes so the GPU is read as the cases left it; untouched where there is none."""
    ended = provenance.ended(environment)
    if ended is not environment:
        store.write_environment(outdir, ended)
