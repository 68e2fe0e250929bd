"""Kernels are held honest, plug-ins included: each cheat of tests/plugins/dishonest.py is caught in its row (an
input written, a result replayed, the timer patched, a time returned, a kernel fast only on the buffers it just
ran on), and a kernel that declares a dtype unsupported gives a `skipped` row with its reason."""

from __future__ import annotations

import time

import pandas as pd
import pytest

import tests.plugins.dishonest as dishonest
from suite.run import timing
from suite.run.runner import run
from tests.conftest import make_config


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    cfg = make_config("plugins=[tests.plugins.dishonest]", f"scenario={dishonest.NAME}", "preset=S",
                      "backends=[dishonest]", "device=cpu", "timing=quick", "dtype=[float32,float16]",
                      "isolate=false", "timing.min_reps=8")  # fmt: skip
    frame = run(cfg, tmp_path_factory.mktemp("honest"), show_progress=False).table
    assert not timing.tampered(), "the suite put the timer back"
    return frame.set_index(["variant", "dtype"])


def test_the_honest_kernel_passes(rows: pd.DataFrame) -> None:
    assert rows.loc[("honest", "float32"), "status"] == "ok"
    assert rows.loc[("honest", "float32"), "time_ms"] > 0


def test_a_kernel_that_writes_its_input_is_an_error_naming_it(rows: pd.DataFrame) -> None:
    row = rows.loc[("writes_input", "float32")]
    assert row["status"] == "error" and "wrote its input 'x'" in row["reason"], row["reason"]


def test_a_kernel_that_replays_a_result_does_not_follow_fresh_inputs(rows: pd.DataFrame) -> None:
    row = rows.loc[("replays", "float32")]
    assert row["status"] == "mismatch" and "does not follow its inputs" in row["reason"], row["reason"]


def test_a_kernel_that_patches_the_timer_is_an_error(rows: pd.DataFrame) -> None:
    row = rows.loc[("patches_timer", "float32")]
    assert row["status"] == "error" and "time.perf_counter_ns" in row["reason"], row["reason"]
    assert time.perf_counter_ns() > 0


def test_what_a_launcher_returns_does_not_alter_its_time(rows: pd.DataFrame) -> None:
    row = rows.loc[("returns_time", "float32")]
    assert row["status"] == "ok" and row["time_ms"] >= dishonest.SLEEP_S * 1e3


def test_rotated_input_sets_deny_a_kernel_its_hot_buffers(rows: pd.DataFrame) -> None:
    """`hot_only` is fast only when called on the buffers of its previous call: each round times another set."""
    row = rows.loc[("hot_only", "float32")]
    assert row["status"] == "ok" and '"input_sets": 4' in row["extra"]
    assert row["time_min_ms"] >= dishonest.SLEEP_S * 1e3, row["time_min_ms"]


def test_a_declared_unsupported_dtype_is_skipped_with_its_reason(rows: pd.DataFrame) -> None:
    assert rows.loc[("no_half", "float32"), "status"] == "ok"
    row = rows.loc[("no_half", "float16")]
    assert row["status"] == "skipped" and "no half-precision path" in row["reason"]


def test_timer_tamper_is_detected_and_restored() -> None:
    genuine = time.perf_counter_ns
    time.perf_counter_ns = lambda: 0
    timing.CpuClock.time = lambda self, launch: 0.0
    try:
        assert set(timing.tampered()) == {"time.perf_counter_ns", "CpuClock.time"}
    finally:
        timing.restore()
    assert time.perf_counter_ns is genuine and not timing.tampered()
