"""The GPU check within its budget when its estimate is wrong, on a fake GPU clock: every step three times slower
than estimated, the check still ends by its deadline, writes what it did not reach as `skipped` rows with the
reason, and leaves a complete bundle with each step's time beside its estimate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from suite.core.row import params_json
from suite.gpu_check import estimate, jobs, main, plan, stack, sweep_step, tests_step
from suite.gpu_check.estimate import Estimate
from suite.run import result_rows, validate
from suite.run.job import Case
from suite.run.stages import Check, Stages
from suite.run.worker import WorkerLost

SLOW = 3.0


class FakeClock:
    """Seconds that pass only when a fake step says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fake_work(case_s: float) -> list[Estimate]:
    """Two families at their summary case, each case estimated at `case_s`."""
    out = []
    for job in [j for j in jobs.family_jobs(quick=True) if j.phase == "forward"][:2]:
        est = Estimate(job, dtypes=("float16",))
        p = validate.plan(estimate.job_config(job))
        for params in p.cases:
            for dtype in p.dtypes:
                est.case_seconds[(params_json(params), dtype)] = case_s
                est.cases, est.seconds = est.cases + 1, est.seconds + case_s
        out.append(est)
    return out


def test_steps_three_times_slower_than_estimated_end_by_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    work = fake_work(case_s=40.0)
    the_plan = plan.Plan(False, work, test_args=["-m", "gpu"], tests=5)
    the_plan.steps = [
        plan.Step("tests", "", 100.0),
        plan.Step("sweep", "", plan.STARTUP_S + sum(e.seconds for e in work)),
        plan.Step("report", "", plan.REPORT_S),
    ]
    assert the_plan.seconds <= the_plan.budget_s  # within budget on paper

    def fake_tests(args: list[str], ledger: Path, log: Any, deadline: float) -> tests_step.TestsResult:
        import time

        took = min(SLOW * the_plan.steps[0].seconds, deadline - time.time())
        clock.now += took
        return tests_step.TestsResult({"t::a": {"outcome": "passed"}}, took)

    class FakeWorker:
        def __init__(self, settings: Any) -> None:
            clock.now += SLOW * plan.STARTUP_S
            self.info = {"ceilings": {}, "environment": {"gpu": "fake"}}

        def run(self, job: Any, timeout_s: float) -> list:
            est = next(e for e in work if e.job.family == job.scenario)
            took = SLOW * est.case_seconds[(params_json(job.params), job.dtype)]
            clock.now += min(took, timeout_s)
            if took > timeout_s:
                raise WorkerLost(f"past its limit of {timeout_s:.0f} s")
            ok = Stages(check=Check("ok"))
            return [result_rows.assemble(k, Case.lost(job), ok) for k in job.keys()]

        def close(self) -> None:
            pass

    def fake_finalize(result: Any) -> None:
        clock.now += SLOW * plan.REPORT_S
        (result.outdir / "report.md").write_text("# report\n")

    monkeypatch.setattr(tests_step, "run_tests", fake_tests)
    monkeypatch.setattr(sweep_step, "Worker", FakeWorker)
    monkeypatch.setattr("suite.sweep.merge.finalize", fake_finalize)
    start, out = clock.now, tmp_path / "bundle"
    main.run(the_plan, stack.Stack(gpu={"name": "fake"}), out, clock=clock)

    assert clock.now - start <= the_plan.budget_s
    rows = pd.read_parquet(out / "results.parquet")
    late = rows[rows["reason"].isin([sweep_step.LATE, sweep_step.CUT])]
    assert len(late) and (late["status"] == "skipped").all()
    assert (rows["status"] == "ok").any()  # the first cases ran
    assert {"results.parquet", "report.md", "environment.json", "check.log"} <= {p.name for p in out.iterdir()}
    check = json.loads((out / "environment.json").read_text())["gpu_check"]
    assert set(check["steps"]) == {"tests", "sweep", "report"}
    assert all({"actual_s", "estimated_s"} <= set(t) for t in check["steps"].values())
    assert check["steps"]["report"]["actual_s"] == pytest.approx(SLOW * plan.REPORT_S)
    assert check["cases"] and all({"estimated_s", "actual_s"} <= set(c) for c in check["cases"])


def test_no_gpu_test_starts_past_the_tests_deadline(tmp_path: Path) -> None:
    """The real limits plugin in a child pytest: a deadline already past skips every test, saying why."""
    import time

    (tmp_path / "test_sample.py").write_text("def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    with (tmp_path / "check.log").open("w") as log:
        found = tests_step.run_tests([str(tmp_path / "test_sample.py")], tmp_path / "ledger.jsonl", log,
                                     deadline=time.time() - 1)  # fmt: skip
    assert [e["outcome"] for e in found.outcomes.values()] == ["skipped", "skipped"]
    assert all("deadline" in e["message"] for e in found.outcomes.values())
