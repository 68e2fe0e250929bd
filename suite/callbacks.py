"""Hydra callback: after a multirun, merge every job's results.csv, repetitions and environment into one at the
top of the sweep directory, with the typed Parquet copies, then the charts and report of the whole sweep."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig


class AggregateRuns(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from suite.cli import finalize
        from suite.core import store
        from suite.run.results import CSV_NAME, aggregate

        sweep = Path(str(config.hydra.sweep.dir))
        if not sweep.exists():
            return
        tables = sorted(sweep.glob(f"*/{CSV_NAME}"), key=lambda p: (len(p.parent.name), p.parent.name))
        frame = aggregate(tables, sweep / CSV_NAME)
        store.merge_environments([p.parent for p in tables], sweep)
        store.write_parquet(sweep)
        finalize(frame, sweep)
