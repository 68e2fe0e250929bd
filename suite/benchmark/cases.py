"""Registry cases as pytest-benchmark benchmarks: the config turned into cases, one implementation prepared,
its timed call, the paired fusion verdict and the benchmark's `extra_info`.

The pytest-benchmark front door (`tests/benchmarks/`) must run exactly what `python -m suite` would run with the
same overrides, so the cases come from configs composed as the command line composes them, the suite's own plan
(`suite.run.validate`) and jobs (`suite.run.runner`), and each implementation goes through the suite's own
stages: availability (`suite.run.build`) and build-and-check (`suite.run.check`), then the suite's clocks and
paired measurement (`suite.run.timing`, `suite.core.fusion`). Only natively run implementations are benchmarks: an interpreter's or a simulator's time is
no time. This module knows nothing of pytest; the front door turns a `Prepared` that is not ready into a skip or
a failure.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from suite.core import fusion, phases, targets
from suite.core.registry import KernelKey
from suite.core.row import params_json
from suite.core.scenario import SCENARIOS
from suite.run import build, case_inputs, check, runner, validate
from suite.run.job import Job, case_seed
from suite.run.stages import Check, Ledger
from suite.run.timing import Clock, CpuClock, CudaClock, measure_interleaved
from suite.run.worker import share_cuda_stream

DEFAULT_PRESET = "S"
PROBE_S = 0.05
"""Seconds of calls that judge how many rounds fill the timing budget."""


def front_door_overrides(preset: str | None, user: Sequence[str]) -> list[str]:
    """The user's overrides after the front door's defaults, a default dropped where the user set its key (Hydra
    refuses a config group named twice): preset S (about a minute here), CPU kernels only without a GPU."""
    device = "all" if targets.cuda_device_count() > 0 else "cpu"
    defaults = [f"preset={preset or DEFAULT_PRESET}", f"device={device}"]
    given = {o.split("=", 1)[0].lstrip("+~") for o in user}
    kept = [d for d in defaults if d.split("=", 1)[0] not in given or (preset and d.startswith("preset="))]
    return [*kept, *user]


@dataclass(frozen=True)
class BenchCase:
    """One (case, implementation): the suite's job it belongs to and its kernel key."""

    job: Job
    key: KernelKey
    baseline: str | None = None
    """The variant this one is compared with (the scenario's first pair whose baseline the job also runs)."""

    @property
    def id(self) -> str:
        """Stable and readable, e.g. `elementwise_chain-n=1000-ops=scale,gelu-float32-numba-cpu-fused`."""
        shape = [f"{axis}={_id_value(v)}" for axis, v in self.job.params.items()]
        return "-".join(
            [self.key.scenario, *shape, self.job.dtype, self.key.backend, self.key.device or "none", self.key.variant]
        )

    @property
    def group(self) -> str:
        """pytest-benchmark's group: every implementation of one case on one device, side by side."""
        shape = ",".join(f"{axis}={_id_value(v)}" for axis, v in self.job.params.items())
        return f"{self.key.scenario}[{shape}] {self.job.dtype} {self.key.device}"


def _id_value(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(_id_value(v) for v in value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def cases(configs: Sequence[DictConfig], outdir: Path) -> list[BenchCase]:
    """Every (case, implementation) of the composed configs (one per job of a sweep, composed as the command
    line composes them), in the suite's order; `outdir` holds the backends' compile caches (and `save_io`
    files). ConfigError (one line naming the valid choices) on the first problem the plan finds."""
    out = []
    for cfg in configs:
        plan = validate.plan(cfg)
        for job in runner.jobs(cfg, plan, Path(outdir), set()):
            keys = job.keys()
            present = {(k.backend, k.device, k.variant) for k in keys}
            for key in keys:
                base = next(
                    (b for c, b in plan.scenario.pairs if c == key.variant and (key.backend, key.device, b) in present),
                    None,
                )
                out.append(BenchCase(job, key, base))
    return out


@dataclass(frozen=True, eq=False)
class Prepared:
    """One implementation built and checked; `skip` says why it is no benchmark (not run natively here)."""

    case: BenchCase
    skip: str = ""
    check: Check | None = None
    ledger: Ledger | None = None
    target: targets.Target | None = field(default=None, repr=False)

    @property
    def failure(self) -> str:
        """Why the implementation fails its test (error or mismatch against the float64 reference), or ''."""
        c = self.check
        return f"{c.status}: {c.reason}" if c is not None and c.status not in ("ok", "skipped") else ""


class Bench:
    """Run-wide state of a benchmark session (the CUDA stream and clock, as the suite's worker holds them) and
    the implementations of the case being benchmarked, each built once whether it is benchmarked or compared."""

    def __init__(self) -> None:
        validate.discover()
        self.gpu = targets.cuda_device_count() > 0
        if self.gpu:
            share_cuda_stream()
        self._cuda_clock: CudaClock | None = None
        self._cpu_clocks: dict[bool, CpuClock] = {}
        self._job: Job | None = None
        self._data: case_inputs.Inputs | None = None
        self._built: dict[KernelKey, Prepared] = {}

    def seed(self, case: BenchCase) -> int:
        job = case.job
        return case_seed(job.seed, job.scenario, job.params, job.dtype)

    def prepare(self, case: BenchCase, variant: str | None = None) -> Prepared:
        """`case`'s implementation (or its `variant` on the same backend and device), built and checked once;
        the previous case's are let go when a new case starts."""
        key = case.key if variant is None else KernelKey(case.key.scenario, case.key.backend, variant, case.key.device)
        if case.job is not self._job:
            scn = SCENARIOS[case.job.scenario]
            self._job, self._built = case.job, {}
            self._data = case_inputs.Inputs(scn, case.job.dtype, self.seed(case))
        if key not in self._built:
            self._built[key] = self._build(BenchCase(case.job, key))
        return self._built[key] if variant is not None else replace(self._built[key], case=case)

    def _build(self, case: BenchCase) -> Prepared:
        job, key, scn = case.job, case.key, SCENARIOS[case.job.scenario]
        avail = build.availability(key, job)
        if not avail.runs:
            return Prepared(case, skip=f"{avail.status}: {avail.reason}")
        if avail.mode != targets.NATIVE:
            return Prepared(case, skip=f"{avail.mode}, not timed here: {avail.target.probe().reason}")
        lg = phases.modeled(scn.ledger(job.params, job.dtype), key.backend, key.variant)
        ledger = Ledger.of(lg, key.device) if lg is not None else None
        assert self._data is not None
        built, _resources = check.build_and_check(key, avail, job, self._data, scn)
        case_inputs.save_io(key, built, job, self._data)
        skip = f"skipped: {built.reason}" if built.status == "skipped" else ""
        return Prepared(case, skip, built, ledger, avail.target)

    def clock(self, device: str) -> Clock:
        """The suite's clock for the device: CPU counter (cold caches as the config says), CUDA events."""
        if device == "cuda":
            self._cuda_clock = self._cuda_clock or CudaClock()
            return self._cuda_clock
        assert self._job is not None
        cold = self._job.timing.cold_cache
        self._cpu_clocks[cold] = self._cpu_clocks.get(cold) or CpuClock(cold)  # one flush buffer per session
        return self._cpu_clocks[cold]

    def timed_call(self, prep: Prepared) -> tuple[Callable[[], None], Callable[[], None] | None]:
        """(target, setup) for `benchmark.pedantic`: the launch, synchronised on CUDA so the host's clock
        includes the kernel, and the cache flush the suite's clock makes before each repetition (the CPU's
        last-level cache under `timing.cold_cache`; L2, always, on CUDA), finished before the clock starts."""
        assert prep.check is not None and prep.check.launcher is not None
        launch = prep.check.launcher
        clock = self.clock(prep.case.key.device)
        if isinstance(clock, CudaClock):
            stream, sync = clock.stream, clock.driver.synchronize

            def launch_synced() -> None:
                launch()
                sync(stream)

            def flush_l2() -> None:
                clock.flush(stream)
                sync(stream)

            return launch_synced, flush_l2
        return launch, clock.flush if clock.flush_buffer is not None else None

    def rounds(self, prep: Prepared) -> tuple[int, int]:
        """(rounds, warmup rounds) by the config's timing: enough rounds to fill `budget_s`, within
        [min_reps, max_reps], judged from the fastest repetition of a short probe on the suite's clock. The
        first calls after a build can be thousands of times slower than the kernel (a thread pool waking, a
        neighbour's threads still spinning on a small machine), so the probe lasts PROBE_S, not a few calls."""
        assert prep.check is not None and prep.check.launcher is not None
        t, clock = prep.case.job.timing, self.clock(prep.case.key.device)
        times_s, started = [], time.monotonic()
        while len(times_s) < 3 or (time.monotonic() - started < PROBE_S and len(times_s) < t.max_reps):
            times_s.append(clock.time(prep.check.launcher) * 1e-3)
        once_s = min(times_s)
        wanted = math.ceil(t.budget_s / once_s) if once_s > 0 else t.max_reps
        return max(t.min_reps, min(t.max_reps, wanted)), t.warmup

    def fusion(self, prep: Prepared) -> dict[str, Any]:
        """The paired verdict of a candidate over its baseline, timed beside it round-robin on the suite's
        clock (`measure_interleaved`, `fusion.compare`), with the ledger's predicted ratio; {} for a variant
        that is no candidate, and the baseline's problem where it cannot be timed."""
        case = prep.case
        if case.baseline is None:
            return {}
        base = self.prepare(case, case.baseline)
        name = f"{case.key.backend}/{case.key.device}/{case.baseline}"
        if base.skip or base.failure:
            return {"baseline": name, "verdict": None, "verdict_reason": base.skip or base.failure}
        assert prep.check is not None and base.check is not None
        times = measure_interleaved(
            {"base": base.check.launcher, "cand": prep.check.launcher}, self.clock(case.key.device), case.job.timing
        )
        c = fusion.compare(times["base"].times_ms, times["cand"].times_ms, self.seed(case))
        predicted = None
        if base.ledger is not None and prep.ledger is not None and prep.ledger.bytes_modeled:
            predicted = base.ledger.bytes_modeled / prep.ledger.bytes_modeled
        return {
            "baseline": name,
            "speedup": c.speedup,
            "speedup_lo": c.lo,
            "speedup_hi": c.hi,
            "verdict": c.verdict,
            "predicted": predicted,
            "paired_reps": times["cand"].reps,
            "baseline_ms": times["base"].median,
            "candidate_ms": times["cand"].median,
        }


def extra_info(prep: Prepared, median_s: float | None) -> dict[str, Any]:
    """What a benchmark records beside its times: the case, the ledger, GB/s from the benchmark's median (bytes
    read + written, as the suite's rates count them), and the numerics."""
    case, lg, c = prep.case, prep.ledger, prep.check
    info: dict[str, Any] = {
        "scenario": case.key.scenario,
        "params": params_json(case.job.params),
        "dtype": case.job.dtype,
        "backend": case.key.backend,
        "device": case.key.device,
        "variant": case.key.variant,
    }
    if lg is not None:
        info.update(
            bytes_read=lg.bytes_read,
            bytes_written=lg.bytes_written,
            bytes_modeled=lg.bytes_modeled,
            flops_modeled=lg.flops_modeled,
            store_model=lg.store_model,
            launches=lg.launches,
        )
    moved = lg.bytes_read + lg.bytes_written if lg is not None else 0
    info["gbps"] = moved / median_s / 1e9 if median_s and moved else None
    if c is not None:
        info.update(
            max_rel_err=c.max_rel_err,
            tolerance=c.tolerance,
            compile_ms=c.compile_ms,
            notes=json.dumps(dict(c.notes), sort_keys=True, default=str),
        )
    info["cold_cache"] = case.key.device == "cuda" or case.job.timing.cold_cache
    return info
