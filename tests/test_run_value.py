"""A run is a value: `run` returns a Result of its own, and the exit status is computed from it, never from what
an earlier run of the same process left behind (in any module, under any name).

Each test makes several runs in one process, with different configs, bad rows (a `mismatch`) in some of them,
in both orders, directly and through the command line (`suite.cli.main`, single runs and `-m` multiruns).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from suite import cli
from suite.run import outcome
from suite.run.result import Result
from suite.run.runner import run
from tests.conftest import make_config

FAKE = ["plugins=[tests.fakes]", "scenario.name=fake_double", "preset=S", "backends=[fake]", "device=cpu",
        "timing=quick", "dtype=float32", "isolate=false"]  # fmt: skip
GOOD = [*FAKE, "variants=[good]", "scenario.n=64"]
BAD = [*FAKE, "variants=[good,wrong]", "scenario.n=96"]
"""`wrong` doubles its input wrongly: each of its rows is a `mismatch`."""


def _run(overrides: list[str], outdir: Path) -> Result:
    return run(make_config(*overrides), outdir, show_progress=False)


@pytest.mark.parametrize("bad_first", [True, False], ids=["bad-first", "good-first"])
def test_two_runs_in_one_process_are_two_independent_results(tmp_path: Path, bad_first: bool) -> None:
    order = [("bad", BAD), ("good", GOOD)] if bad_first else [("good", GOOD), ("bad", BAD)]
    results = {name: _run(overrides, tmp_path / name) for name, overrides in order}
    bad, good = results["bad"], results["good"]
    assert bad.outdir == tmp_path / "bad" and good.outdir == tmp_path / "good"
    assert set(bad.table["variant"]) == {"good", "wrong"} and set(good.table["variant"]) == {"good"}
    assert set(bad.table.loc[bad.table["variant"] == "wrong", "status"]) == {"mismatch"}
    assert set(good.table["status"]) == {"ok"}
    assert (bad.failing, good.failing) == (len(bad.table[bad.table["variant"] == "wrong"]), 0)
    assert (bad.exit_status(strict=True), good.exit_status(strict=True)) == (outcome.FAILED, 0)
    assert bad.exit_status(strict=False) == 0
    for result in (bad, good):  # each names the files it wrote, in its own directory
        assert result.paths and all(p.parent == result.outdir and p.exists() for p in result.paths)
        assert Result.read(result.outdir).table.equals(result.table)


def _exit_status(args: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """What `python -m suite ARGS` exits with, run in this process."""
    monkeypatch.setattr("sys.argv", ["suite"])
    try:
        cli.main(args)
    except SystemExit as done:
        return int(done.code or 0)
    return 0


def test_single_runs_on_the_command_line_exit_from_their_own_rows(tmp_path: Path, monkeypatch) -> None:
    statuses = [_exit_status([*args, f"hydra.run.dir={tmp_path / str(i)}"], monkeypatch)
                for i, args in enumerate([BAD, GOOD, BAD, [*BAD, "strict=false"], GOOD])]  # fmt: skip
    assert statuses == [outcome.FAILED, 0, outcome.FAILED, 0, 0]
    assert (tmp_path / "1" / "report.md").exists()


def test_a_multirun_exits_from_its_merged_table(tmp_path: Path, monkeypatch) -> None:
    """One job of the sweep has a bad row: the sweep exits 3, from the table its Hydra callback merged. A sweep
    of good jobs after it, in the same process, exits 0; so does a bad one with strict=false. The directory the
    command line fixes for a sweep given none (Hydra's default, `${now:...}` resolved once) is where it reads."""
    monkeypatch.chdir(tmp_path)  # the default sweep directory is results/multirun_<time> under the working one
    mixed = ["-m", *FAKE, "scenario.n=64", "variants=[good],[good,wrong]"]
    assert _exit_status(mixed, monkeypatch) == outcome.FAILED
    (sweep,) = (tmp_path / "results").glob("multirun_*")
    merged = Result.read(sweep).table
    assert set(merged["run_id"].str.split("/").str[-1]) == {"0", "1"} and outcome.failing(merged) > 0
    good = ["-m", *GOOD, "scenario.n=64,80", f"hydra.sweep.dir={tmp_path / 'good'}"]
    assert _exit_status(good, monkeypatch) == 0
    assert len(Result.read(tmp_path / "good").table) == 2
    relaxed = [*mixed, "strict=false", f"hydra.sweep.dir={tmp_path / 'relaxed'}"]
    assert _exit_status(relaxed, monkeypatch) == 0
    assert outcome.failing(Result.read(tmp_path / "relaxed").table) > 0
