"""Whether an implementation can run here, and its build-and-check: build, run once into a poisoned buffer, judge.

This is the only place a kernel's entry is built and first called. A kernel that raises is an `error`, a wrong or
partly unwritten output a `mismatch`, a target that cannot run here `skipped` with the reason: each is a stage
result, never an exception, so nothing here stops the sweep. A CUDA kernel that runs the device out of memory is
an `error` naming the case's footprint and the free memory; one that hits a sticky CUDA error (an illegal address,
a launch failure) is the exception: it raises `faults.ContextLost`, since no later CUDA call in this process can
succeed and only the worker's restart can help (`suite.run.worker`).

The inputs are uploaded, the output allocated and poisoned on whatever stream each library queues copies on
(CuPy's and torch's: the legacy default stream), while kernels launch on the suite's shared stream, created
non-blocking: nothing orders the two. A device-wide synchronisation comes between them, and another between the
first launch and the read-back. A CUDA implementation whose numerics pass is launched once more behind a hold
of the shared stream: one with a kernel elsewhere, outside the timer's events, is an `error`
(`suite.run.stream_check`).

CUDA kernels without a GPU run in emulation (on a slice of the case where it is large) for numerics only; their
resources are still those of the case's kernels.

Kernels are held honest, plug-ins included (leaderboards were won by kernels that wrote their inputs, replayed a
cached result or patched the timer): an implementation whose call changed an input is an `error` naming it; one
run natively is built once more on fresh inputs of the same shape (another seed) and must match their own
reference, or it is a `mismatch` (its output does not follow its inputs); one that replaced the suite's timer is
an `error` naming what (`suite.run.timing.tampered`). An entry that raises `registry.Unsupported` (no kernel for
this dtype or shape) gives a `skipped` row with its reason.
"""

from __future__ import annotations

import contextlib
import json
import time
import zlib
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from suite.core import dtypes, numerics, registry, targets
from suite.core.backend import BACKENDS
from suite.core.registry import REGISTRY, KernelKey
from suite.core.row import params_json
from suite.core.scenario import Params, Scenario
from suite.gpu import resources
from suite.run import faults, footprint, slowdown, stream_check, timing
from suite.run.job import Job
from suite.run.stages import Availability, Check, KernelResources


class Inputs:
    """Inputs, float64 reference and tolerance per parameter set (the case, and its emulation slice)."""

    def __init__(self, scn: Scenario, dtype: str, seed: int) -> None:
        self.scn, self.dtype, self.seed, self.cache = scn, dtype, seed, {}

    def get(self, params: Params, fresh: bool = False) -> tuple[dict[str, np.ndarray], np.ndarray, float]:
        """The case's inputs, reference and tolerance; with `fresh`, another draw of the same shapes (another
        seed), made once per case for the check that an output follows its inputs."""
        key = (params_json(params), fresh)
        if key not in self.cache:
            seed = self.seed if not fresh else (self.seed ^ FRESH_SEED)
            inputs = self.scn.make_inputs(params, self.dtype, np.random.default_rng(seed))
            ref = self.scn.reference(inputs, params)
            self.cache[key] = (inputs, ref, self.scn.tolerance(inputs, params, self.dtype, ref))
        return self.cache[key]


FRESH_SEED = 0x5EED
"""Mixed into the case's seed for its second draw of inputs (the check that an output follows its inputs)."""


def availability(key: KernelKey, job: Job) -> Availability:
    """The target and mode, or why the implementation cannot run here."""
    if not key.device:
        return Availability(status="skipped", reason=f"{key.backend} unavailable: {REGISTRY.load_errors[key.backend]}")
    target = targets.TARGETS.get((key.backend, key.device))
    if REGISTRY.get(key) is None:
        why = f"no {key.backend}/{key.device} kernel for {key.scenario} {key.variant}"
        return Availability(status="unsupported", reason=why)
    if target is None:
        why = REGISTRY.load_errors.get(key.backend, "target not registered")
        return Availability(status="skipped", reason=f"{key.backend} unavailable: {why}")
    avail = target.probe()
    if avail.mode == targets.UNAVAILABLE:
        return Availability(avail.mode, "skipped", avail.reason)
    if avail.mode == targets.EMULATED and not job.emulate:
        return Availability(avail.mode, "skipped", "emulation off (device.emulate=false)")
    return Availability(avail.mode, target=target)


def options(job: Job, key: KernelKey, mode: str) -> dict[str, Any]:
    """The backend's options from the config, plus the shared CUDA stream for kernels that run on a GPU and the
    run's folder for the backend's compile caches (`cache_dir`: a rerun into the same run directory is warm)."""
    opts = {**BACKENDS[key.backend].defaults(), **(job.backend_options.get(key.backend) or {})}
    opts["stream"], opts["cache_dir"] = None, job.cache_dir
    if mode == targets.NATIVE and key.device == "cuda":
        from suite.gpu import driver as cuda_driver

        opts["stream"] = cuda_driver.shared_stream()
    return opts


def build_and_check(
    key: KernelKey, avail: Availability, job: Job, data: Inputs, scn: Scenario
) -> tuple[Check, KernelResources | None]:
    """Build, run once into a NaN-poisoned buffer (the JIT call, timed as compile_ms) and judge the output;
    the resources of the CUDA kernels the entry built, whether or not it ran (None where it was never built)."""
    target, mode = avail.target, avail.mode
    assert target is not None
    params = scn.emulation_params(job.params, job.emulate_max_elements) if mode == targets.EMULATED else job.params
    if reason := target.dtype_refusal(job.dtype) or footprint.guard(scn, params, job.dtype, key.variant, target):
        return Check("skipped", reason, params), None
    inputs, ref, tol = data.get(params)
    built = Check("ok", "", params, tol, params_json(params) if params != job.params else "")
    specs: list = []  # the CUDA kernels the entry builds, for the static resource report (before any timing)
    launcher = device_out = out = compile_ms = None
    failed: tuple[str, str] | None = None
    out_of_memory = False
    timing.restore()  # whatever an import or an earlier implementation replaced, this one is judged alone
    try:
        private = {name: np.array(a) for name, a in inputs.items()}  # a host target's asarray may not copy
        launcher, device_out, dev_inputs = _build(key, avail, job, scn, params, private, specs)
        compile_ms = _first_launch(launcher, target, mode)
        out = np.asarray(target.to_host(device_out))
        if written := _written(inputs, dev_inputs, target):
            failed = ("error", written)
    except (targets.NotRunnable, registry.Unsupported) as exc:
        failed = ("skipped", str(exc))
    except Exception as exc:
        failed, out_of_memory = _failure(key, exc)
    if replaced := timing.tampered():
        timing.restore()
        failed = ("error", f"the implementation replaced the suite's timer ({', '.join(replaced)})")
    if failed and out_of_memory:  # free memory read once the attempt's buffers are dropped (its traceback held them)
        launcher = device_out = None
        failed = ("error", f"{footprint.out_of_memory(scn, params, job.dtype, key.variant, target)} ({failed[1]})")
    found = _resources(key, avail, built, job, scn, specs)  # compile-only rows report resources too
    if failed:
        return replace(built, status=failed[0], reason=failed[1], compile_ms=compile_ms, launcher=launcher), found
    max_rel_err, problem = numerics.judge(out, ref, tol)
    status, reason = ("mismatch", problem) if problem else ("ok", "")
    notes = registry.notes(launcher)
    if status == "ok" and mode == targets.NATIVE and key.device == "cuda":
        discipline = _stream_discipline(launcher, device_out, target, job, key, avail)
        notes = {**notes, "stream": discipline.note}
        if discipline.ok is False:
            status, reason = "error", discipline.reason
    if status == "ok" and mode == targets.NATIVE:
        status, reason = _follows_inputs(key, avail, job, scn, data, params)
    if mode == targets.EMULATED and not reason:
        where = f" on the slice {built.checked_params}" if built.checked_params else " on the whole case"
        reason = f"{target.probe().reason}; numerics checked{where}"
    if mode == targets.NATIVE:
        notes = {**notes, "input_sets": input_sets(job.timing.input_sets, inputs, out)}
    rebuild = rebuilder(key, avail, job, scn, data, params, out) if status == "ok" and mode == targets.NATIVE else None
    return replace(built, status=status, reason=reason, compile_ms=compile_ms, max_rel_err=max_rel_err, out=out,
                 launcher=launcher, notes=notes, rebuild=rebuild), found  # fmt: skip


def _written(inputs: dict[str, np.ndarray], dev_inputs: dict[str, Any], target: targets.Target) -> str:
    """Why the call is an `error` where it changed an input (read back from the device, held to the host copy
    it was made from, bit for bit), naming the input; empty where none changed."""
    for name, a in inputs.items():
        got = np.asarray(target.to_host(dev_inputs[name]))
        if got.shape != a.shape or not np.array_equal(got, a, equal_nan=True):
            changed = int(np.count_nonzero(~_same(got, a))) if got.shape == a.shape else a.size
            return f"the kernel wrote its input '{name}' ({changed} of {a.size} elements changed)"
    return ""


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    both_nan = np.isnan(a) & np.isnan(b) if dtypes.is_float(a.dtype) else np.zeros(a.shape, bool)
    return (a == b) | both_nan


def _follows_inputs(key: KernelKey, avail: Availability, job: Job, scn: Scenario, data: Inputs,
                    params: Params) -> tuple[str, str]:  # fmt: skip
    """('ok', '') where the implementation, built again on a fresh draw of inputs of the same shapes, matches
    their own reference: a kernel that caches or replays a result (keyed by shape, by a global, by anything but
    the values) is a `mismatch` saying so. One more build and call per implementation; the fresh reference is
    made once per case."""
    target = avail.target
    assert target is not None
    inputs, ref, tol = data.get(params, fresh=True)
    try:
        launcher, device_out, _ = _build(key, avail, job, scn, params, {n: np.array(a) for n, a in inputs.items()}, [])
        launcher()
        target.synchronize()
        got = np.asarray(target.to_host(device_out))
    except Exception as exc:
        fault = faults.classify(exc) if key.device == "cuda" else None
        if fault is not None and fault.sticky:
            raise faults.ContextLost(fault.what, fault.detail) from exc
        return "error", f"on fresh inputs of the same shape: {type(exc).__name__}: {exc}".splitlines()[0]
    _, problem = numerics.judge(got, ref, tol)
    if problem:
        return "mismatch", f"output does not follow its inputs: on fresh inputs of the same shape, {problem}"
    return "ok", ""


ROTATION_BUDGET = 64 << 20
"""Bytes the input sets a timing block rotates through may hold together (inputs and output of each): about
twice a CPU's last-level cache and more than an H100's L2, so small cases rotate and large ones, already
beyond any cache, take one set per block."""


def input_sets(wanted: int, inputs: dict[str, np.ndarray], out: np.ndarray | None) -> int:
    """How many sets of buffers a timing block rotates through: `wanted` (timing.input_sets), fewer where they
    would not fit ROTATION_BUDGET together, at least one."""
    per_set = sum(a.nbytes for a in inputs.values()) + (out.nbytes if out is not None else 0)
    return max(1, min(int(wanted), ROTATION_BUDGET // max(per_set, 1)))


OFFSET_STEP = 1088
"""Bytes by which each timing block shifts its input buffers (17 cache lines, so block b's inputs start b·1088
bytes mod 4096 past a page): cache-line aligned, as vector loads want, but at another place within the page, so
that the inputs and outputs meet the cache sets and the 4 KiB store-to-load aliasing at another distance."""


def offset_copy(a: np.ndarray, block: int) -> np.ndarray:
    """A fresh host copy of `a` starting `block`·OFFSET_STEP mod 4096 bytes into its own allocation."""
    shift = block * OFFSET_STEP % 4096
    raw = np.empty(a.nbytes + shift, dtype=np.uint8)
    out = raw[shift : shift + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def rebuilder(key: KernelKey, avail: Availability, job: Job, scn: Scenario, data: Inputs, params: Params,
              checked: np.ndarray) -> Any:  # fmt: skip
    """`rebuild(block)`: the implementation built again on fresh buffers (inputs copied to `offset_copy`s, a new
    poisoned output), run once, and its output held to the one already checked (on a sample of it: the values
    must not depend on where they live). Timing blocks draw on it (`suite.run.timing.measure_blocks`); a block's
    j-th extra input set (block + j·`timing.SET_STRIDE`) is None where j + 1 sets would not fit (`input_sets`)."""
    target = avail.target
    assert target is not None

    def rebuild(block: int) -> Any:
        inputs, _, _ = data.get(params)
        if block // timing.SET_STRIDE + 1 > input_sets(job.timing.input_sets, inputs, checked):
            return None
        if reason := footprint.guard(scn, params, job.dtype, key.variant, target):
            raise MemoryError(f"no fresh set of buffers: {reason}")
        inputs, _, tol = data.get(params)
        host = {name: offset_copy(a, block) for name, a in inputs.items()}
        try:
            launcher, device_out, _ = _build(key, avail, job, scn, params, host, [])
            launcher()
            target.synchronize()
            got = np.asarray(target.to_host(device_out))
        except Exception as exc:  # a sticky CUDA error loses the context: only the worker's restart helps
            fault = faults.classify(exc) if key.device == "cuda" else None
            if fault is not None and fault.sticky:
                raise faults.ContextLost(fault.what, fault.detail) from exc
            raise
        err = numerics.rel_err(_spots(got), _spots(checked))
        if not np.isfinite(err) or err > 2 * tol:
            raise RuntimeError(f"buffer set {block}: output differs from the checked one by {err:.3g}")
        return launcher

    return rebuild


def _spots(a: np.ndarray, most: int = 1 << 16) -> np.ndarray:
    """At most about `most` elements of `a`, evenly strided, the first and last among them."""
    flat = a.reshape(-1)
    step = max(1, flat.size // most)
    return np.concatenate([flat[::step], flat[-1:]])


def _stream_discipline(launcher: Any, device_out: Any, target: targets.Target, job: Job, key: KernelKey,
                       avail: Availability) -> stream_check.Discipline:  # fmt: skip
    """Whether every kernel of a CUDA launcher runs on the shared stream (`suite.run.stream_check`); a check
    that cannot be made (an output without `__cuda_array_interface__`, a driver call failing) is unchecked."""
    try:
        stream = options(job, key, avail.mode)["stream"]
        return stream_check.check(launcher, stream_check.device_probe(device_out, target, stream))
    except Exception as exc:
        fault = faults.classify(exc)
        if fault is not None and fault.sticky:
            raise faults.ContextLost(fault.what, fault.detail) from exc
        return stream_check.Discipline(None, f"stream discipline not checked: {type(exc).__name__}: {exc}")


def _failure(key: KernelKey, exc: Exception) -> tuple[tuple[str, str], bool]:
    """The status and reason of a build or first launch that raised, and whether a CUDA kernel ran the device out
    of memory. A sticky CUDA error is raised on as `faults.ContextLost`: this process cannot run CUDA again."""
    fault = faults.classify(exc) if key.device == "cuda" else None
    if fault is not None and fault.sticky:
        raise faults.ContextLost(fault.what, fault.detail) from exc
    if fault is not None:
        return ("error", fault.detail), True
    return ("error", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"), False


def _build(key: KernelKey, avail: Availability, job: Job, scn: Scenario, params: Params,
           inputs: dict[str, np.ndarray], specs: list) -> tuple[Any, Any, dict[str, Any]]:  # fmt: skip
    """The entry's launcher, the poisoned output buffer it writes and the inputs on the device, the kernels it
    builds recorded. The uploads and the poison are complete before the entry is built (it may launch) or its
    launcher first runs."""
    target = avail.target
    assert target is not None
    dev_inputs = {name: target.asarray(a) for name, a in inputs.items()}
    out = target.empty(scn.output_shape(params), job.dtype)
    target.poison(out)
    target.synchronize()  # device-wide: the copies' stream does not order with the shared one (see the docstring)
    entry = REGISTRY.get(key)
    opts = options(job, key, avail.mode)
    with resources.recording(specs) if key.device == "cuda" else contextlib.nullcontext():
        launcher = entry(dev_inputs, out, params, opts)
    if (fraction := slowdown.wanted(opts, key.variant)) and avail.mode == targets.NATIVE:
        spin = None
        if key.device == "cuda":
            from suite.gpu import driver as cuda_driver

            spin = lambda ns: cuda_driver.spin(opts["stream"], ns)
        launcher = slowdown.slowed(launcher, fraction, target.synchronize, spin)
    return launcher, out, dev_inputs


def _first_launch(launcher: Any, target: targets.Target, mode: str) -> float | None:
    """Run once (JIT compiles happen here) and synchronise the device, so that the output is written before it
    is read back; its time is the compile time, natively only: an interpreter's or a simulator's time is no
    compile time."""
    start = time.perf_counter()
    launcher()
    target.synchronize()
    return (time.perf_counter() - start) * 1e3 if mode == targets.NATIVE else None


def _resources(
    key: KernelKey, avail: Availability, check: Check, job: Job, scn: Scenario, specs: list
) -> KernelResources:
    """The resources `suite.gpu.resources` reports for the kernels built: the case's own where emulation ran a
    slice (see `_case_specs`). Analysis never fails the implementation."""
    built_for = None
    if key.device == "cuda" and check.run_params != job.params:
        specs, built_for = _case_specs(key, avail, check, job, scn, specs)
    found = SimpleNamespace(regs=None, spill_bytes=None, smem_bytes=None, occupancy=None, extra={})
    resources.annotate(found, key.device, specs, built_for, arch=job.arch)
    return KernelResources(found.regs, found.spill_bytes, found.smem_bytes, found.occupancy, found.extra)


def _case_specs(key: KernelKey, avail: Availability, check: Check, job: Job, scn: Scenario,
                slice_specs: list) -> tuple[list, str | None]:  # fmt: skip
    """The CUDA kernels the entry builds for the case itself, when emulation ran a smaller slice of it.

    A slice may change what is compiled (a narrower row gets a smaller tile), so the resources must come from
    an entry built for the case's params: built on arrays of the case's shapes that are allocated but never
    written (untouched pages cost no memory) and never launched. Where that fails, the slice's kernels are
    reported, and the params they were built for named."""
    target = avail.target
    assert target is not None
    specs: list = []
    try:
        shapes = scn.input_shapes(job.params)
        inputs = {name: target.empty(shape, job.dtype) for name, shape in shapes.items()}
        out = target.empty(scn.output_shape(job.params), job.dtype)
        with resources.recording(specs):
            REGISTRY.get(key)(inputs, out, job.params, options(job, key, avail.mode))
    except Exception:
        return slice_specs, check.checked_params or None
    return specs, None


def save_io(key: KernelKey, check: Check, job: Job, data: Inputs) -> None:
    """Inputs, output and reference of a checked implementation as .npz (save_io=true), to inspect offline."""
    if not job.io_dir or check.out is None:
        return
    inputs, ref, _ = data.get(check.run_params)
    meta = {"scenario": key.scenario, "params": check.run_params, "dtype": job.dtype, "backend": key.backend,
            "device": key.device, "variant": key.variant}  # fmt: skip
    name = f"{key.scenario}_{zlib.crc32(params_json(check.run_params).encode()):08x}_{job.dtype}"
    path = Path(job.io_dir) / f"{name}__{key.backend}-{key.device}-{key.variant}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **inputs, out=check.out, reference=ref, meta=json.dumps(meta, sort_keys=True))
