"""Rows are made in one place from frozen stage results: the first stage that stops an implementation says why,
and a case lost with its worker still gets a row per implementation (or one naming them all)."""

from __future__ import annotations

import dataclasses

import pytest

from suite.core.registry import KernelKey
from suite.core.row import COLUMNS
from suite.run.config import TimingConfig
from suite.run.job import Case, Job
from suite.run.result_rows import assemble, lost
from suite.run.stages import Availability, Check, Ledger, Peer, Rates, Stages, Timed

KEY = KernelKey("fake_double", "fake", "good", "cpu")
CASE = Case("fake_double", {"n": 7}, "float32", size=7, seed=11, run_id="run", device_names={"cpu": "the CPU"})


def test_stages_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Check("ok").status = "error"  # type: ignore[misc]


def test_a_row_takes_each_stage_s_columns_and_the_case_s_provenance() -> None:
    stages = Stages(
        Availability("native"),
        Ledger("write-allocate", 28, 28, 7, 84, 1, 0, 0),
        Check("ok", tolerance=1e-6, compile_ms=3.0, max_rel_err=0.0),
        peer=Peer(0.0),
        timing=Timed(1.0, 0.9, 0.95, 1.05, 5, False, (1.0,) * 5),
        rates=Rates(20.0, 30.0, 1 << 20, 5.6e-5, 2.8e-4, gflops=7e-6),
    )
    row = assemble(KEY, CASE, stages)
    assert (row.status, row.reason, row.mode, row.device_name) == ("ok", "", "native", "the CPU")
    assert (row.bytes_modeled, row.time_ms, row.reps, row.ceiling_gbps, row.peer_err) == (84, 1.0, 5, 20.0, 0.0)
    assert (row.seed, row.size, row.run_id, row.extra) == (11, 7, "run", {"gflops": 7e-6})
    assert "variants=[good]" in row.command and list(row.as_record()) == COLUMNS


def test_the_first_stage_that_stops_an_implementation_says_why() -> None:
    skipped = Stages(Availability("unavailable", "skipped", "no GPU"), check=Check("ok"))
    assert skipped.outcome() == ("skipped", "no GPU")
    disagrees = Stages(Availability("native"), check=Check("ok"), peer=Peer(0.5, "mismatch", "differs"))
    assert disagrees.outcome() == ("mismatch", "differs")
    emulated = assemble(KEY, CASE, Stages(Availability("emulated"), check=Check("ok")))
    assert (emulated.reason, emulated.device_name) == ("not timed", "host (emulated)")


def test_a_lost_case_gets_error_rows_with_its_command_and_run_id() -> None:
    job = Job(
        "fake_double", {"n": 7}, "float32", ["a", "b"], ["cpu"], ["good"], 0, TimingConfig(), False, 1, {}, run_id="run"
    )
    (row,) = lost(job, "worker died")  # no backend named here has a target: one row names them all
    assert (row.backend, row.device, row.status, row.reason, row.run_id) == (
        "a,b",
        "cpu",
        "error",
        "worker died",
        "run",
    )
    assert row.seed is None and row.device_name == "" and "backends=[a,b]" in row.command
    (one,) = lost(job, "timeout", [KEY])
    assert (one.backend, one.variant, one.status) == ("fake", "good", "error")
