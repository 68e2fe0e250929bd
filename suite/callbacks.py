"""Hydra callback: after a multirun, merge every job's rows, repetitions and environment into one table at the top
of the sweep directory, with the typed Parquet copies, then the charts and report of the whole sweep
(`suite.sweep.merge`).

Hydra calls `on_multirun_end` only when every job succeeded; a launcher whose job failed or was killed raises
first. The sweep is remembered at its start so the command line can still merge it then (`merge_unfinished`):
the rows of the jobs that ran are never left unmerged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

PENDING: list[tuple[Path, list[str]]] = []
"""The sweep of this process that started and was not merged yet: (sweep directory, command-line overrides)."""


class AggregateRuns(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        PENDING[:] = [(Path(str(config.hydra.sweep.dir)), _overrides(config))]

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        PENDING.clear()
        _merge(Path(str(config.hydra.sweep.dir)), _overrides(config))


def merge_unfinished() -> None:
    """Merge the sweep whose launcher raised before Hydra's multirun end (a job failed or was killed)."""
    while PENDING:
        _merge(*PENDING.pop())


def _overrides(config: DictConfig) -> list[str]:
    return [str(o) for o in OmegaConf.to_container(config.hydra.overrides.task, resolve=False)]


def _merge(sweep: Path, overrides: list[str]) -> None:
    from suite.sweep import merge

    if sweep.exists():
        merge(sweep, overrides)
