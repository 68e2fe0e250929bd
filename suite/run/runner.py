"""`run(cfg, outdir) -> DataFrame`: the whole sweep of one configuration, apart from Hydra so tests can call it.

Cases are sent to the worker one at a time; every row is appended to results.csv and flushed the moment the
case returns. A timeout or a crashed worker turns the case into `error` rows; Ctrl-C stops the sweep but keeps
every row written, and `resume=true` into the same directory skips what is already there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from suite.core.row import params_json
from suite.run import assemble, progress
from suite.run.config import TimingConfig
from suite.run.job import Job
from suite.run.results import Table, read
from suite.run.validate import Plan, planned
from suite.run.worker import InProcess, Settings, Worker, WorkerLost


def jobs(cfg: DictConfig, p: Plan, outdir: Path, done: set[tuple[str, ...]]) -> list[Job]:
    timing = TimingConfig(**OmegaConf.to_container(cfg.timing, resolve=True))
    options = OmegaConf.to_container(cfg.backend_options, resolve=True)
    out = []
    for params in p.cases:
        for dtype in p.dtypes:
            head = (p.scenario.name, params_json(params), dtype)
            skip = {k[3:] for k in done if k[:3] == head}
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
                    run_id=outdir.name,
                    cache_dir=str(outdir.resolve() / "cache"),
                )
            )
    return out


def run(cfg: DictConfig, outdir: Path, show_progress: bool = True) -> pd.DataFrame:
    """Validate (or take the plan the command line made), run every case, append rows as they come; return the
    run's whole table."""
    p = planned(cfg)
    outdir = Path(outdir)
    table = Table(outdir, fresh=not cfg.resume)
    done = table.done_keys() if cfg.resume else set()
    todo = jobs(cfg, p, outdir, done)
    settings = Settings(bool(cfg.device.emulate), p.targets, list(cfg.plugins))
    worker = Worker(settings) if cfg.isolate else InProcess(settings)
    (outdir / "ceilings.json").write_text(
        json.dumps({d: vars(c) for d, c in worker.info["ceilings"].items()}, indent=2) + "\n"
    )
    try:
        with progress.Bar(len(todo), enabled=show_progress) as bar:
            for job in todo:
                bar.start(job)
                try:
                    rows = worker.run(job, cfg.timing.case_timeout_s)
                except WorkerLost as exc:
                    rows = assemble.lost(job, str(exc))
                for row in rows:
                    table.append(row)
                bar.advance(rows)
    finally:
        worker.close()
        table.close()
    return read(table.path)
