"""Likely causes named from the evidence, and the crossover size, on hand-made pairs."""

from __future__ import annotations

import pandas as pd

from suite.kit.tidy import crossover
from suite.report.causes import causes, needs_cause

BASE = {"variant": "fused", "baseline": "unfused", "device": "cuda", "verdict": "loses", "time_ms": 2.0,
        "time_ms_base": 1.5, "launches_base": 3, "spill_bytes": 0, "occupancy": 1.0, "occupancy_base": 1.0,
        "cache_bytes_base": 50 * 2**20, "bytes_read_base": 3 * 2**30, "bytes_written_base": 3 * 2**30,
        "pct_of_ceiling": 80.0, "pct_of_ceiling_base": 85.0, "fusion_efficiency": -0.5}  # fmt: skip


def pair(**changes: object) -> pd.Series:
    return pd.Series({**BASE, **changes})


def test_a_clean_loss_names_nothing_spurious():
    assert causes(pair()) == []


def test_spills_and_occupancy_drop_are_named():
    found = causes(pair(spill_bytes=512, occupancy=0.25))
    assert any("spills (512 bytes" in c for c in found)
    assert any("occupancy fell from 100% (unfused) to 25% (fused)" in c for c in found)


def test_library_winning_is_named():
    assert any("library kernel (1 ms) beats" in c for c in causes(pair(), library_ms=1.0))
    assert not any("library" in c for c in causes(pair(), library_ms=3.0))


def test_launch_overhead_and_caches_at_small_sizes():
    small = pair(time_ms_base=0.006, bytes_read_base=3 * 2**16, bytes_written_base=3 * 2**16)
    assert "fixed launch costs dominate" in " ".join(causes(small))
    assert "cache" not in " ".join(causes(small))  # a small working set alone is no evidence
    cached = " ".join(causes(pair(pct_of_ceiling_base=240.0, bytes_read_base=3 * 2**16, bytes_written_base=3 * 2**16)))
    assert "ran at 240% of the copy ceiling, so a cache served their traffic" in cached
    assert "0.125 MiB against a 50 MiB last cache level" in cached
    near = " ".join(causes(pair(pct_of_ceiling_base=108.0)))  # a streaming kernel within noise of the copy
    assert "cache" not in near


def test_compute_bound_is_named():
    assert any("only 12% of the copy ceiling" in c for c in causes(pair(pct_of_ceiling=12.0)))


def test_needs_cause_when_losing_or_inefficient():
    assert needs_cause(pair())
    assert needs_cause(pair(verdict="pays", fusion_efficiency=0.2))
    assert not needs_cause(pair(verdict="pays", fusion_efficiency=0.9, speedup=3.0, predicted=4.0))
    assert needs_cause(pair(verdict="pays", fusion_efficiency=3.0, speedup=1.2, predicted=8.0))


def test_crossover_is_the_size_from_which_every_larger_one_pays():
    line = pd.DataFrame({"size": [1, 2, 4, 8, 16], "verdict": ["neutral", "pays", "neutral", "pays", "pays"]})
    assert crossover(line) == 8
    assert crossover(line.assign(verdict="loses")) is None
    assert crossover(line.assign(verdict="pays")) == 1
