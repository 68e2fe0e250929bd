"""`compare` on an A/A pair from a noisy host: two identical sweeps (elementwise chain, layernorm, softmax at preset M,
Numba and torch on the CPU, float32) run back to back on a shared 2-core Intel Xeon (Emerald Rapids), kept in
tests/data/aa_noisy_host (each run's results.csv and reps.parquet).

Nothing changed between A and B, yet whole cases moved with the machine, their canaries by other amounts than
their rows. `compare` must flag at most 5% of the rows; a 20% slowdown injected into B's repetitions must stand
out whether it hits one implementation (Numba's fused rows) or one backend (two of a case's four or five rows);
a machine twice as slow, canaries included, must change no verdict. Bootstrap resamples are cut to 400 here
(the intervals' edges move by a few parts in a thousand; the verdicts asserted have margins beyond that).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from suite.kit import store
from suite.report import compare_rows, compare_stats
from suite.report.compare import _times
from suite.report.compare_stats import Reps

DATA = Path(__file__).parent / "data" / "aa_noisy_host"
FLAGS = ("slower", "faster")


@pytest.fixture(scope="module")
def pair():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compare_stats, "RESAMPLES", 400)
        a, b = store.load(DATA / "A"), store.load(DATA / "B")
        matched, _, _ = compare_rows.match(a.results, b.results)
        yield matched, _times(a, b, matched)


def lines(pair, slowed=lambda row: False, factor: float = 1.2, machine: float = 1.0) -> pd.DataFrame:
    """compare's lines with B's repetitions of the rows `slowed` picks multiplied by `factor`, and every repetition
    and canary of B by `machine`."""
    matched, times = pair
    changed = {}
    for row in matched.itertuples(index=False):
        key = (row.row_id_base, row.row_id_new)
        if key not in times:
            continue
        base, new = times[key]
        k = machine * (factor if slowed(row) else 1.0)
        changed[key] = (base, Reps(new.times * k, new.blocks, new.canary * machine, new.excluded))
    return compare_stats.compare(matched, changed, 0.05)


def flagged(found: pd.DataFrame) -> pd.Series:
    return found["verdict"].isin(FLAGS)


@pytest.fixture(scope="module")
def aa(pair) -> pd.DataFrame:
    return lines(pair)


def test_an_aa_pair_flags_at_most_five_percent(aa) -> None:
    timed = aa[np.isfinite(aa["ratio"].astype(float))]
    assert len(timed) == 150
    assert flagged(timed).sum() <= 0.05 * len(timed), timed[flagged(timed)][["case", "implementation", "ratio"]]
    assert aa.attrs["anchor"] == "canary"
    assert not aa["memory"].any()  # resident-set peaks move by a few MiB between identical runs: not a regression
    assert 0.0 < timed["smallest"].median() < 0.25  # what the pair can tell, said in the summary


def test_one_implementation_slowed_stands_out(pair, aa) -> None:
    fused = lambda row: row.backend == "numba" and row.variant == "fused"
    found = lines(pair, fused)
    picked = (found["implementation"] == "numba/cpu fused").to_numpy()
    assert picked.sum() == 35
    assert (found.loc[picked, "verdict"] == "slower").sum() >= 30
    assert flagged(found[~picked]).sum() <= 0.05 * (~picked).sum()
    assert found.attrs["drift"] <= aa.attrs["drift"] + 0.01  # the change went into its effect, not into σ


def test_one_backend_slowed_stands_out(pair) -> None:
    """Two of each case's four or five rows: the case's factor must not split the difference."""
    found = lines(pair, lambda row: row.backend == "numba")
    picked = found["implementation"].str.startswith("numba/").to_numpy()
    assert picked.sum() == 70
    assert (found.loc[picked, "verdict"] == "slower").sum() >= 60
    assert flagged(found[~picked]).sum() <= 0.05 * (~picked).sum()


def test_a_machine_twice_as_slow_changes_no_verdict(pair, aa) -> None:
    found = lines(pair, machine=2.0)
    assert found["verdict"].tolist() == aa["verdict"].tolist()
    assert np.allclose(found["ratio"].astype(float), aa["ratio"].astype(float), rtol=1e-9, equal_nan=True)
