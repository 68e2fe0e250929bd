"""Hydra callback: after a multirun, merge every job's rows, repetitions and environment into one table at the top
of the sweep directory, with the typed Parquet copies, then the charts and report of the whole sweep
(`suite.sweep.merge`).

Hydra calls `on_multirun_end` only when every job succeeded; a launcher whose job failed or was killed raises
first. The sweep is remembered at its start so the command line can still merge it then (`merge_unfinished`):
the rows of the jobs that ran are never left unmerged. On SLURM, the launcher raises at the first job that left
no result while the others may still run: their end is waited for first (`suite.cluster.watch.settle`), which
also says in each lost job's job.json how SLURM saw it end.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

SLURM_LAUNCHER = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"


@dataclass
class Sweep:
    directory: Path
    task: list[str]
    """The command line's overrides of the jobs."""
    hydra: list[str]
    """Its `hydra...` overrides: the launcher and its settings, which the command completing the sweep repeats."""
    slurm_since: float | None = None
    """When its jobs were submitted to SLURM (time.time()); None for the other launchers."""


PENDING: list[Sweep] = []
"""The sweep of this process that started and was not merged yet."""


class AggregateRuns(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweep = _sweep(config)
        if str(config.hydra.launcher.get("_target_", "")) == SLURM_LAUNCHER:
            from suite.cluster import watch

            watch.install()  # before submitit watches its first job: a lost job must end the wait
            sweep.slurm_since = time.time()
        PENDING[:] = [sweep]

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        PENDING.clear()
        _merge(_sweep(config))


def merge_unfinished() -> None:
    """Merge the sweep whose launcher raised before Hydra's multirun end (a job failed or was killed)."""
    while PENDING:
        sweep = PENDING.pop()
        if sweep.slurm_since is not None and sweep.directory.exists():
            from suite.cluster import watch
            from suite.sweep import identity, job_overrides

            jobs = [identity(o) for o in job_overrides(["-m", *sweep.task])]
            watch.settle(sweep.directory, sweep.slurm_since, jobs)
        _merge(sweep)


def _sweep(config: DictConfig) -> Sweep:
    task, hydra = (OmegaConf.to_container(config.hydra.overrides[k], resolve=False) for k in ("task", "hydra"))
    return Sweep(Path(str(config.hydra.sweep.dir)), [str(o) for o in task], [str(o) for o in hydra])


def _merge(sweep: Sweep) -> None:
    from suite.sweep import merge

    if sweep.directory.exists():
        merge(sweep.directory, sweep.task, hydra_overrides=sweep.hydra)
