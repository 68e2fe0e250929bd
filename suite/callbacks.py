"""Hydra callback: after a multirun, merge every job's results.csv into one at the top of the sweep directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig


class AggregateRuns(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from suite.cli import finalize
        from suite.run.results import CSV_NAME, aggregate

        sweep = Path(str(config.hydra.sweep.dir))
        if not sweep.exists():
            return
        frame = aggregate(sorted(sweep.glob(f"*/{CSV_NAME}")), sweep / CSV_NAME)
        finalize(frame, sweep)
