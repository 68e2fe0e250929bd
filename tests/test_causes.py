"""Likely causes named from the evidence, and the crossover size, on hand-made pairs."""

from __future__ import annotations

import pandas as pd

from suite.kit.tidy import crossover
from suite.report.causes import causes, needs_cause
from suite.report.verdict import _cause, _shape, _why

BASE = {"variant": "fused", "baseline": "unfused", "device": "cuda", "verdict": "loses", "time_ms": 2.0,
        "time_ms_base": 1.5, "launches_base": 3, "spill_bytes": 0, "occupancy": 1.0, "occupancy_base": 1.0,
        "cache_bytes_base": 50 * 2**20, "bytes_read_base": 3 * 2**30, "bytes_written_base": 3 * 2**30,
        "pct_of_ceiling": 80.0, "pct_of_ceiling_base": 85.0}  # fmt: skip


def pair(**changes: object) -> pd.Series:
    return pd.Series({**BASE, **changes})


def test_a_clean_loss_names_nothing_spurious():
    assert causes(pair()) == []


def test_spills_and_occupancy_drop_are_named():
    found = causes(pair(spill_bytes=512, occupancy=0.25))
    assert any("spills 512 bytes per thread" in c and "(rule: any spill traffic)" in c for c in found)
    assert any("occupancy fell from 100% (unfused) to 25% (fused)" in c for c in found)


def test_library_winning_is_named():
    assert any("library kernel (1.00 ms) beats the fused one (2.00 ms)" in c for c in causes(pair(), library_ms=1.0))
    assert not any("library" in c for c in causes(pair(), library_ms=3.0))


def test_a_library_inside_the_band_is_no_cause_and_close_times_print_apart():
    """A library 1% faster is noise, not a cause; 3% faster is named with figures a reader can tell apart (the
    report once printed "the library kernel (28 ms) beats the compiled one (28 ms)")."""
    assert not any("library" in c for c in causes(pair(time_ms=28.0), library_ms=27.8))
    found = [c for c in causes(pair(time_ms=28.4), library_ms=27.5) if "library" in c]
    assert found and "(27.5 ms) beats the fused one (28.4 ms)" in found[0], found
    close = [c for c in causes(pair(time_ms=2804.2), library_ms=2741.9) if "library" in c]
    assert close and "(2,742 ms) beats the fused one (2,804 ms)" in close[0], close


def test_launch_overhead_and_caches_at_small_sizes():
    small = pair(time_ms_base=0.006, bytes_read_base=3 * 2**16, bytes_written_base=3 * 2**16)
    assert "fixed launch costs dominate" in " ".join(causes(small))
    assert "cache" not in " ".join(causes(small))  # a small working set alone is no evidence
    cached = " ".join(causes(pair(pct_of_ceiling_base=240.0, bytes_read_base=3 * 2**16, bytes_written_base=3 * 2**16)))
    assert "ran at 240% of the copy ceiling, so a cache served their traffic" in cached
    assert "working set (0.125 MiB) fits in the 50 MiB last cache level" in cached
    assert "(rule: above 120% of the copy ceiling)" in cached
    spilled = " ".join(causes(pair(pct_of_ceiling_base=240.0)))  # 2 GiB per kernel: more than the cache holds
    assert "working set (2.05e+03 MiB) exceeds the 50 MiB last cache level" in spilled
    near = " ".join(causes(pair(pct_of_ceiling_base=108.0)))  # a streaming kernel within noise of the copy
    assert "cache" not in near


def test_compute_bound_is_named_with_its_figure_and_rule():
    found = " ".join(causes(pair(pct_of_ceiling=12.0)))
    assert "only 12% of the copy ceiling" in found and "(rule: below 40% of the copy ceiling)" in found
    assert "ceiling" not in " ".join(causes(pair(pct_of_ceiling=41.0)))


def test_a_matrix_product_is_not_blamed_on_transcendentals():
    gemm = " ".join(causes(pair(pct_of_ceiling=6.0, flops_modeled=2e12, bytes_modeled=4e9)))
    assert "500 FLOPs per byte moved: its matrix product's arithmetic" in gemm
    assert "transcendental" not in gemm
    chain = " ".join(causes(pair(pct_of_ceiling=6.0, flops_modeled=8e9, bytes_modeled=4e9)))
    assert "2.0 FLOPs per byte moved: something other than memory traffic" in chain
    assert "matrix product" not in chain


def test_every_cause_names_its_rule():
    every = pair(spill_bytes=64, occupancy=0.25, time_ms_base=0.006, pct_of_ceiling_base=240.0, pct_of_ceiling=5.0)
    found = causes(every, library_ms=1.0)
    assert len(found) == 6
    assert all("(rule: " in c for c in found), found


def test_needs_cause_when_losing_or_far_from_the_prediction_never_when_explained():
    assert needs_cause(pair(speedup=0.8, predicted=2.0))
    assert needs_cause(pair(verdict="pays", speedup=1.2, predicted=8.0))
    assert not needs_cause(pair(verdict="pays", speedup=3.0, predicted=4.0))
    explained = pair(verdict="neutral", speedup=1.0, predicted=1.1)  # within EXPLAINED: the bytes say it all
    assert not needs_cause(explained)


def test_the_verdict_never_prints_a_cause_beside_the_bytes_explaining_the_gain():
    line = pd.DataFrame([{**BASE, "verdict": "neutral", "speedup": 1.6, "predicted": 1.83, "size": 8192,
                          "size_axis": "cols", "pct_of_ceiling": 20.0, "pct_of_ceiling_base": 80.0,
                          "params": "{}", "dtype": "float32", "impl": "numba/cpu"}])  # fmt: skip
    said = _why(line) + " " + _cause(line, line)
    assert "the bytes removed explain the gain" in said
    assert "Likely cause" not in said and "No cause" not in said


def test_crossover_is_the_size_from_which_every_larger_one_pays():
    line = pd.DataFrame({"size": [1, 2, 4, 8, 16], "verdict": ["neutral", "pays", "neutral", "pays", "pays"]})
    assert crossover(line) == 8
    assert crossover(line.assign(verdict="loses")) is None
    assert crossover(line.assign(verdict="pays")) == 1


def _shrinking(time_ms_base: float, pct_base: float = 80.0) -> pd.DataFrame:
    return pd.DataFrame({"speedup": [1.1, 2.5, 3.0], "size": [1024, 4096, 16384], "size_axis": "n",
                         "baseline": "unfused", "device": "cpu", "launches_base": 4,
                         "time_ms_base": [time_ms_base, 5.0, 20.0], "pct_of_ceiling_base": [pct_base, 80.0, 80.0]})  # fmt: skip


def test_a_gain_that_shrank_at_small_sizes_names_a_cause_only_from_its_figures():
    short = _shape(_shrinking(0.08))  # 20 µs per launch, under the CPU's 50 µs floor
    assert "each unfused kernel took as little as 20 µs there" in short and "(rule: under 50 µs per launch)" in short
    cached = _shape(_shrinking(0.08, pct_base=150.0))
    assert "up to 150% of the copy ceiling" in cached and "(rule: above 120% of the copy ceiling)" in cached
    plain = _shape(_shrinking(1.0))  # 250 µs per launch, within the ceiling: nothing to name
    assert plain == ". The gain shrank to 1.10× for n ≤ 2¹⁰"


def test_the_verdict_names_the_rule_behind_each_reading_of_the_ceiling():
    line = pd.DataFrame([{**BASE, "speedup": 1.6, "predicted": 1.83, "size": 8192, "size_axis": "cols"}])
    assert "explain the gain (rule: at least 75% of the predicted)." in _why(line)
    low = _why(line.assign(speedup=0.9, pct_of_ceiling=30.0, pct_of_ceiling_base=80.0))
    assert "buy less than modeled (rule: under 60% of unfused's share of the ceiling)." in low
    assert "explain" not in low
    high = _why(line.assign(speedup=2.6))
    assert "more than the bytes removed account for (rule: above 133% of the predicted)." in high
