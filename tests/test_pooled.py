"""One case timed in several worker processes: the repetitions pooled, the interval widened by what the
processes disagree on, pairs kept aligned, and a process that failed costing only its share."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from suite.core.row import Row
from suite.run import pooled
from suite.run.config import TimingConfig


def _row(variant: str, times: list[float], blocks: list[int], status: str = "ok", **fields) -> Row:
    row = Row("softmax", '{"cols": 8192}', "float32", "numba", "cpu", variant, status, processes=1, seed=3,
              bytes_read=4000, bytes_written=4000, ceiling_gbps=10.0, **fields)  # fmt: skip
    row.times_ms, row.blocks = tuple(times), tuple(blocks)
    row.canary_times_ms = tuple(1.0 for _ in times)
    return row


def _process(rng: np.random.Generator, fused_ms: float, n: int = 30) -> list[Row]:
    blocks = [i * 3 // n for i in range(n)]
    unfused = 2.0 * rng.lognormal(0, 0.005, n)
    fused = fused_ms * rng.lognormal(0, 0.005, n)
    return [_row("unfused", list(unfused), blocks),
            _row("fused", list(fused), blocks, baseline="unfused", verdict="pays", speedup=1.0)]  # fmt: skip


def test_processes_that_disagree_widen_the_interval_and_undecide_the_verdict() -> None:
    rng = np.random.default_rng(0)
    a, b = _process(rng, 1.0), _process(rng, 1.25)  # the second process's state makes fused 25% slower
    _, fused = pooled.pool([a, b])
    assert fused.processes == 2 and fused.buffer_sets == 6 and fused.reps == 60
    assert set(b // pooled.BLOCKS for b in fused.blocks) == {0, 1}
    assert fused.precision > 0.05  # each process alone was within ±1%
    assert fused.speedup_lo < 1.7 < 1.9 < fused.speedup_hi  # 2.0× in one process, 1.6× in the other
    agree = pooled.pool([_process(rng, 1.0), _process(rng, 1.0)])[1]
    assert agree.precision < 0.01 and agree.verdict == "pays" and agree.speedup == pytest.approx(2.0, rel=0.02)
    assert fused.gbps == pytest.approx(8000 / (fused.time_ms * 1e-3) / 1e9)


def test_a_process_that_failed_an_implementation_costs_only_its_share() -> None:
    rng = np.random.default_rng(1)
    a, b = _process(rng, 1.0), _process(rng, 1.0)
    b[1] = _row("fused", [], [], status="error", reason="timeout")
    unfused, fused = pooled.pool([a, b])
    assert unfused.processes == 2 and fused.processes == 1 and fused.reps == 30
    assert fused.extra["processes_missed"] == {"1": "error: timeout"}
    assert fused.verdict == "pays"  # paired on the first process's rounds alone, where both were timed


def test_one_process_is_returned_as_it_is() -> None:
    rows = _process(np.random.default_rng(2), 1.0)
    assert pooled.pool([rows]) == rows


def test_each_process_gets_its_share_of_the_budget() -> None:
    t = pooled.split_timing(TimingConfig(budget_s=0.2, max_budget_s=1.0, min_blocks=3, max_blocks=12), 2)
    assert (t.budget_s, t.max_budget_s, t.min_blocks, t.max_blocks) == (0.1, 0.5, 2, 6)


def test_a_sweep_in_two_worker_processes_pools_their_rows(tmp_path: Path) -> None:
    from suite.kit import store
    from suite.run.runner import run
    from tests.conftest import make_config

    cfg = make_config("plugins=[tests.fakes]", "scenario.name=fake_double", "preset=S", "backends=[fake]",
                      "device=cpu", "timing=quick", "timing.processes=2", "timing.min_blocks=2", "dtype=float32",
                      "isolate=true", "variants=[good,twice]", "scenario.n=[50]")  # fmt: skip
    frame = run(cfg, tmp_path, show_progress=False).table
    good = frame[frame["variant"] == "good"].iloc[0]
    assert good["status"] == "ok" and good["processes"] == 2 and good["buffer_sets"] == 2
    reps = store.load(tmp_path).reps
    assert set(reps["block"] // pooled.BLOCKS) == {0, 1}
    assert len(reps[reps["row_id"] == good["row_id"]]) == good["reps"]
