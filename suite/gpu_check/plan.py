"""The check's plan and its time estimate, printed before any work: what runs, how many of it, how long.

The sweep is every family's `conf/experiment/gpu_*.yaml` under CHECK_TIMING (one worker process, a bounded
budget per implementation); torch.compile, the costliest build, only at each family's summary case (RARE), the
other cases' compiled rows `skipped` with that reason. `--quick` narrows each family to that case (QUICK) and
the tests to tests/test_gpu_device.py. The estimate is a model with its constants written here, per
implementation: a compile (COMPILE_S, by backend and variant) and its timing (the timing budget, graphs and
energy included), per case the host's work (inputs and the float64 reference: the ledger's bytes and FLOPs at
HOST_BYTES_S and HOST_FLOPS), per test TEST_S or FAMILY_TEST_S. Every constant is a guess for an H100/H200
host, not yet calibrated on one: the check prints each step's real time beside its estimate, so the next
revision can correct them. A plan over its budget does not start without `--over-budget`.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = {"elementwise_chain": "gpu_elementwise", "layernorm": "gpu_layernorm", "rmsnorm": "gpu_rmsnorm",
            "softmax": "gpu_softmax", "attention": "gpu_attention", "matmul": "gpu_matmul"}  # fmt: skip
"""Family -> its experiment file under conf/experiment. A family from outside the tree joins at its own sizes
(`plug_in_jobs`): the check's plan is derived from the registry."""
CHECK_TIMING = [
    "timing.processes=1",
    "timing.budget_s=0.05",
    "timing.max_budget_s=0.15",
    "timing.energy_s=0.02",
    "timing.case_timeout_s=120",
]
"""One worker times every case (its repetitions are not pooled over two processes: the check asks whether the
suite works on this machine, not for the last percent); each implementation gets at most 0.15 s of rounds."""
QUICK = {
    "elementwise_chain": ["scenario.n=[16777216]"],
    "layernorm": ["scenario.cols=[8192]"],
    "rmsnorm": ["scenario.cols=[8192]"],
    "softmax": ["scenario.cols=[8192]"],
    "attention": ["scenario.seq_len=[4096]", "scenario.head_dim=[128]", "scenario.causal=[true]"],
    "matmul": ["scenario.epilogue=[bias_gelu]"],
}
"""--quick: each family's largest case only, the configurations a GPU first meets."""
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
COMPILE_S = {"triton": 1.5, "cupy": 1.0, "numba": 1.5, "torch/eager": 0.3, "torch/compiled": 4.0}
"""Seconds to build one implementation (the first JIT of its kernels at that shape and dtype)."""
SHAPE_GENERIC = ("triton", "numba")
"""Backends whose kernels take the shape at run time: built once per family, variant and dtype, not per case
(CuPy's sources and torch.compile's graphs are specialised to the shape)."""
DEFAULT_COMPILE_S = 1.0
HOST_BYTES_S = 1.5e9
"""Bytes a second the host makes inputs and checks outputs at (float64 reference, 16 cores)."""
HOST_FLOPS = 3e10
"""float64 FLOPs a second of the host's reference (NumPy's BLAS on 16 cores)."""
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
BUDGET_S = {"default": 480.0, "quick": 240.0}
"""What each plan must fit in on one H100/H200, estimate included; `--over-budget` starts one that does not."""
RARE = ("torch", "compiled")
"""(backend, variant) built only at each family's summary case (`summary_case`): a cold torch.compile is the
dearest build of the sweep (COMPILE_S), and the summary's fused-vs-torch.compile ratio needs it there only."""


@dataclass
class Step:
    name: str
    what: str
    seconds: float


@dataclass
class Plan:
    quick: bool
    jobs: list[list[str]] = field(default_factory=list)
    """Each family's Hydra overrides."""
    test_args: list[str] = field(default_factory=list)
    tests: int = 0
    family_tests: int = 0
    """Of `tests`, those that run a family through every CUDA backend (FAMILY_TESTS)."""
    cases: int = 0
    implementations: int = 0
    rare_skipped: int = 0
    """torch.compile rows left `skipped` outside the summary cases (RARE)."""
    steps: list[Step] = field(default_factory=list)

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
            f"({self.implementations} CUDA implementations) of {len(self.jobs)} families, then the report"
        ]
        out += [f"  {s.name:<9} ≈ {s.seconds:5.0f} s  {s.what}" for s in self.steps]
        verdict = "within" if not self.over_budget else "OVER"
        out.append(
            f"estimate  ≈ {self.seconds / 60:.1f} min ({verdict} the {self.budget_s / 60:.0f} min budget; "
            "constants in suite/gpu_check/plan.py are guesses, not yet calibrated on a GPU)"
        )
        return out


def sweep_jobs(quick: bool) -> list[list[str]]:
    jobs = []
    for family, experiment in FAMILIES.items():
        extra = QUICK[family] if quick else []
        jobs.append([f"experiment={experiment}", *CHECK_TIMING, *extra])
    return jobs + plug_in_jobs(quick)


def plug_in_jobs(quick: bool) -> list[list[str]]:
    """A job for each family registered from outside the tree (an entry point, a plug-in module): its preset
    (`S` under --quick, else `M`) on the GPU, in the dtypes of a default run it has (else its own)."""
    from suite.core import scenario as scenarios

    jobs = []
    for name in scenarios.plug_ins():
        own = scenarios.get(name).dtypes
        dtypes = [d for d in ("float32", "float16") if d in own] or list(own)
        jobs.append(
            [
                f"scenario={name}",
                f"preset={'S' if quick else 'M'}",
                f"dtype=[{','.join(dtypes)}]",
                "device.targets=[cuda]",
                *CHECK_TIMING,
            ]
        )
    return jobs


def summary_case(scenario: Any, cases: list[dict], dtypes: list[str]) -> tuple[str, str]:
    """(params as JSON, dtype) of the case the summary reads and torch.compile is built for: the largest
    (`scenario.size`), the last of equals in the sweep's order (matmul's bias_gelu epilogue, causal attention at
    head_dim 128), in float16 where the family sweeps it."""
    from suite.core.row import params_json

    largest = max(scenario.size(p) for p in cases)
    params = [p for p in cases if scenario.size(p) == largest][-1]
    return params_json(params), "float16" if "float16" in dtypes else dtypes[-1]


def rare_skip(scenario: Any, params: dict, dtype: str, summary: tuple[str, str]) -> set[tuple[str, str, str]]:
    """The (backend, device, variant) a case of the check leaves out: torch.compile outside the summary case."""
    from suite.core.row import params_json

    return set() if (params_json(params), dtype) == summary else {(RARE[0], "cuda", RARE[1])}


RARE_REASON = (
    "the GPU check builds torch.compile at each family's summary case only (suite/gpu_check/plan.py "
    "RARE): a cold compile per shape would not fit the check's budget"
)


def implementation_seconds(backend: str, variant: str, timing: dict, kernel_s: float, built: bool) -> float:
    """One implementation of one case: its build (none where `built` already), its rounds (graph and paced
    rounds again where graphs are on; at least min_reps × min_blocks repetitions however long the kernel) and
    its energy window."""
    compile_s = 0.0 if built else COMPILE_S.get(f"{backend}/{variant}", COMPILE_S.get(backend, DEFAULT_COMPILE_S))
    rounds = min(max(timing["budget_s"], timing["min_reps"] * timing["min_blocks"] * kernel_s), timing["max_budget_s"])
    graphs = 2 * max(timing["budget_s"], timing["min_reps"] * kernel_s) if timing["graphs"] else 0.0
    return compile_s + rounds + graphs + timing["energy_s"] + (timing["warmup"] + 1) * kernel_s


def job_estimate(overrides: list[str]) -> tuple[int, int, int, float]:
    """(cases, implementations, torch.compile rows skipped, seconds) of one family's job: every case × dtype ×
    registered CUDA kernel, torch.compile at the summary case only."""
    from omegaconf import OmegaConf

    from suite.cli import compose_jobs
    from suite.core.registry import REGISTRY
    from suite.run import validate

    (cfg,) = compose_jobs(overrides)
    plan = validate.plan(cfg)
    timing = OmegaConf.to_container(cfg.timing, resolve=True)
    keys = [
        k
        for k in REGISTRY.kernels
        if k.scenario == plan.scenario.name
        and k.device == "cuda"
        and k.backend in plan.backends
        and k.variant in plan.variants
        and k.phase == plan.phase
    ]
    summary = summary_case(plan.scenario, plan.cases, plan.dtypes)
    cases = impls = skipped = 0
    seconds = 0.0
    seen: set[tuple[object, str]] = set()
    for params in plan.cases:
        for dtype in plan.dtypes:
            ledger = plan.scenario.ledger(params, dtype)
            moved = min(v.bytes_read + v.bytes_written for v in ledger.values())
            flops = max(v.flops for v in ledger.values())
            left_out = rare_skip(plan.scenario, params, dtype, summary)
            mine = [k for k in keys if k.variant in plan.scenario.variants_for(params)]
            skipped += sum((k.backend, k.device, k.variant) in left_out for k in mine)
            mine = [k for k in mine if (k.backend, k.device, k.variant) not in left_out]
            kernel_s = moved / 3e12 + flops / 2e14  # an H100-class device: 3 TB/s, 200 TFLOP/s
            elements = moved / np.dtype(dtype).itemsize
            host = 16 * elements / HOST_BYTES_S + flops / HOST_FLOPS  # inputs and reference in float64
            seconds += host + moved / 2 * len(mine) / HOST_BYTES_S  # each output (about half) read back, checked
            for k in mine:
                built = k.backend in SHAPE_GENERIC and (k, dtype) in seen
                seconds += implementation_seconds(k.backend, k.variant, timing, kernel_s, built)
                seen.add((k, dtype))
            cases, impls = cases + 1, impls + len(mine)
    return cases, impls, skipped, seconds


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


def make(quick: bool, tests: list[str] | None = None) -> Plan:
    """The plan of a check; `tests` (the gpu tests' node ids) are collected where not given."""
    plan = Plan(quick, sweep_jobs(quick), QUICK_TESTS if quick else TESTS)
    nodes = collect_tests(plan.test_args) if tests is None else tests
    plan.tests, plan.family_tests = len(nodes), sum(map(is_family_test, nodes))
    sweep_s = STARTUP_S
    for job in plan.jobs:
        cases, impls, skipped, seconds = job_estimate(job)
        plan.cases, plan.implementations, plan.rare_skipped = (
            plan.cases + cases,
            plan.implementations + impls,
            plan.rare_skipped + skipped,
        )
        sweep_s += seconds
    tests_s = STARTUP_S / 2 + plan.family_tests * FAMILY_TEST_S + (plan.tests - plan.family_tests) * TEST_S
    rare = f", torch.compile at each summary case only ({plan.rare_skipped} rows skipped)" if plan.rare_skipped else ""
    plan.steps = [
        Step(
            "tests",
            f"{plan.tests} gpu tests ({plan.family_tests} of them sweep a family), {TEST_TIMEOUT_S:.0f} s limit each",
            tests_s,
        ),
        Step("sweep", f"{plan.cases} cases × their CUDA implementations, one worker{rare}", sweep_s),
        Step("report", "charts, report.md, the bundle and the summary", REPORT_S),
    ]
    return plan
