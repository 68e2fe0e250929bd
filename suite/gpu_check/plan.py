"""The check's plan and its time estimate, printed before any work: what runs, how many of it, how long.

The sweep is every registered family in every phase it registers (`jobs`: its own GPU experiment, the other
phases at its summary case), under CHECK_TIMING (one worker, a bounded budget per implementation). `--quick`
narrows each job to its summary case and the tests to tests/test_gpu_device.py. The estimate is `estimate`'s
model per case, plus per test TEST_S or FAMILY_TEST_S, the worker's start and the report. A sweep over the
budget is cut by `fit` (sizes before families) and the plan says what was cut; a plan still over its budget
(the tests alone) does not start without `--over-budget`. Every constant is a guess until a GPU has run it: the
check records each step's real time beside its estimate.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from suite.core.phases import FORWARD, TRAIN
from suite.gpu_check import estimate, fit
from suite.gpu_check.estimate import Estimate
from suite.gpu_check.jobs import CHECK_TIMING, FamilyJob, family_jobs, measured_families, sitting_out

ROOT = Path(__file__).resolve().parents[2]
__all__ = ["CHECK_TIMING", "Plan", "Step", "make"]

TESTS = [
    "-m",
    "gpu",
    "tests",
    "--deselect",
    "tests/test_gpu_stream.py::test_every_cuda_implementation_runs_on_the_shared_stream",
    "--deselect",
    "tests/test_gpu_device.py::test_the_sweeps_configurations_are_right_in_every_cuda_backend",
    "--deselect",
    "tests/test_gpu_launch_limits.py::test_cupy_normalization_kernels_load_and_run_with_1024_threads",
]
"""Every gpu test but three that cost a family's sweep each and that the check's own sweep repeats or that need
an option it does not use: the per-family stream test (the sweep runs the same stream check in every
implementation's build-and-check, and one off the shared stream is an `error` row), the sweep's configurations
on small rows (the sweep runs them at full size) and CuPy's 1024-thread blocks (backend_options.cupy.block=1024).
`pytest -m gpu tests` runs them all."""
QUICK_TESTS = ["-m", "gpu", "tests/test_gpu_device.py", "-k", "do_bench or flush or graph_timing"]
"""--quick: the timer against do_bench, the L2 flush and graph capture; numerics come from the sweep's rows."""

STARTUP_S = 25.0
"""The worker's start: importing torch, Triton, CuPy and Numba, the CUDA context, the ceiling's copies."""
TEST_S = 4.0
"""One gpu test that measures or launches one thing (a copy against do_bench, the flush, the stream, a grid)."""
FAMILY_TEST_S = 25.0
"""One gpu test that runs a family's small cases through the hand-written CUDA backends: 4-8 cases in two dtypes,
each built cold. The sweep's own model (`job_estimate`) gives 23 s for most families' awkward shapes and 54 s
for matmul's eight cases, with COMPILE_S's guesses; tests in one process share Triton's and Numba's builds."""
FAMILY_TESTS = (
    "test_every_cuda_kernel_is_right_on_the_device",
    "test_the_sweeps_configurations_are_right_in_every",
    "test_every_cuda_implementation_runs_on_the_shared_stream",
    "test_graph_timing_captures_real_launchers",
    "test_cupy_normalization_kernels_load_and_run_with",
)
"""Tests (by the start of their name) that cost FAMILY_TEST_S; every other gpu test costs TEST_S."""
TEST_TIMEOUT_S = 120.0
"""Each gpu test's limit: one past it is reported as timed out and the others still run."""
REPORT_S = 30.0
"""Charts, report and the bundle."""
REPORT_RESERVE_S = 3 * REPORT_S
"""What the sweep leaves the report before the budget's end, on the clock and in the fit: the report is the one
step nothing can cut, so the check ends within its budget even where it runs three times its estimate."""
BUDGET_S = {"default": 540.0, "quick": 420.0}
"""What each plan must fit in on one H100/H200, estimate included; `--over-budget` starts one that does not.
--quick is every family's forward at its summary case, in float16, with the device tests: seven minutes. Each
was a minute shorter until decoder_layer composed on the CUDA backends: a twelfth family's forward, about 20 s
at its summary case, did not fit beside the eleven."""


@dataclass
class Step:
    name: str
    what: str
    seconds: float


@dataclass
class Plan:
    quick: bool
    work: list[Estimate] = field(default_factory=list)
    """Each family job and its estimate, in the order the sweep runs them."""
    test_args: list[str] = field(default_factory=list)
    tests: int = 0
    family_tests: int = 0
    """Of `tests`, those that run a family through every CUDA backend (FAMILY_TESTS)."""
    steps: list[Step] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    """What `fit` cut to bring the sweep within the budget, one line each."""

    @property
    def jobs(self) -> list[list[str]]:
        """Each family job's Hydra overrides."""
        return [e.job.overrides for e in self.work]

    @property
    def families(self) -> list[str]:
        return list(dict.fromkeys(e.job.family for e in self.work))

    @property
    def cases(self) -> int:
        return sum(e.cases for e in self.work)

    @property
    def implementations(self) -> int:
        return sum(e.implementations for e in self.work)

    @property
    def rare_skipped(self) -> int:
        """torch.compile rows left `skipped` outside the summary cases (estimate.RARE)."""
        return sum(e.rare_skipped for e in self.work)

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.steps)

    @property
    def budget_s(self) -> float:
        return BUDGET_S["quick" if self.quick else "default"]

    @property
    def over_budget(self) -> bool:
        return self.seconds > self.budget_s

    def lines(self) -> list[str]:
        out = [
            f"plan      {'--quick' if self.quick else 'default'}: {self.tests} gpu tests, then {self.cases} cases "
            f"({self.implementations} CUDA implementations) of {len(self.families)} families, then the report"
        ]
        out += [f"  {s.name:<9} ≈ {s.seconds:5.0f} s  {s.what}" for s in self.steps]
        out += family_lines(self.work)
        out += self.dropped
        verdict = "within" if not self.over_budget else "OVER"
        out.append(
            f"estimate  ≈ {self.seconds / 60:.1f} min ({verdict} the {self.budget_s / 60:.0f} min budget; "
            "constants in suite/gpu_check/estimate.py and plan.py are guesses, not yet calibrated on a GPU)"
        )
        return out


def extras() -> dict[str, str]:
    """Backend -> the install extra it needs beyond the CUDA stack: an extra of fusebench's named after the
    backend (`fusebench[liger]`)."""
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        names = metadata("fusebench").get_all("Provides-Extra") or []
    except PackageNotFoundError:  # the tree run from a checkout that was never installed
        return {}
    return {name: f"fusebench[{name}]" for name in names}


def family_lines(work: list[Estimate]) -> list[str]:
    """Per family job: its dtypes, cases, implementations and estimate, and what each backend would run."""
    needs = extras()
    out = ["  families  (in the sweep's order; a backend marked [needs ...] runs only where that extra is installed)"]
    for e in work:
        kernels = " · ".join(
            f"{backend} {'/'.join(sorted(variants))}" + (f" [needs {needs[backend]}]" if backend in needs else "")
            for backend, variants in sorted(e.kernels.items())
        )
        out.append(
            f"    {e.job.label:<32} {','.join(e.dtypes):<17} {e.cases:>2} cases {e.implementations:>3} impl "
            f"≈ {e.seconds:4.0f} s  {kernels or 'no CUDA kernel registered'}"
        )
    return out


def collect_tests(args: list[str]) -> list[str]:
    """The node ids of the gpu tests pytest collects for `args` (collection only: nothing runs); [] where
    collection fails."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    return [line.strip() for line in done.stdout.splitlines() if "::" in line]


def is_family_test(node: str) -> bool:
    return node.split("::")[-1].startswith(FAMILY_TESTS)


AWKWARD_TEST = "tests/test_gpu_device.py::test_every_cuda_kernel_is_right_on_the_device["
"""A family's awkward shapes through the hand-written CUDA kernels: the one gpu test the plan may leave out of a
check too short for every family's forward, so that the family's sweep still runs (its rows check its numerics,
at the sweep's sizes); the families measured on a GPU before lose theirs first."""


def make(quick: bool, tests: list[str] | None = None) -> Plan:
    """The plan of a check; `tests` (the gpu tests' node ids) are collected where not given. A sweep over what the
    budget leaves after the tests is cut to fit (`fit`); where that would drop a family's train step, or failing
    that its forward, families' awkward-shapes tests (AWKWARD_TEST; `pytest -m gpu` still runs them) go first, as
    many as that takes and only where it is enough, and the plan says so."""
    plan = Plan(quick, test_args=QUICK_TESTS if quick else TESTS)
    nodes = collect_tests(plan.test_args) if tests is None else tests
    jobs = family_jobs(quick, measured_families(ROOT / "results"))
    work = [estimate.job_estimate(job) for job in jobs]
    order = {job.family: i for i, job in reversed(list(enumerate(jobs)))}
    spare = sorted(
        (n for n in nodes if n.startswith(AWKWARD_TEST)), key=lambda n: -order.get(n[len(AWKWARD_TEST) : -1], 0)
    )
    spare_s = lambda tests_s: plan.budget_s - tests_s - STARTUP_S - REPORT_RESERVE_S
    for phases_kept in ((FORWARD, TRAIN), (FORWARD,)):
        wanted = {(e.job.family, e.job.phase) for e in work if e.job.phase in phases_kept}
        left_out: list[str] = []
        while True:
            kept = [n for n in nodes if n not in left_out]
            plan.tests, plan.family_tests = len(kept), sum(map(is_family_test, kept))
            tests_s = STARTUP_S / 2 + plan.family_tests * FAMILY_TEST_S + (plan.tests - plan.family_tests) * TEST_S
            plan.work, plan.dropped = fit.fit(work, spare_s(tests_s), cached_estimate)
            reached = {(e.job.family, e.job.phase) for e in plan.work} >= wanted
            if reached or len(left_out) == len(spare):
                break
            left_out.append(spare[len(left_out)])
        if reached or phases_kept == (FORWARD,):  # tests are given up only for what they buy
            break
    plan.test_args = [*plan.test_args, *(a for node in left_out for a in ("--deselect", node))]
    plan.dropped += [
        f"dropped   gpu test {node}: so that every family's {' and '.join(phases_kept)} fits (≈ {FAMILY_TEST_S:.0f} s)"
        for node in left_out
    ]
    plan.dropped += [f"left out  {name}: {why}" for name, why in sorted(sitting_out().items())]
    rare = f", torch.compile at each summary case only ({plan.rare_skipped} rows skipped)" if plan.rare_skipped else ""
    plan.steps = [
        Step(
            "tests",
            f"{plan.tests} gpu tests ({plan.family_tests} of them sweep a family), {TEST_TIMEOUT_S:.0f} s limit each",
            tests_s,
        ),
        Step(
            "sweep",
            f"{plan.cases} cases × their CUDA implementations, one worker{rare}",
            STARTUP_S + sum(e.seconds for e in plan.work),
        ),
        Step("report", "charts, report.md, the bundle and the summary", REPORT_S),
    ]
    return plan


@functools.lru_cache(maxsize=256)
def cached_estimate(job: FamilyJob) -> Estimate:
    """`estimate.job_estimate`, once per job: fitting tries the same narrowed jobs again."""
    return estimate.job_estimate(job)
