"""Numbers that hold from one run to the next: the canary normalisation of `compare`, intervals that see what a
set of buffers fixes, and blocks that stop early on quiet data and run to their budget on noisy data."""

from __future__ import annotations

import itertools
import re
import time
from pathlib import Path

import numpy as np
import pytest

from suite.core import fusion, resample
from suite.run import build, case_inputs, check, honesty
from suite.run.config import TimingConfig
from suite.run.timing import measure_blocks
from tests.test_compare import compare, lines_of, rows, write_run


def test_a_machine_twice_as_slow_flags_no_row_relative_to_its_canary(tmp_path: Path, capsys) -> None:
    base = write_run(tmp_path / "base", rows(), seed=1, canary=True, blocks=3)
    new = write_run(tmp_path / "new", rows(), seed=2, canary=True, blocks=3, machine=2.0)
    lines = lines_of(base, new)
    assert set(lines["verdict"]) == {"same"} and lines["normalised"].all()
    assert lines["machine"].between(1.9, 2.1).all()
    code, out, _ = compare(capsys, base, new, "--fail-on-regression")
    assert code == 0 and re.search(r"machine \(cpu\): the canary ran (1\.9[5-9]|2\.0[0-5])\d*× as long in NEW", out)
    code, out, _ = compare(capsys, base, new, "--normalize=none", "--fail-on-regression")
    assert code == 1 and "6 slower" in out  # raw times read the machine as a regression of every row


def test_one_kernel_twenty_percent_slower_is_flagged_on_a_machine_that_moved(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", rows(), seed=1, canary=True, blocks=3)
    new = write_run(tmp_path / "new", rows(), slow={"fake": 1.2}, seed=2, canary=True, blocks=3, machine=0.8)
    lines = lines_of(base, new).set_index("implementation")
    assert set(lines.loc["fake/cpu fused", "verdict"]) == {"slower"}
    assert set(lines.drop(index="fake/cpu fused")["verdict"]) == {"same"}
    assert lines.loc["fake/cpu fused", "ratio"].between(1.15, 1.25).all()


def test_rows_without_a_common_canary_are_compared_raw_and_say_so(tmp_path: Path, capsys) -> None:
    base = write_run(tmp_path / "base", rows(), seed=1, canary=False)
    new = write_run(tmp_path / "new", rows(), seed=2, canary=True)
    lines = lines_of(base, new)
    assert not lines["normalised"].any() and lines["flags"].str.contains("raw times").all()
    code, _, err = compare(capsys, base, new, "--normalize=canary")
    assert code == 2 and "no row of the two runs timed the same canary" in err


def test_blocks_that_disagree_widen_the_interval() -> None:
    rng = np.random.default_rng(0)
    quiet = rng.normal(0.0, 0.01, 300)
    shifted = quiet + np.repeat([0.0, 0.10, -0.05], 100)  # each buffer set fixes its own offset
    labels = np.repeat([0, 1, 2], 100)
    pooled = resample.estimate(shifted)  # the rounds taken as independent draws
    blocked = resample.estimate(shifted, labels)
    assert blocked.half_width > 3 * pooled.half_width
    assert resample.estimate(quiet, labels).half_width < 0.01  # blocks that agree cost nothing
    assert blocked.lo <= blocked.value <= blocked.hi


def test_a_speedup_one_buffer_set_alone_shows_is_no_verdict() -> None:
    rng = np.random.default_rng(1)
    base = np.exp(rng.normal(0.0, 0.005, 150))
    ratio = np.repeat([1.12, 1.10, 0.99], 50)  # the candidate fast on two sets of buffers, not on the third
    cand = base / ratio
    labels = np.repeat([0, 1, 2], 50)
    assert fusion.compare(base, cand).verdict == "pays"  # one block: the rounds' noise alone
    blocked = fusion.compare(base, cand, blocks=labels)
    assert blocked.verdict == "neutral" and blocked.blocks == 3 and blocked.lo < 1.02
    plain = fusion.compare(base, base / 2.0, blocks=labels)
    assert plain.verdict == "pays" and plain.speedup == pytest.approx(2.0, rel=0.02)


class FakeClock:
    """Each launcher returns the time it is said to take; each call sleeps 0.2 ms, so budgets are spent."""

    def time(self, launch) -> float:
        time.sleep(2e-4)
        return launch()


def _timing(**overrides) -> TimingConfig:
    base = {
        "budget_s": 0.03,
        "min_reps": 5,
        "max_reps": 200,
        "warmup": 0,
        "min_blocks": 3,
        "max_blocks": 10,
        "precision": 0.02,
        "max_budget_s": 5.0,
        "input_sets": 1,
    }
    return TimingConfig(**{**base, **overrides})


def _launcher(block_offset: float, noise: float, rng: np.random.Generator):
    return lambda: float(np.exp(block_offset + rng.normal(0.0, noise)))


def test_quiet_data_stops_at_the_least_blocks() -> None:
    rng = np.random.default_rng(2)
    built = []

    def rebuild(block: int, key):
        built.append(block)
        return _launcher(0.0, 0.005, rng)

    found = measure_blocks({"k": _launcher(0.0, 0.005, rng)}, FakeClock(), _timing(), rebuild)
    assert built == [1, 2] and found["k"].buffer_sets == 3
    assert found["k"].precision() < 0.02


def test_noisy_data_runs_to_its_budget() -> None:
    rng = np.random.default_rng(3)
    offsets = itertools.cycle([0.0, 0.3, -0.2, 0.25])

    def rebuild(block: int, key):
        return _launcher(next(offsets), 0.005, rng)

    found = measure_blocks({"k": _launcher(0.0, 0.005, rng)}, FakeClock(), _timing(max_blocks=7), rebuild)
    assert found["k"].buffer_sets == 7 and found["k"].precision() > 0.02
    short = measure_blocks({"k": _launcher(0.0, 0.005, rng)}, FakeClock(), _timing(max_budget_s=0.02), rebuild)
    assert short["k"].buffer_sets == 3  # the budget was spent by the least blocks: none is added


def test_the_canary_is_timed_in_every_round_of_every_block() -> None:
    rng = np.random.default_rng(4)
    canary = iter(range(1, 10_000))
    found = measure_blocks(
        {"k": _launcher(0.0, 0.001, rng)},
        FakeClock(),
        _timing(),
        lambda b, k: _launcher(0.0, 0.001, rng),
        fixed={"canary": lambda: float(next(canary))},
    )
    assert found["canary"].reps == found["k"].reps and found["canary"].blocks == found["k"].blocks


def test_offset_copies_hold_the_values_at_another_place_in_the_page() -> None:
    a = np.random.default_rng(5).standard_normal((33, 193)).astype(np.float16)
    places = set()
    for block in range(4):
        c = honesty.offset_copy(a, block)
        assert np.array_equal(c, a) and c.flags.c_contiguous and c.dtype == a.dtype
        shift = c.ctypes.data - c.base.ctypes.data  # from the start of its own allocation
        assert shift % 64 == 0  # cache-line steps: vector loads stay aligned as they were
        places.add(shift % 4096)
    assert places == {0, 1088, 2176, 3264}


def test_a_run_in_blocks_records_its_buffer_sets_canary_and_precision(tmp_path: Path) -> None:
    from suite.kit import store
    from suite.run.runner import run
    from tests.conftest import make_config

    cfg = make_config(
        "plugins=[tests.fakes]",
        "scenario.name=fake_double",
        "preset=S",
        "backends=[fake]",
        "device=cpu",
        "timing=quick",
        "timing.min_blocks=2",
        "timing.max_blocks=2",
        "dtype=float32",
        "isolate=false",
        "variants=[good]",
    )
    frame = run(cfg, tmp_path, show_progress=False).table
    timed = frame[frame["time_ms"].notna()]
    assert not timed.empty and (timed["buffer_sets"] == 2).all() and (timed["processes"] == 1).all()
    assert timed["precision"].gt(0).all() and timed["canary"].str.contains("floats").all()
    reps = store.load(tmp_path).reps
    assert set(reps["block"]) == {0, 1} and reps["canary_ms"].gt(0).all()


def test_noise_counts_flags_the_threshold_needed_and_verdict_flips(tmp_path: Path, capsys) -> None:
    from suite import noise as noise_command

    def run(name: str, seed: int, verdicts: list[str], speedups: list[float]) -> Path:
        table = rows()
        for row, v, s in zip(table, verdicts, speedups, strict=True):
            row.verdict, row.speedup = v, s
        return write_run(tmp_path / name, table, seed=seed, canary=True, blocks=3)

    a = run("a", 1, ["pays", "", "neutral", "pays", "", "loses"], [2.5, 0, 1.01, 1.3, 0, 0.9])
    b = run("b", 2, ["pays", "", "neutral", "neutral", "", "pays"], [2.4, 0, 1.00, 1.02, 0, 1.05])
    assert noise_command.main(["--runs", str(a), str(b), "--out", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "noise.md").read_text()
    assert "0 of 6 timed rows flagged" in text
    assert "2 of 4 agree (50%); pays ↔ loses: 1; effects of 2× or more in the first run still `pays`: 1 of 1" in text
    assert "loses → pays" in text and "Threshold that keeps 95% of rows quiet here" in text


def test_needed_threshold_is_how_far_the_interval_clears_one() -> None:
    import pandas as pd

    from suite.report import noise_floor

    lines = pd.DataFrame(
        {"ratio": [1.08, 1.08, 0.9, 1.0], "lo": [1.01, 0.99, 0.85, 0.98], "hi": [1.1, 1.2, 0.95, 1.02]}
    )
    assert noise_floor.needed(lines) == pytest.approx([0.01, 0.0, 1 / 0.95 - 1, 0.0])


def test_a_slowed_kernel_spins_its_share_of_its_own_time() -> None:
    from suite.run import slowdown

    assert slowdown.wanted({"slowdown_pct": 20, "slowdown_variant": "fused"}, "fused") == pytest.approx(0.2)
    assert slowdown.wanted({"slowdown_pct": 20, "slowdown_variant": "fused"}, "unfused") == 0.0
    assert slowdown.wanted({}, "fused") == 0.0

    def kernel() -> None:
        time.sleep(0.004)

    kernel.notes = {"stages": 3}
    slowed = slowdown.slowed(kernel, 0.5, lambda: None)
    assert slowed.notes == {"stages": 3, "slowdown_ns": slowed.notes["slowdown_ns"]}
    assert 1.8e6 < slowed.notes["slowdown_ns"] < 4e6  # half of a 4 ms kernel, give or take the sleep's overshoot
    start = time.perf_counter()
    slowed()
    assert time.perf_counter() - start >= 0.004 + slowed.notes["slowdown_ns"] / 1e9


def test_every_backend_takes_the_slowdown_options_and_refuses_bad_ones() -> None:
    from suite.core.backend import BACKENDS
    from suite.core.errors import ConfigError
    from suite.run import validate

    validate.discover()
    numba = BACKENDS["numba"]
    numba.check_options({"slowdown_pct": 20, "slowdown_variant": "unfused"})
    with pytest.raises(ConfigError, match=r"slowdown_pct=120 must be an integer in 0..100"):
        numba.check_options({"slowdown_pct": 120})


def test_a_set_of_buffers_that_cannot_be_built_costs_no_row() -> None:
    from suite.core.registry import KernelKey
    from suite.run import measure
    from suite.run.stages import Check, Stages

    def broken(block: int):
        raise RuntimeError(f"buffer set {block}: output differs from the checked one by 0.5")

    key = KernelKey("s", "numba", "fused", "cpu")
    failed: dict = {}
    rebuild = measure._rebuilder({key: Stages(check=Check("ok", launcher=lambda: None, rebuild=broken))}, failed)
    assert rebuild(1, key) is None and "block 1: RuntimeError: buffer set 1: output differs" in failed[key]
    assert rebuild(2, key) is None  # not tried again
    times = iter(range(1, 1000))
    found = measure_blocks({key: lambda: float(next(times))}, FakeClock(), _timing(), rebuild)
    assert found[key].buffer_sets == 10 and found[key].reps >= 50  # timed on its first buffers throughout


def test_a_rebuilt_kernel_whose_values_depend_on_where_they_live_is_refused(tmp_path: Path) -> None:
    import tests.fakes  # noqa: F401  registers the fake scenario and backend
    from suite.core.registry import REGISTRY, KernelKey
    from suite.core.scenario import SCENARIOS
    from suite.run import runner, validate
    from tests.conftest import make_config

    validate.discover()
    scn = SCENARIOS["fake_double"]
    key = KernelKey("fake_double", "fake", "good", "cpu")
    cfg = make_config(
        "plugins=[tests.fakes]",
        "scenario.name=fake_double",
        "preset=S",
        "backends=[fake]",
        "device=cpu",
        "timing=quick",
        "dtype=float32",
        "isolate=false",
        "variants=[good]",
    )
    job = next(j for j in runner.jobs(cfg, validate.prepare(cfg), tmp_path, set()) if j.params["n"] == 100)
    data = case_inputs.Inputs(scn, "float32", 3)
    avail = build.availability(key, job)
    built, _ = check.build_and_check(key, avail, job, data, scn)
    assert built.status == "ok" and built.rebuild is not None
    assert callable(built.rebuild(1))
    entry = REGISTRY.get(key)

    def off_by_one(inputs, out, params, opts):  # what a kernel reading the wrong place would give
        def launch():
            out[:] = 2 * inputs["x"] + 1

        return launch

    REGISTRY.kernels[key] = off_by_one
    try:
        with pytest.raises(RuntimeError, match="output differs from the checked one"):
            built.rebuild(1)
    finally:
        REGISTRY.kernels[key] = entry


def test_the_rows_say_how_far_they_follow_their_canaries() -> None:
    from suite.report import between_runs

    rng = np.random.default_rng(6)
    canary = rng.normal(0.0, 0.1, 60)
    z = 0.5 * canary + rng.normal(0.0, 0.01, 60)
    assert between_runs.follow(z, canary) == pytest.approx(0.5, abs=0.05)
    moved = z.copy()
    moved[:10] += 0.2  # a change slowed a sixth of the rows
    assert between_runs.follow(moved, canary) == pytest.approx(0.5, abs=0.08)
    assert between_runs.follow(z + 0.3, canary) == pytest.approx(0.5, abs=0.05)  # every row alike: the slope holds
    assert between_runs.follow(z[:5], canary[:5]) == 1.0  # too few rows: the canary taken whole
    assert between_runs.follow(z, np.full(60, 0.69)) == 1.0  # canaries that all moved alike say nothing of β


def test_the_drift_between_runs_is_what_the_rows_scatter_beyond_their_intervals() -> None:
    from suite.report import between_runs

    rng = np.random.default_rng(7)
    s = np.full(200, 0.01)
    assert between_runs.spread(rng.normal(0, 0.01, 200), s) < 0.004  # their own intervals explain them
    drifted = rng.normal(0, np.hypot(0.01, 0.03), 200)
    assert between_runs.spread(drifted, s) == pytest.approx(0.03, rel=0.25)
    drifted[:30] += 0.25  # the rows a change moved barely raise it
    assert between_runs.spread(drifted, s) == pytest.approx(0.03, rel=0.4)
    assert between_runs.spread(drifted[:5], s[:5]) == 0.0
