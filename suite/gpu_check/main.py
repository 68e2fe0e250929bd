"""`python -m suite gpu-check [--out DIR] [--quick] [--dry-run] [--over-budget]`: the check of a CUDA machine, in the environment
at hand (no virtual environment of its own, nothing installed).

Before any work it prints the stack it found (`stack`), what will be skipped and why, its plan and an estimate
(`plan`). Then two separate steps: the gpu tests, each with a time limit (`tests_step`: a failure is reported
and the check goes on), and the sweep of every family in one worker (`sweep_step`); then the report, one
folder that travels (`bundle`) and a one-screen summary. Both steps keep a wall-clock deadline within the
budget (`deadlines`), so a wrong estimate ends in `skipped` rows, not an overrun. `--dry-run` stops after the
plan, on any machine. A
plan whose estimate is over its budget does not start unless `--over-budget` says to (the check is sized to
fit; one that no longer fits is a change to look at, not to find out on a rented GPU).
Exit status: 0 when every test passed and every row is ok or skipped for a reason, 1 otherwise, 2 for bad
input, a plan over its budget, or where no CUDA device answers.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

from suite.gpu_check import bundle, plan, stack

PROG = "python -m suite gpu-check"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """Bad input is one line naming the valid choices, exit status 2."""
        print(
            f"fusebench: error: gpu-check: {message} (valid: --out DIR, --quick, --dry-run, --over-budget)",
            file=sys.stderr,
        )
        sys.exit(2)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = _Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the bundle's folder (default results/<gpu>_<time>, e.g. results/h200_2026-12-05_14-02-11)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="each family at its summary case in float16, the device tests only"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the stack, the plan and the estimate; run nothing"
    )
    parser.add_argument("--over-budget", action="store_true", help="start a plan whose estimate is over its budget")
    return parser.parse_args(argv)


def say(lines: list[str], log: object = None) -> None:
    for line in lines:
        print(line, flush=True)
        if log is not None:
            log.write(line + "\n")  # type: ignore[attr-defined]


def bundle_name(gpu: str, when: datetime) -> str:
    """`h200_2026-12-05_14-02-11`: the GPU's model (its vendor's name left out) and the time, the folder name
    `results/` keeps a GPU's committed bundle under; `gpu_check_<time>` where no GPU answered."""
    model = re.sub(r"[^a-z0-9]+", "_", gpu.lower().removeprefix("nvidia")).strip("_") or "gpu_check"
    return f"{model}_{when:%Y-%m-%d_%H-%M-%S}"


def main(argv: list[str]) -> int:
    args = parse(argv)
    if args.out and args.out.exists() and any(args.out.iterdir()) and not args.dry_run:
        print(f"fusebench: error: gpu-check: --out {args.out} is not empty (name a new folder)", file=sys.stderr)
        return 2
    found = stack.probe_child()
    out = args.out or plan.ROOT / "results" / bundle_name(found.gpu.get("name", ""), datetime.now())
    say(stack.lines(found))
    the_plan = plan.make(args.quick)
    say(the_plan.lines())
    if the_plan.over_budget and not args.over_budget:
        print(
            f"fusebench: error: gpu-check: the plan's estimate ({the_plan.seconds / 60:.1f} min) is over its "
            f"{the_plan.budget_s / 60:.0f} min budget; pass --over-budget to run it anyway",
            file=sys.stderr,
        )
        if not args.dry_run:
            return 2
    if args.dry_run:
        say(dry_run_lines(the_plan, found, out))
        return 0
    if "name" not in found.gpu:
        print(
            f"fusebench: error: gpu-check needs a CUDA device: {found.gpu.get('error', 'none found')}", file=sys.stderr
        )
        return 2
    return run(the_plan, found, out)


def dry_run_lines(the_plan: plan.Plan, found: stack.Stack, out: Path) -> list[str]:
    """What a GPU would run: the test command, each family's overrides, and where the bundle would go."""
    gpu = "" if "name" in found.gpu else " (no CUDA device answers here: nothing would run on this machine)"
    lines = [
        f"dry run   a GPU would run{gpu}:",
        f"  1. pytest -p suite.gpu_check.pytest_limits {' '.join(the_plan.test_args)}  "
        f"(each test limited to {plan.TEST_TIMEOUT_S:.0f} s)",
        "  2. one worker, these cases:",
    ]
    lines += [f"     {' '.join(job)}" for job in the_plan.jobs]
    lines.append(f"  3. report, charts and the bundle into {out}")
    return lines


def deadlines(the_plan: plan.Plan, start: float) -> tuple[float, float]:
    """(end of the tests, end of the sweep) on the clock `start` is read from: the sweep leaves the report its
    reserve (plan.REPORT_RESERVE_S) within the budget, and the tests get their estimate's share of what comes
    before (more than their estimate where the plan is within its budget, so a good estimate is never cut)."""
    before_report = the_plan.budget_s - plan.REPORT_RESERVE_S
    tests_s = the_plan.steps[0].seconds * before_report / max(the_plan.seconds - plan.REPORT_S, 1e-9)
    return start + min(tests_s, before_report), start + before_report


def run(the_plan: plan.Plan, found: stack.Stack, out: Path, clock: Callable[[], float] = time.monotonic) -> int:
    """The tests, the sweep, the report and the bundle, within the plan's budget on `clock`; the exit status."""
    from suite.gpu_check import sweep_step, tests_step
    from suite.run.result import Result
    from suite.sweep.merge import finalize

    work = out.parent / f".{out.name}.work"
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(work / "inductor"))  # one Inductor cache for the check
    os.environ.setdefault("FUSEBENCH_CACHE_DIR", str(work / "resources"))
    log_path = work / "check.log"
    check: dict[str, Any] = {"stack": asdict(found), "plan": the_plan.lines(), "steps": {}}
    estimated = {s.name: s.seconds for s in the_plan.steps}
    with log_path.open("w", encoding="utf-8") as log:
        log.write("\n".join(stack.lines(found) + the_plan.lines()) + "\n")
        started = clock()
        tests_end, sweep_end = deadlines(the_plan, started)
        tests = tests_step.run_tests(
            the_plan.test_args, work / "tests.jsonl", log, deadline=time.time() + tests_end - started
        )
        say(tests.lines(), log)
        check["tests"] = tests.outcomes
        check["steps"]["tests"] = step_time(tests.seconds, estimated["tests"])
        step = clock()
        sweep = sweep_step.run_sweep(the_plan.work, work / "run", log, deadline=sweep_end, clock=clock)
        rows = sweep.rows
        check["steps"]["sweep"] = step_time(clock() - step, estimated["sweep"])
        check["cases"] = sweep.cases
        step = clock()
        finalize(Result(rows, work / "run"))
        check["steps"]["report"] = step_time(clock() - step, estimated["report"])
        lines = bundle.summary(rows, stack.peak_gbps(found.gpu))
        lines += [
            f"time      {name} {t['actual_s']:.0f} s (estimated {t['estimated_s']:.0f} s)"
            for name, t in check["steps"].items()
        ]
        lines.append(f"total     {clock() - started:.0f} s; bundle {out}; the full run {work / 'run'}")
        say(lines, log)
    bundle.write(work / "run", out, check, log_path)
    failed = tests.count("failed") + tests.count("timeout") + bool(tests.note)
    bad = rows["status"].isin(["error", "mismatch"]).sum() if len(rows) else 0
    return 0 if not failed and not bad else 1


def step_time(actual_s: float, estimated_s: float) -> dict[str, float]:
    """A step's time beside its estimate, as the bundle records it."""
    return {"actual_s": round(actual_s, 1), "estimated_s": round(estimated_s, 1)}
