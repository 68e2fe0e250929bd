"""`python -m suite compare`: runs built on disk with the real results.csv / reps.csv columns, compared through
the command line, for the verdicts, the flags, the exit statuses and the files it writes."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from suite import cli
from suite.core.row import COLUMNS, Row, params_json
from suite.report import compare_rows, compare_stats
from suite.run.results import CSV_NAME, REPS_COLUMNS, REPS_NAME

ROOT = Path(__file__).resolve().parent.parent
CASES = [{"n": 4096, "ops": ["scale", "gelu"]}, {"n": 65536, "ops": ["scale", "gelu"]}]
IMPLS = [("numba", "fused", 0.05), ("numba", "unfused", 0.11), ("fake", "fused", 0.07)]
"""(backend, variant, base median ms) of each case; `fake` stands for the backend a change touched."""


def rows(device_name: str = "Test CPU") -> list[Row]:
    out = []
    for case in CASES:
        for backend, variant, ms in IMPLS:
            scale = case["n"] / 4096
            out.append(Row(scenario="elementwise_chain", params=params_json(case), dtype="float32", backend=backend,
                           device="cpu", variant=variant, status="ok", time_ms=ms * scale, max_rel_err=2e-7,
                           mode="native", device_name=device_name, git_rev="abc123",
                           versions=json.dumps({"numba": "0.68.1", "python": "3.11.7"})))  # fmt: skip
    return out


def write_run(directory: Path, table: list[Row], slow: dict[str, float] | None = None, seed: int = 0,
              reps: int = 40, old: bool = False, machine: float = 1.0, canary: bool = False,
              blocks: int = 1) -> Path:  # fmt: skip
    """A run on disk: each row's repetitions around its time (×`slow[backend]`, × `machine` for everything the
    machine runs, the canary included), 2% noise; `canary`: a canary timed in every round (its own 2% noise, and
    a drift shared with the row's repetition of the round); `blocks`: the rounds split into that many blocks;
    `old`: a run from before row ids and reps.csv."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    records, lines = [], []
    for i, row in enumerate(table):
        row = replace(row, row_id=f"{directory.name}#{i}")
        if row.time_ms is not None:
            drift = rng.lognormal(0.0, 0.03, reps) if canary else np.ones(reps)  # the round's machine state
            times = row.time_ms * machine * (slow or {}).get(row.backend, 1.0) * drift * rng.lognormal(0.0, 0.02, reps)
            canaries = 0.5 * machine * drift * rng.lognormal(0.0, 0.02, reps) if canary else np.full(reps, np.nan)
            row.time_ms = float(np.median(times))
            row.canary = "copy, 4096 floats" if canary else ""
            lines += [(row.row_id, row.variant, r, t, r * blocks // reps, c if canary else "", False)
                      for r, (t, c) in enumerate(zip(times, canaries, strict=True))]  # fmt: skip
        records.append(row.as_record())
    frame = pd.DataFrame(records, columns=COLUMNS)
    if old:
        frame.drop(columns=["row_id"]).to_csv(directory / CSV_NAME, index=False)
        return directory
    frame.to_csv(directory / CSV_NAME, index=False)
    pd.DataFrame(lines, columns=REPS_COLUMNS).to_csv(directory / REPS_NAME, index=False)
    env = {"git_rev": "abc123", "python": "3.11.7", "distributions": {"numba": "0.68.1", "torch": "2.13.0"}}
    (directory / "environment.json").write_text(json.dumps(env))
    return directory


def compare(capsys: pytest.CaptureFixture, *args: object) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["compare", *map(str, args)])
    out, err = capsys.readouterr()
    return exit_.value.code, out, err


def lines_of(base: Path, new: Path, threshold: float = 0.05) -> pd.DataFrame:
    """The comparison's lines, through the same functions the command uses."""
    from suite.kit import store
    from suite.report.compare import _times

    b, n = store.load(base), store.load(new)
    matched, _, _ = compare_rows.match(b.results, n.results)
    return compare_stats.compare(matched, _times(b, n, matched), threshold)


def test_a_run_against_itself_is_all_same(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = write_run(tmp_path / "a", rows())
    code, out, _ = compare(capsys, run, run, "--fail-on-regression")
    assert code == 0
    lines = lines_of(run, run)
    assert (lines["verdict"] == "same").all() and (lines["ratio"] == 1.0).all() and lines["interval"].all()
    assert f"{len(lines)} compared: 0 slower, {len(lines)} same, 0 faster" in out


def test_a_backend_slowed_by_a_fifth_is_slower(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    base = write_run(tmp_path / "base", rows(), seed=1)
    new = write_run(tmp_path / "new", rows(), slow={"fake": 1.2}, seed=2)
    lines = lines_of(base, new)
    fake = lines["implementation"].str.startswith("fake/")
    assert (lines.loc[fake, "verdict"] == "slower").all()
    assert (lines.loc[~fake, "verdict"] == "same").all()
    assert ((lines.loc[fake, "lo"] > 1.1) & (lines.loc[fake, "hi"] < 1.3)).all()  # the interval holds the 1.2
    assert compare(capsys, base, new)[0] == 0
    code, out, _ = compare(capsys, base, new, "--fail-on-regression")
    assert code == 1 and "2 slower" in out


def test_the_other_way_round_is_faster(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", rows(), seed=1)
    new = write_run(tmp_path / "new", rows(), slow={"fake": 1.2}, seed=2)
    lines = lines_of(new, base)
    fake = lines["implementation"].str.startswith("fake/")
    assert (lines.loc[fake, "verdict"] == "faster").all() and not lines["regressed"].any()


def test_a_change_within_the_threshold_is_same(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """4% slower, real (the interval excludes 1) but inside the ±5% band; a 2% threshold, which the whole
    interval clears, calls it slower."""
    base = write_run(tmp_path / "base", rows(), seed=1, reps=200)
    new = write_run(tmp_path / "new", rows(), slow={"fake": 1.04}, seed=2, reps=200)
    fake = lines_of(base, new)["implementation"].str.startswith("fake/")
    assert (lines_of(base, new).loc[fake, "verdict"] == "same").all()
    assert (lines_of(base, new, threshold=0.02).loc[fake, "verdict"] == "slower").all()
    assert compare(capsys, base, new, "--fail-on-regression")[0] == 0
    assert compare(capsys, base, new, "--fail-on-regression", "--threshold", "2")[0] == 1


def test_an_injected_mismatch_is_broke(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    table = rows()
    table[1] = replace(table[1], status="mismatch", reason="max_rel_err 0.3 > tolerance 1e-5", max_rel_err=0.3)
    base, new = write_run(tmp_path / "base", rows()), write_run(tmp_path / "new", table, seed=3)
    lines = lines_of(base, new)
    assert lines.loc[1, "flags"].startswith("broke (ok→mismatch)") and lines["broke"].sum() == 1
    assert compare(capsys, base, new)[0] == 0
    code, out, _ = compare(capsys, base, new, "--fail-on-regression")
    assert code == 1 and "1 broke" in out
    fixed = lines_of(new, base)
    assert fixed.loc[1, "flags"].startswith("fixed (mismatch→ok)") and not fixed["regressed"].any()


def test_numerics_ten_times_worse_are_flagged(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    table = rows()
    table[0] = replace(table[0], max_rel_err=3e-6)  # 15× the base's 2e-7
    table[2] = replace(table[2], max_rel_err=1.5e-6)  # 7.5×: not flagged
    base, new = write_run(tmp_path / "base", rows()), write_run(tmp_path / "new", table, seed=3)
    lines = lines_of(base, new)
    assert lines["numerics"].tolist() == [True] + [False] * (len(lines) - 1)
    assert "numerics 2e-07→3e-06" in lines.loc[0, "flags"]
    code, out, _ = compare(capsys, base, new, "--fail-on-regression")
    assert code == 1 and "1 numerics 10× worse" in out


def test_numerics_below_epsilon_are_measured_from_epsilon() -> None:
    eps = float(np.finfo(np.float32).eps)
    assert not compare_stats.numerics_worse(0.0, 9 * eps, "float32")
    assert compare_stats.numerics_worse(0.0, 11 * eps, "float32")
    assert not compare_stats.numerics_worse(0.0, 11 * eps, "float16")  # float16's epsilon is larger


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["{missing}", "{a}"], "no run at"),
        (["{a}", "{other}"], "no rows in common"),
        (["{a}", "{gpu}"], "different devices"),
        (["{a}", "{a}", "--threshold", "0"], "--threshold must be a positive number"),
        (["{a}", "{a}", "--threshold", "-5"], "--threshold must be a positive number"),
        (["{a}", "{a}", "--threshold", "five"], "--threshold must be a positive number"),
        (["{a}", "{a}", "--threshold", "nan"], "--threshold must be a positive number"),
        (["{a}"], "the following arguments are required: NEW"),
        (["{a}", "{a}", "--frobnicate"], "unrecognized arguments"),
    ],
    ids=["missing", "nothing-in-common", "device-change", "zero", "negative", "word", "nan", "one-run", "flag"],
)
def test_bad_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture, args: list, says: str) -> None:
    runs = {"a": write_run(tmp_path / "a", rows()), "missing": tmp_path / "nope",
            "gpu": write_run(tmp_path / "gpu", rows(device_name="Other CPU")),
            "other": write_run(tmp_path / "other", [replace(r, dtype="float16") for r in rows()])}  # fmt: skip
    code, out, err = compare(capsys, *(a.format(**runs) for a in args))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("fusebench: error: ") and says in err


def test_a_device_change_is_compared_when_allowed(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    base, new = write_run(tmp_path / "a", rows()), write_run(tmp_path / "b", rows(device_name="Other CPU"))
    code, out, _ = compare(capsys, base, new, "--allow-device-change")
    assert code == 0 and "Test CPU -> Other CPU" in out
    assert "Devices differ" in (new / "compare_a" / "compare.md").read_text()


def test_files_are_written_with_provenance(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    base = write_run(tmp_path / "base", rows(), seed=1)
    new = write_run(tmp_path / "new", rows(), slow={"fake": 1.2}, seed=2)
    assert compare(capsys, base / CSV_NAME, new)[0] == 0  # a results.csv stands for its run
    md = (new / "compare_base" / "compare.md").read_text()
    assert (new / "compare_base" / "compare.png").read_bytes()[:4] == b"\x89PNG"
    assert "| git_rev | abc123 | abc123 |" in md and "| device_name | Test CPU | Test CPU |" in md
    assert "| torch | 2.13.0 | 2.13.0 |" in md and "| numba | 0.68.1 | 0.68.1 |" in md
    assert md.count("| slower |") == 2 and md.count("| same |") == 4 and "the whole interval above 1.05" in md
    out = tmp_path / "elsewhere"
    assert compare(capsys, base, new, "--out", out)[0] == 0
    assert (out / "compare.md").exists() and (out / "compare.png").exists()


def test_a_run_without_repetitions_gets_a_ratio_without_interval(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    base = write_run(tmp_path / "old", rows(), old=True)
    new = write_run(tmp_path / "new", rows(), slow={"fake": 1.5}, seed=2)
    lines = lines_of(base, new)
    assert not lines["interval"].any() and lines["lo"].isna().all() and lines["ratio"].notna().all()
    assert lines["flags"].str.contains("no interval").all()
    fake = lines["implementation"].str.startswith("fake/")
    assert (lines.loc[fake, "verdict"] == "slower").all()  # without an interval the band alone decides
    code, out, _ = compare(capsys, base, new)
    assert code == 0 and "no interval" in out
    row = next(line for line in (new / "compare_old" / "compare.md").read_text().splitlines() if "fake/cpu" in line)
    assert "[" not in row.split("|")[5]  # the ratio cell holds no interval


def test_rows_on_one_side_are_added_or_removed(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    table = rows()
    base = write_run(tmp_path / "base", table[:-1])
    new = write_run(tmp_path / "new", table[1:])
    code, out, _ = compare(capsys, base, new, "--fail-on-regression")
    assert code == 0 and "1 removed, 1 added" in out
    md = (new / "compare_base" / "compare.md").read_text()
    assert "## Only in BASE (removed)" in md and "## Only in NEW (added)" in md


def test_a_repeated_key_matches_by_order_of_occurrence() -> None:
    """A multirun sweeping a backend option repeats a key: the n-th in BASE meets the n-th in NEW."""
    row = rows()[0]
    base = pd.DataFrame([replace(row, time_ms=t, row_id=f"b#{i}").as_record() for i, t in enumerate((1.0, 2.0))])
    new = pd.DataFrame([replace(row, time_ms=t, row_id=f"n#{i}").as_record() for i, t in enumerate((1.0, 2.0, 3.0))])
    matched, removed, added = compare_rows.match(base, new)
    assert matched[["row_id_base", "row_id_new"]].values.tolist() == [["b#0", "n#0"], ["b#1", "n#1"]]
    assert removed.empty and added["row_id"].tolist() == ["n#2"]
    lines = compare_stats.compare(matched, {}, 0.05)
    assert lines["implementation"].tolist() == ["numba/cpu fused", "numba/cpu fused (2nd)"]


def test_the_interval_is_seeded_and_holds_the_ratio() -> None:
    rng = np.random.default_rng(7)
    base, new = rng.lognormal(0, 0.05, 30), 1.3 * rng.lognormal(0, 0.05, 25)
    first, again = compare_stats.ratio(base, new, seed=3), compare_stats.ratio(base, new, seed=3)
    assert (first.ratio, first.lo, first.hi) == (again.ratio, again.lo, again.hi)
    assert first.lo < first.ratio < first.hi and first.lo > 1.2 and first.hi < 1.4
    assert first.ratio == pytest.approx(np.exp(np.median(np.log(new)) - np.median(np.log(base))))


def test_the_command_runs_as_a_module(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", rows(), seed=1)
    new = write_run(tmp_path / "new", rows(), slow={"fake": 1.2}, seed=2)
    cmd = [sys.executable, "-m", "suite", "compare", str(base), str(new), "--fail-on-regression"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "fake/cpu fused" in done.stdout and "slower" in done.stdout
    bad = subprocess.run([*cmd[:4], str(tmp_path / "none"), str(new)], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and bad.stderr.startswith("fusebench: error: no run")


@pytest.mark.parametrize(
    ("ratio", "lo", "hi", "expected"),
    [
        (1.2, 1.1, 1.3, "slower"),
        (1.2, 0.9, 1.5, "same"),  # beyond the band but the interval holds 1: noise, not a change
        (1.03, 1.01, 1.05, "same"),  # real but inside the band
        (0.8, 0.7, 0.9, "faster"),
        (0.8, 0.6, 1.1, "same"),
        (1 / 1.06, 0.9, 0.95, "faster"),  # below 1/(1+t): the mirror of 1.06
        (1.2, np.nan, np.nan, "slower"),  # no interval: the band alone
        (np.nan, np.nan, np.nan, ""),
    ],
)
def test_the_verdict_rule(ratio: float, lo: float, hi: float, expected: str) -> None:
    assert compare_stats.verdict(ratio, lo, hi, 0.05) == expected
