"""The check's time model: what one family job costs, case by case, before any work.

Per implementation: a compile (COMPILE_S, by backend and variant; none for a shape-generic kernel already built
for that dtype) and its timing (the timing budget, graphs and energy included); per case the host's work
(inputs and the float64 reference: the ledger's bytes and FLOPs at HOST_BYTES_S and HOST_FLOPS). Every constant
is a guess for an H100/H200 host, not yet calibrated on one: the check records each step's and each case's real
time beside its estimate, so the next revision can correct them. torch.compile, the costliest build, is built at
each family's summary case only (RARE); elsewhere its rows are `skipped` with RARE_REASON.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from suite.gpu_check.jobs import CHECK_TIMING, FamilyJob, summary_dtype

COMPILE_S = {"triton": 1.5, "cupy": 1.0, "numba": 1.5, "liger": 1.5, "torch/eager": 0.3, "torch/compiled": 4.0}
"""Seconds to build one implementation (the first JIT of its kernels at that shape and dtype)."""
SHAPE_GENERIC = ("triton", "numba", "liger")
"""Backends whose kernels take the shape at run time: built once per family, variant and dtype, not per case
(CuPy's sources and torch.compile's graphs are specialised to the shape)."""
DEFAULT_COMPILE_S = 1.0
HOST_BYTES_S = 1.5e9
"""Bytes a second the host makes inputs and checks outputs at (float64 reference, 16 cores)."""
HOST_FLOPS = 3e10
"""float64 FLOPs a second of the host's reference (NumPy's BLAS on 16 cores)."""
DEVICE_BYTES_S, DEVICE_FLOPS = 3e12, 2e14
"""An H100-class device, for a kernel's own time: 3 TB/s, 200 TFLOP/s."""
RARE = ("torch", "compiled")
"""(backend, variant) built only at each family's summary case (`summary_case`): a cold torch.compile is the
dearest build of the sweep (COMPILE_S), and the summary's fused-vs-torch.compile ratio needs it there only."""
RARE_REASON = (
    "the GPU check builds torch.compile at each family's summary case only (suite/gpu_check/estimate.py "
    "RARE): a cold compile per shape would not fit the check's budget"
)


@dataclass
class Estimate:
    """One family job's cost, with what it would run."""

    job: FamilyJob
    cases: int = 0
    implementations: int = 0
    rare_skipped: int = 0
    seconds: float = 0.0
    dtypes: tuple[str, ...] = ()
    kernels: dict[str, set[str]] = field(default_factory=dict)
    """Backend -> the variants it would run (CUDA kernels registered for this family and phase)."""
    summary: tuple[str, str] = ("", "")
    case_seconds: dict[tuple[str, str], float] = field(default_factory=dict)
    """(params as JSON, dtype) -> the case's estimate: what the sweep's deadline and its log read."""


def summary_case(scenario: Any, cases: list[dict], dtypes: list[str]) -> tuple[str, str]:
    """(params as JSON, dtype) of the case the summary reads and torch.compile is built for: the case the family
    declares (`Scenario.summary`, the last match in the sweep's order), else the largest (`scenario.size`), in
    float16 where the family sweeps it (`jobs.summary_dtype`)."""
    from suite.core.row import params_json

    wanted = getattr(scenario, "summary", {}) or {}
    matches = [p for p in cases if wanted and all(p.get(a) == v for a, v in wanted.items())]
    if not matches:
        largest = max(scenario.size(p) for p in cases)
        matches = [p for p in cases if scenario.size(p) == largest]
    return params_json(matches[-1]), summary_dtype(tuple(dtypes))


def rare_skip(params: dict, dtype: str, summary: tuple[str, str]) -> set[tuple[str, str, str]]:
    """The (backend, device, variant) a case of the check leaves out: torch.compile outside the summary case."""
    from suite.core.row import params_json

    return set() if (params_json(params), dtype) == summary else {(RARE[0], "cuda", RARE[1])}


def implementation_seconds(backend: str, variant: str, timing: dict, kernel_s: float, built: bool) -> float:
    """One implementation of one case: its build (none where `built` already), its rounds (graph and paced
    rounds again where graphs are on; at least min_reps × min_blocks repetitions however long the kernel) and
    its energy window."""
    compile_s = 0.0 if built else COMPILE_S.get(f"{backend}/{variant}", COMPILE_S.get(backend, DEFAULT_COMPILE_S))
    rounds = min(max(timing["budget_s"], timing["min_reps"] * timing["min_blocks"] * kernel_s), timing["max_budget_s"])
    graphs = 2 * max(timing["budget_s"], timing["min_reps"] * kernel_s) if timing["graphs"] else 0.0
    return compile_s + rounds + graphs + timing["energy_s"] + (timing["warmup"] + 1) * kernel_s


@functools.lru_cache(maxsize=64)
def _composed(base: tuple[str, ...]) -> Any:
    from suite.cli import compose_jobs

    (cfg,) = compose_jobs([*base, *CHECK_TIMING])
    return cfg


def job_config(job: FamilyJob) -> Any:
    """The job's config: its base composed once per process (Hydra's composition is most of an estimate's time),
    its settings set on a copy, as the overrides set them in the sweep."""
    from omegaconf import OmegaConf, open_dict

    cfg = copy.deepcopy(_composed(job.base))
    with open_dict(cfg):
        for key, value in job.settings().items():
            OmegaConf.update(cfg, key, value, merge=False)
    return cfg


def job_estimate(job: FamilyJob) -> Estimate:
    """Every case × dtype × registered CUDA kernel of `job`, torch.compile at the summary case only."""
    from omegaconf import OmegaConf

    from suite.core.registry import REGISTRY
    from suite.core.row import params_json
    from suite.run import validate

    cfg = job_config(job)
    plan = validate.plan(cfg)
    out = Estimate(job, dtypes=tuple(plan.dtypes))
    if not plan.cases:
        return out
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
    out.summary = summary_case(plan.scenario, plan.cases, plan.dtypes)
    seen: set[tuple[object, str]] = set()
    for params in plan.cases:
        for dtype in plan.dtypes:
            left_out = rare_skip(params, dtype, out.summary)
            mine = [k for k in keys if k.variant in plan.scenario.variants_for(params) and runs(k, dtype)]
            out.rare_skipped += sum((k.backend, k.device, k.variant) in left_out for k in mine)
            mine = [k for k in mine if (k.backend, k.device, k.variant) not in left_out]
            seconds = case_seconds(plan.scenario, params, dtype, mine, timing, seen) if mine else 0.0
            for k in mine:
                out.kernels.setdefault(k.backend, set()).add(k.variant)
            out.case_seconds[(params_json(params), dtype)] = seconds
            out.cases, out.implementations, out.seconds = (
                out.cases + 1,
                out.implementations + len(mine),
                out.seconds + seconds,
            )
    return out


def runs(key: Any, dtype: str) -> bool:
    """Whether `key`'s target stores `dtype` (one that refuses it gives a `skipped` row, built and timed never)."""
    from suite.core.targets import TARGETS

    target = TARGETS.get((key.backend, key.device))
    return target is None or not target.dtype_refusal(dtype)


def case_seconds(scn: Any, params: dict, dtype: str, keys: list, timing: dict, seen: set) -> float:
    """One case: the host's inputs and reference, then each implementation (`seen`: the shape-generic kernels
    already built, updated)."""
    ledger = scn.ledger(params, dtype)
    moved = min(v.bytes_read + v.bytes_written for v in ledger.values())
    flops = max(v.flops for v in ledger.values())
    kernel_s = moved / DEVICE_BYTES_S + flops / DEVICE_FLOPS
    elements = moved / np.dtype(dtype).itemsize
    seconds = 16 * elements / HOST_BYTES_S + flops / HOST_FLOPS  # inputs and reference in float64
    seconds += moved / 2 * len(keys) / HOST_BYTES_S  # each output (about half) read back, checked
    for k in keys:
        built = k.backend in SHAPE_GENERIC and (k, dtype) in seen
        seconds += implementation_seconds(k.backend, k.variant, timing, kernel_s, built)
        seen.add((k, dtype))
    return seconds
