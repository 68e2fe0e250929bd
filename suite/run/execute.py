"""One case, every implementation: build, run once into a poisoned buffer, check, time side by side, make rows.

This is the only place kernels are called. A kernel that raises becomes an `error` row, a wrong or partly
unwritten output a `mismatch` row, a target that cannot run here a `skipped` row with the reason; nothing here
stops the sweep. CUDA kernels without a GPU run in emulation for numerics only and are never timed.
"""

from __future__ import annotations

import contextlib
import json
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from suite.core import fusion, numerics, targets
from suite.core.backend import BACKENDS
from suite.core.ledger import STORE_MODEL
from suite.core.registry import REGISTRY, KernelKey
from suite.core.row import Row, params_json
from suite.core.scenario import SCENARIOS, Params, Scenario
from suite.gpu import resources
from suite.run import footprint
from suite.run.ceiling import Ceiling
from suite.run.config import TimingConfig
from suite.run.timing import CpuClock, CudaClock, measure_interleaved


@dataclass
class Job:
    scenario: str
    params: Params
    dtype: str
    backends: list[str]
    devices: list[str]
    variants: list[str]
    seed: int
    timing: TimingConfig
    emulate: bool
    emulate_max_elements: int
    backend_options: dict[str, dict[str, Any]]
    io_dir: str | None = None
    skip: set[tuple[str, str, str]] = field(default_factory=set)
    """(backend, device, variant) already in the table (resume)."""
    strict: bool = False
    """Variants were named by the user: a backend lacking one gets an `unsupported` row instead of silence."""

    def impls(self) -> list[tuple[str, str, str]]:
        """What to run: each backend on each requested device it has a target for, each variant."""
        out = []
        for backend in self.backends:
            devices = [d for d in self.devices if (backend, d) in targets.TARGETS]
            if not devices and backend in REGISTRY.load_errors:
                devices = [""]  # the backend did not load: one row per variant says why
            scn = SCENARIOS.get(self.scenario)
            wanted = scn.variants_for(self.params) if scn is not None else self.variants
            out += [
                (backend, d, v)
                for d in devices
                for v in self.variants
                if self.strict or v in wanted
                if (backend, d, v) not in self.skip
                and (self.strict or not d or REGISTRY.get(KernelKey(self.scenario, backend, v, d)) is not None)
            ]
        return out


@dataclass
class Impl:
    key: KernelKey
    row: Row
    target: targets.Target | None = None
    run_params: Params = field(default_factory=dict)
    launcher: Any = None
    out: np.ndarray | None = None
    timing: Any = None


def case_seed(base: int, scenario: str, params: Params, dtype: str) -> int:
    """A stable per-case seed, recorded in every row, so any case's inputs can be regenerated alone."""
    return zlib.crc32(f"{base}|{scenario}|{params_json(params)}|{dtype}".encode())


class Inputs:
    """Inputs, float64 reference and tolerance per parameter set (the case, and its emulation slice)."""

    def __init__(self, scn: Scenario, dtype: str, seed: int) -> None:
        self.scn, self.dtype, self.seed, self.cache = scn, dtype, seed, {}

    def get(self, params: Params) -> tuple[dict[str, np.ndarray], np.ndarray, float]:
        key = params_json(params)
        if key not in self.cache:
            inputs = self.scn.make_inputs(params, self.dtype, np.random.default_rng(self.seed))
            ref = self.scn.reference(inputs, params)
            self.cache[key] = (inputs, ref, self.scn.tolerance(inputs, params, self.dtype, ref))
        return self.cache[key]


def _availability(impl: Impl, job: Job) -> str | None:
    """Set the target and mode, or mark the row and return None when it cannot run here."""
    k, row = impl.key, impl.row
    if not k.device:
        row.status, row.reason = "skipped", f"{k.backend} unavailable: {REGISTRY.load_errors[k.backend]}"
        return None
    entry = REGISTRY.get(k)
    target = targets.TARGETS.get((k.backend, k.device))
    if entry is None:
        row.status, row.reason = (
            "unsupported",
            f"no {k.backend}/{k.device} kernel for {k.scenario} {k.variant}",
        )
        return None
    if target is None:
        why = REGISTRY.load_errors.get(k.backend, "target not registered")
        row.status, row.reason = "skipped", f"{k.backend} unavailable: {why}"
        return None
    avail = target.probe()
    row.mode = avail.mode
    if avail.mode == targets.UNAVAILABLE or (avail.mode == targets.EMULATED and not job.emulate):
        row.status = "skipped"
        row.reason = avail.reason if avail.mode == targets.UNAVAILABLE else "emulation off (device.emulate=false)"
        return None
    impl.target = target
    return avail.mode


def _options(job: Job, key: KernelKey, mode: str) -> dict[str, Any]:
    """The backend's options from the config, plus the shared CUDA stream for kernels that run on a GPU."""
    opts = {**BACKENDS[key.backend].defaults(), **(job.backend_options.get(key.backend) or {})}
    opts["stream"] = None
    if mode == targets.NATIVE and key.device == "cuda":
        from suite.gpu import driver as cuda_driver

        opts["stream"] = cuda_driver.shared_stream()
    return opts


def _build_and_check(impl: Impl, job: Job, data: Inputs, scn: Scenario) -> None:
    """Build, run once into a NaN-poisoned buffer (the JIT call, timed as compile_ms) and judge the output."""
    row, target, mode = impl.row, impl.target, impl.row.mode
    assert target is not None
    emulated = mode == targets.EMULATED
    impl.run_params = scn.emulation_params(job.params, job.emulate_max_elements) if emulated else job.params
    if reason := footprint.guard(scn, impl.run_params, job.dtype, impl.key.variant, target):
        row.status, row.reason = "skipped", reason
        return
    inputs, ref, tol = data.get(impl.run_params)
    row.tolerance = tol
    if impl.run_params != job.params:
        row.checked_params = params_json(impl.run_params)
    specs: list = []  # the CUDA kernels the entry builds, for the static resource report (before any timing)
    try:
        dev_inputs = {name: target.asarray(a) for name, a in inputs.items()}
        out = target.empty(scn.output_shape(impl.run_params), job.dtype)
        target.poison(out)
        entry = REGISTRY.get(impl.key)
        with resources.recording(specs) if impl.key.device == "cuda" else contextlib.nullcontext():
            impl.launcher = entry(dev_inputs, out, impl.run_params, _options(job, impl.key, mode))
        start = time.perf_counter()
        impl.launcher()
        target.synchronize()
        if mode == targets.NATIVE:  # an interpreter's or simulator's time is no compile time
            row.compile_ms = (time.perf_counter() - start) * 1e3
        impl.out = np.asarray(target.to_host(out))
    except targets.NotRunnable as exc:
        row.status, row.reason = "skipped", str(exc)
        return
    except Exception as exc:
        row.status, row.reason = (
            "error",
            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
        )
        return
    finally:  # compile-only rows (NotRunnable) report resources too; analysis never fails the row
        built_for = None
        if impl.key.device == "cuda" and impl.run_params != job.params:
            specs, built_for = _case_specs(impl, job, scn, mode, specs)
        resources.annotate(row, impl.key.device, specs, built_for)
    row.max_rel_err, problem = numerics.judge(impl.out, ref, tol)
    row.status, row.reason = ("mismatch", problem) if problem else ("ok", "")
    if emulated:
        where = f" on the slice {row.checked_params}" if row.checked_params else " on the whole case"
        row.reason = row.reason or f"{target.probe().reason}; numerics checked{where}"


def _case_specs(impl: Impl, job: Job, scn: Scenario, mode: str, slice_specs: list) -> tuple[list, str | None]:
    """The CUDA kernels the entry builds for the case itself, when emulation ran a smaller slice of it.

    A slice may change what is compiled (a narrower row gets a smaller tile), so the resources must come from
    an entry built for the case's params: built on arrays of the case's shapes that are allocated but never
    written (untouched pages cost no memory) and never launched. Where that fails, the slice's kernels are
    reported, and the params they were built for named."""
    assert impl.target is not None
    specs: list = []
    try:
        shapes = scn.input_shapes(job.params)
        inputs = {name: impl.target.empty(shape, job.dtype) for name, shape in shapes.items()}
        out = impl.target.empty(scn.output_shape(job.params), job.dtype)
        with resources.recording(specs):
            REGISTRY.get(impl.key)(inputs, out, job.params, _options(job, impl.key, mode))
    except Exception:
        return slice_specs, impl.row.checked_params or None
    return specs, None


def _peers(impls: list[Impl]) -> None:
    """Largest relative difference of each correct output from the other correct outputs of the same params.

    Both sides passed the reference check, so a difference beyond twice the tolerance means they disagree
    where the reference cannot arbitrate (for instance, both wrong in different ways within the floor).
    """
    good = [i for i in impls if i.row.status == "ok" and i.out is not None]
    for a in good:
        errs = [numerics.rel_err(a.out, b.out) for b in good if b is not a and a.run_params == b.run_params]
        a.row.peer_err = max(errs) if errs else None
        if errs and a.row.tolerance and max(errs) > 2 * a.row.tolerance:
            a.row.status = "mismatch"
            a.row.reason = f"differs from another implementation by {max(errs):.3g} (> 2×tolerance)"


def _time(impls: list[Impl], job: Job, cuda_clock: CudaClock | None) -> None:
    timed = [i for i in impls if i.row.status == "ok" and i.row.mode == targets.NATIVE]
    for device in ("cpu", "cuda"):
        group = {id(i): i for i in timed if i.key.device == device}
        if not group:
            continue
        clock = CpuClock(job.timing.cold_cache) if device == "cpu" else (cuda_clock or CudaClock())
        results = measure_interleaved({k: i.launcher for k, i in group.items()}, clock, job.timing)
        for k, impl in group.items():
            t, row = results[k], impl.row
            impl.timing = t
            row.time_ms, row.time_min_ms, row.reps = t.median, min(t.times_ms), t.reps
            row.time_q1_ms, row.time_q3_ms = t.quantile(0.25), t.quantile(0.75)
            row.cold_cache = job.timing.cold_cache if device == "cpu" else True


def _rates(impls: list[Impl], ceilings: dict[str, Ceiling]) -> None:
    """GB/s (bytes read + written, as the ceiling's copy counts them) and share of the device's ceiling."""
    for impl in impls:
        row = impl.row
        top = ceilings.get(impl.key.device)
        if row.mode == targets.NATIVE and top is not None:
            row.ceiling_gbps, row.cache_bytes = top.gbps, top.cache_bytes
            row.ceiling_streaming_gbps = top.streaming_gbps
        if row.time_ms and row.bytes_read is not None:
            row.gbps = (row.bytes_read + row.bytes_written) / (row.time_ms * 1e-3) / 1e9
            row.pct_of_ceiling = 100.0 * row.gbps / row.ceiling_gbps if row.ceiling_gbps else None
        if row.time_ms and row.flops_modeled:
            row.extra["gflops"] = row.flops_modeled / (row.time_ms * 1e-3) / 1e9


def _compare(impls: list[Impl], scn: Scenario, seed: int) -> None:
    """Paired speedup, interval verdict and fusion efficiency of each (candidate, baseline) pair."""
    timed = {(i.key.backend, i.key.device, i.key.variant): i for i in impls if i.timing is not None}
    for (backend, device, variant), cand in timed.items():
        for candidate, baseline in scn.pairs:
            base = timed.get((backend, device, baseline))
            if candidate != variant or base is None or cand.row.baseline:
                continue  # the scenario's first pair for a variant is the one its row reports
            c = fusion.compare(base.timing.times_ms, cand.timing.times_ms, seed)
            row = cand.row
            row.baseline, row.speedup, row.speedup_lo, row.speedup_hi, row.verdict = (
                baseline,
                c.speedup,
                c.lo,
                c.hi,
                c.verdict,
            )
            if base.row.bytes_read is not None and row.bytes_read is not None:
                removed = (base.row.bytes_read + base.row.bytes_written) - (row.bytes_read + row.bytes_written)
                row.fusion_efficiency = fusion.efficiency(base.row.time_ms, row.time_ms, removed, row.ceiling_gbps or 0)


def _ledger(impl: Impl, scn: Scenario, job: Job) -> None:
    row = impl.row
    lg = scn.ledger(job.params, job.dtype).get(impl.key.variant)
    if lg is None or not impl.key.device:
        return
    row.store_model = STORE_MODEL[impl.key.device]
    row.bytes_read, row.bytes_written, row.flops_modeled = lg.bytes_read, lg.bytes_written, lg.flops
    row.bytes_modeled, row.launches = lg.bytes_moved(row.store_model), lg.launches
    row.intermediates_removed, row.bytes_saved = len(lg.removed), lg.saved_bytes


def _save_io(impl: Impl, job: Job, data: Inputs) -> None:
    if not job.io_dir or impl.out is None:
        return
    inputs, ref, _ = data.get(impl.run_params)
    k = impl.key
    meta = {"scenario": k.scenario, "params": impl.run_params, "dtype": job.dtype, "backend": k.backend,
            "device": k.device, "variant": k.variant}  # fmt: skip
    name = f"{k.scenario}_{zlib.crc32(params_json(impl.run_params).encode()):08x}_{job.dtype}"
    path = Path(job.io_dir) / f"{name}__{k.backend}-{k.device}-{k.variant}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **inputs, out=impl.out, reference=ref, meta=json.dumps(meta, sort_keys=True))


def execute(
    job: Job,
    scn: Scenario,
    base_row: dict[str, Any],
    ceilings: dict[str, Ceiling],
    cuda_clock: CudaClock | None = None,
    notify: Any = None,
) -> list[Row]:
    """Run every implementation of one case and return its rows (without ceilings: the caller adds those).

    `notify(impl)` is called before each implementation is built and run, and `notify(None)` before timing,
    so that whoever watches a worker that dies knows which implementation took it down.
    """
    notify = notify or (lambda _: None)
    seed = case_seed(job.seed, job.scenario, job.params, job.dtype)
    data = Inputs(scn, job.dtype, seed)
    impls = []
    for backend, device, variant in job.impls():
        row = Row(scenario=job.scenario, params=params_json(job.params), dtype=job.dtype, backend=backend,
                  device=device, variant=variant, status="ok", size=scn.size(job.params), seed=seed, **base_row)  # fmt: skip
        impls.append(Impl(KernelKey(job.scenario, backend, variant, device), row))
    for impl in impls:
        _ledger(impl, scn, job)
        if _availability(impl, job) is not None:
            notify((impl.key.backend, impl.key.device, impl.key.variant))
            _build_and_check(impl, job, data, scn)
            _save_io(impl, job, data)
    _peers(impls)
    notify(None)
    _time(impls, job, cuda_clock)
    _rates(impls, ceilings)
    _compare(impls, scn, seed)
    for impl in impls:
        if impl.row.status == "ok" and impl.row.mode != targets.NATIVE and not impl.row.reason:
            impl.row.reason = "not timed"
    return [i.row for i in impls]
