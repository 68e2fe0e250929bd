"""Whether an implementation can run here, and building it: the entry called on uploaded inputs and a poisoned
output, its first launch (the JIT call, timed as compile_ms), what a build that raised means, and the resources
of the CUDA kernels it built.

This is the only place a kernel's entry is built and first called; the build-and-check (`suite.run.check`) and
the honesty checks (`suite.run.honesty`) build through it. A target that cannot run here is `skipped` with the
reason. A build that raises is an `error`, never an exception, except a sticky CUDA error (an illegal address, a
launch failure): it raises `faults.ContextLost`, since no later CUDA call in this process can succeed and only the
worker's restart can help (`suite.run.worker`).

The inputs are uploaded, the output allocated and poisoned on whatever stream each library queues copies on
(CuPy's and torch's: the legacy default stream), while kernels launch on the suite's shared stream, created
non-blocking: nothing orders the two. A device-wide synchronisation comes between them, and another between the
first launch and the read-back.
"""

from __future__ import annotations

import contextlib
import time
from types import SimpleNamespace
from typing import Any

import numpy as np

from suite.core import registry, targets
from suite.core.backend import BACKENDS
from suite.core.registry import REGISTRY, KernelKey
from suite.core.scenario import Params, Scenario
from suite.gpu import resources
from suite.run import faults, outputs, slowdown
from suite.run.job import Job
from suite.run.stages import Availability, Check, KernelResources


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


def build(
    key: KernelKey,
    avail: Availability,
    job: Job,
    scn: Scenario,
    params: Params,
    inputs: dict[str, np.ndarray],
    specs: list,
) -> tuple[Any, Any, dict[str, Any]]:
    """The entry's launcher, the poisoned output buffer it writes and the inputs on the device, the kernels it
    builds recorded. The uploads and the poison are complete before the entry is built (it may launch) or its
    launcher first runs."""
    target = avail.target
    assert target is not None
    dev_inputs = {name: target.asarray(a) for name, a in inputs.items()}
    out = outputs.allocate(target, scn.output_shape(params), job.dtype)
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


def first_launch(launcher: Any, target: targets.Target, mode: str) -> float | None:
    """Run once (JIT compiles happen here) and synchronise the device, so that the output is written before it
    is read back; its time is the compile time, natively only: an interpreter's or a simulator's time is no
    compile time."""
    start = time.perf_counter()
    registry.as_launch(launcher).checked()
    target.synchronize()
    return (time.perf_counter() - start) * 1e3 if mode == targets.NATIVE else None


def failure(key: KernelKey, exc: Exception) -> tuple[tuple[str, str], bool]:
    """The status and reason of a build or first launch that raised, and whether a CUDA kernel ran the device out
    of memory. A sticky CUDA error is raised on as `faults.ContextLost`: this process cannot run CUDA again."""
    fault = faults.classify(exc) if key.device == "cuda" else None
    if fault is not None and fault.sticky:
        raise faults.ContextLost(fault.what, fault.detail) from exc
    if fault is not None:
        return ("error", fault.detail), True
    return ("error", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"), False


def kernel_resources(
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


def _case_specs(
    key: KernelKey, avail: Availability, check: Check, job: Job, scn: Scenario, slice_specs: list
) -> tuple[list, str | None]:
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
        out = outputs.empty(target, scn.output_shape(job.params), job.dtype)
        with resources.recording(specs):
            REGISTRY.get(key)(inputs, out, job.params, options(job, key, avail.mode))
    except Exception:
        return slice_specs, check.checked_params or None
    return specs, None
