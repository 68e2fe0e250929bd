"""The check's plan and its time estimate, printed before any work: what runs, how many of it, how long.

The sweep is every family's `conf/experiment/gpu_*.yaml` under CHECK_TIMING (one worker process, a bounded
budget per implementation); `--quick` narrows each family to its largest case in float16 (QUICK) and the tests
to tests/test_gpu_device.py. The estimate is a model with its constants written here, per implementation: a
compile (COMPILE_S, by backend and variant) and its timing (the timing budget, graphs and energy included),
and per case the host's work (inputs and the float64 reference: the ledger's bytes and FLOPs at HOST_BYTES_S
and HOST_FLOPS). They are first guesses for an H100/H200 host, not yet calibrated on one: the check prints
each step's real time beside its estimate, so the next revision can correct them.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = {"elementwise_chain": "gpu_elementwise", "layernorm": "gpu_layernorm", "rmsnorm": "gpu_rmsnorm",
            "softmax": "gpu_softmax", "attention": "gpu_attention", "matmul": "gpu_matmul"}  # fmt: skip
"""Family -> its experiment file under conf/experiment."""
CHECK_TIMING = ["timing.processes=1", "timing.budget_s=0.05", "timing.max_budget_s=0.15", "timing.energy_s=0.02",
                "timing.case_timeout_s=120"]  # fmt: skip
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
"""--quick: each family's largest case only (and float16, QUICK_DTYPE), the configurations a GPU first meets."""
QUICK_DTYPE = "dtype=[float16]"
TESTS = ["-m", "gpu", "tests"]
QUICK_TESTS = ["-m", "gpu", "tests/test_gpu_device.py"]

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
TEST_S = 6.0
"""One gpu test: a small sweep of one family through every CUDA backend, or one device measurement."""
TEST_TIMEOUT_S = 120.0
"""Each gpu test's limit: one past it is reported as timed out and the others still run."""
REPORT_S = 30.0
"""Charts, report and the bundle."""
BUDGET_S = {"default": 480.0, "quick": 240.0}


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
    cases: int = 0
    implementations: int = 0
    steps: list[Step] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.steps)

    @property
    def budget_s(self) -> float:
        return BUDGET_S["quick" if self.quick else "default"]

    def lines(self) -> list[str]:
        out = [
            f"plan      {'--quick' if self.quick else 'default'}: {self.tests} gpu tests, then {self.cases} cases "
            f"({self.implementations} CUDA implementations) of {len(self.jobs)} families, then the report"
        ]
        out += [f"  {s.name:<9} ≈ {s.seconds:5.0f} s  {s.what}" for s in self.steps]
        verdict = "within" if self.seconds <= self.budget_s else "OVER"
        out.append(f"estimate  ≈ {self.seconds / 60:.1f} min ({verdict} the {self.budget_s / 60:.0f} min budget; "
                   "constants in suite/gpu_check/plan.py, not yet calibrated on a GPU)")  # fmt: skip
        return out


def sweep_jobs(quick: bool) -> list[list[str]]:
    jobs = []
    for family, experiment in FAMILIES.items():
        extra = [*QUICK[family], QUICK_DTYPE] if quick else []
        jobs.append([f"experiment={experiment}", *CHECK_TIMING, *extra])
    return jobs


def implementation_seconds(backend: str, variant: str, timing: dict, kernel_s: float, built: bool) -> float:
    """One implementation of one case: its build (none where `built` already), its rounds (graph and paced
    rounds again where graphs are on; at least min_reps × min_blocks repetitions however long the kernel) and
    its energy window."""
    compile_s = 0.0 if built else COMPILE_S.get(f"{backend}/{variant}", COMPILE_S.get(backend, DEFAULT_COMPILE_S))
    rounds = min(max(timing["budget_s"], timing["min_reps"] * timing["min_blocks"] * kernel_s), timing["max_budget_s"])
    graphs = 2 * max(timing["budget_s"], timing["min_reps"] * kernel_s) if timing["graphs"] else 0.0
    return compile_s + rounds + graphs + timing["energy_s"] + (timing["warmup"] + 1) * kernel_s


def job_estimate(overrides: list[str]) -> tuple[int, int, float]:
    """(cases, implementations, seconds) of one family's job: every case × dtype × registered CUDA kernel."""
    from omegaconf import OmegaConf

    from suite.cli import compose_jobs
    from suite.core.registry import REGISTRY
    from suite.run import validate

    (cfg,) = compose_jobs(overrides)
    plan = validate.plan(cfg)
    timing = OmegaConf.to_container(cfg.timing, resolve=True)
    keys = [k for k in REGISTRY.kernels if k.scenario == plan.scenario.name and k.device == "cuda"
            and k.backend in plan.backends and k.variant in plan.variants]  # fmt: skip
    cases = impls = 0
    seconds = 0.0
    seen: set[tuple[object, str]] = set()
    for params in plan.cases:
        for dtype in plan.dtypes:
            ledger = plan.scenario.ledger(params, dtype)
            moved = min(v.bytes_read + v.bytes_written for v in ledger.values())
            flops = max(v.flops for v in ledger.values())
            mine = [k for k in keys if k.variant in plan.scenario.variants_for(params)]
            kernel_s = moved / 3e12 + flops / 2e14  # an H100-class device: 3 TB/s, 200 TFLOP/s
            elements = moved / np.dtype(dtype).itemsize
            host = 16 * elements / HOST_BYTES_S + flops / HOST_FLOPS  # inputs and reference in float64
            seconds += host + moved / 2 * len(mine) / HOST_BYTES_S  # each output (about half) read back, checked
            for k in mine:
                built = k.backend in SHAPE_GENERIC and (k, dtype) in seen
                seconds += implementation_seconds(k.backend, k.variant, timing, kernel_s, built)
                seen.add((k, dtype))
            cases, impls = cases + 1, impls + len(mine)
    return cases, impls, seconds


def count_tests(args: list[str]) -> int:
    """The gpu tests pytest collects for `args` (collection only: nothing runs); 0 where collection fails."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", *args],
                          capture_output=True, text=True, cwd=ROOT, check=False)  # fmt: skip
    return sum(1 for line in done.stdout.splitlines() if "::" in line)


def make(quick: bool, tests: int | None = None) -> Plan:
    """The plan of a check; `tests` (the number of gpu tests) is counted by collection where not given."""
    plan = Plan(quick, sweep_jobs(quick), QUICK_TESTS if quick else TESTS)
    plan.tests = count_tests(plan.test_args) if tests is None else tests
    sweep_s = STARTUP_S
    for job in plan.jobs:
        cases, impls, seconds = job_estimate(job)
        plan.cases, plan.implementations, sweep_s = plan.cases + cases, plan.implementations + impls, sweep_s + seconds
    plan.steps = [
        Step("tests", f"{plan.tests} gpu tests ({' '.join(plan.test_args)}), {TEST_TIMEOUT_S:.0f} s limit each",
             STARTUP_S / 2 + plan.tests * TEST_S),
        Step("sweep", f"{plan.cases} cases × their CUDA implementations, one worker, ceiling measured once", sweep_s),
        Step("report", "charts, report.md, the bundle and the summary", REPORT_S),
    ]  # fmt: skip
    return plan
