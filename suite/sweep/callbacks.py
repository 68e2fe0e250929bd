"""Hydra callback: after a multirun, merge every job's rows, repetitions and environment into one table at the top
of the sweep directory, with the typed Parquet copies, then the charts and report of the whole sweep
(`suite.sweep.merge`).

Hydra calls `on_multirun_end` only when every job succeeded; a launcher whose job failed or was killed raises
first. The command line knows the sweep's directory (it fixed it before Hydra started), so it merges the sweep
itself then (`merge_saved`), from what Hydra saved there at the sweep's start (multirun.yaml): the rows of
the jobs that ran are never left unmerged. On SLURM, the launcher raises at the first job that left no result
while the others may still run: their end is waited for first (`suite.sweep.cluster.watch.settle`), which also says in
each lost job's job.json how SLURM saw it end.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

if TYPE_CHECKING:
    from suite.run.result import Result

SLURM_LAUNCHER = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"


@dataclass(frozen=True)
class Sweep:
    directory: Path
    task: list[str]
    """The command line's overrides of the jobs."""
    hydra: list[str]
    """Its `hydra...` overrides: the launcher and its settings, which the command completing the sweep repeats."""
    launcher: str
    """The launcher's class (`hydra.launcher._target_`)."""

    @classmethod
    def of(cls, config: DictConfig) -> Sweep:
        """The sweep of a multirun's config (`hydra` node included: what Hydra hands a callback, or saves)."""
        task, hydra = (OmegaConf.to_container(config.hydra.overrides[k], resolve=False) for k in ("task", "hydra"))
        launcher = str(config.hydra.launcher.get("_target_", ""))
        return cls(Path(str(config.hydra.sweep.dir)), [str(o) for o in task], [str(o) for o in hydra], launcher)

    @classmethod
    def saved(cls, directory: Path) -> Sweep | None:
        """The sweep in `directory` as Hydra saved it at its start (multirun.yaml); None where it never started."""
        path = Path(directory) / "multirun.yaml"
        if not path.exists():
            return None
        hydra = OmegaConf.load(path).get("hydra") or {}
        overrides, launcher = hydra.get("overrides") or {}, hydra.get("launcher") or {}
        task, given = ([str(o) for o in overrides.get(k) or []] for k in ("task", "hydra"))
        return cls(Path(directory), task, given, str(launcher.get("_target_", "")))


class AggregateRuns(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if str(config.hydra.launcher.get("_target_", "")) == SLURM_LAUNCHER:
            from suite.sweep.cluster import watch

            watch.install()  # before submitit watches its first job: a lost job must end the wait

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        _merge(Sweep.of(config))


def merge_saved(directory: Path, since: float | None = None) -> Result | None:
    """Merge the sweep in `directory` from what Hydra saved at its start (multirun.yaml): where its launcher
    raised before Hydra's multirun end (a job failed or was killed; the command line started it at `since`,
    time.time(), and a SLURM sweep's jobs still running are waited for), or later, again (`python -m suite report
    SWEEP`: after the process that launched it was lost, or to take in jobs finished since). None where it never
    started."""
    sweep = Sweep.saved(directory)
    if sweep is None:
        return None
    if since is not None and sweep.launcher == SLURM_LAUNCHER:
        from suite.sweep.cluster import watch
        from suite.sweep.merge import identity, job_overrides

        jobs = [identity(o) for o in job_overrides(["-m", *sweep.task])]
        watch.settle(sweep.directory, since, jobs)
    return _merge(sweep)


def _merge(sweep: Sweep) -> Result | None:
    from suite.sweep.merge import merge

    return merge(sweep.directory, sweep.task, hydra_overrides=sweep.hydra) if sweep.directory.exists() else None
