"""The build-and-check of one implementation: build, run once into a poisoned buffer, judge the numbers, hold it
honest. Every stage result of it is a `Check`, never an exception, so nothing here stops the sweep.

A kernel that raises is an `error`, a wrong or partly unwritten output a `mismatch`, a target that cannot run
here `skipped` with the reason (`suite.run.build`). A CUDA kernel that runs the device out of memory is an `error`
naming the case's footprint and the free memory. An entry that raises `registry.Unsupported` (no kernel for this
dtype or shape) gives a `skipped` row with its reason. An output whose numbers pass is then held to the honesty
checks (`suite.run.honesty`): inputs unchanged, timer untouched, kernels on the shared stream, output following
fresh inputs.

CUDA kernels without a GPU run in emulation (on a slice of the case where it is large) for numerics only; their
resources are still those of the case's kernels.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from suite.core import registry, targets
from suite.core.registry import KernelKey
from suite.core.row import params_json
from suite.core.scenario import Scenario
from suite.run import build, footprint, honesty, outputs, timing
from suite.run.case_inputs import Inputs
from suite.run.job import Job
from suite.run.stages import Availability, Check, KernelResources


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
    built = Check("ok", "", params, outputs.loosest(tol), params_json(params) if params != job.params else "")
    specs: list = []  # the CUDA kernels the entry builds, for the static resource report (before any timing)
    launcher = device_out = out = compile_ms = None
    failed: tuple[str, str] | None = None
    out_of_memory = False
    timing.restore()  # whatever an import or an earlier implementation replaced, this one is judged alone
    try:
        private = {name: np.array(a) for name, a in inputs.items()}  # a host target's asarray may not copy
        launcher, device_out, dev_inputs = build.build(key, avail, job, scn, params, private, specs)
        compile_ms = build.first_launch(launcher, target, mode)
        out = outputs.to_host(target, device_out)
        if written := honesty.inputs_written(inputs, dev_inputs, target):
            failed = ("error", written)
    except (targets.NotRunnable, registry.Unsupported) as exc:
        failed = ("skipped", str(exc))
    except Exception as exc:
        failed, out_of_memory = build.failure(key, exc)
    if replaced := honesty.timer_replaced():
        failed = ("error", replaced)
    if failed and out_of_memory:  # free memory read once the attempt's buffers are dropped (its traceback held them)
        launcher = device_out = None
        failed = ("error", f"{footprint.out_of_memory(scn, params, job.dtype, key.variant, target)} ({failed[1]})")
    found = build.kernel_resources(key, avail, built, job, scn, specs)  # compile-only rows report resources too
    if failed:
        return replace(built, status=failed[0], reason=failed[1], compile_ms=compile_ms, launcher=launcher), found
    max_rel_err, problem, worst_tol, per_output = outputs.judge(out, ref, tol)
    status, reason = ("mismatch", problem) if problem else ("ok", "")
    notes = registry.notes(launcher)
    if per_output:
        notes = {**notes, "outputs": per_output}
    if saves := registry.as_launch(launcher).saves:
        notes = {**notes, "saved": dict(saves)}
    if status == "ok" and mode == targets.NATIVE and key.device == "cuda":
        discipline = honesty.stream_discipline(launcher, device_out, target, job, key, avail)
        notes = {**notes, "stream": discipline.note}
        if discipline.ok is False:
            status, reason = "error", discipline.reason
    if status == "ok" and mode == targets.NATIVE:
        status, reason = honesty.follows_inputs(key, avail, job, scn, data, params)
    if mode == targets.EMULATED and not reason:
        where = f" on the slice {built.checked_params}" if built.checked_params else " on the whole case"
        reason = f"{target.probe().reason}; numerics checked{where}"
    if mode == targets.NATIVE:
        notes = {**notes, "input_sets": honesty.input_sets(job.timing.input_sets, inputs, out)}
    timed_natively = status == "ok" and mode == targets.NATIVE
    rebuild = honesty.rebuilder(key, avail, job, scn, data, params, out) if timed_natively else None
    return replace(
        built,
        status=status,
        reason=reason,
        tolerance=worst_tol,
        compile_ms=compile_ms,
        max_rel_err=max_rel_err,
        out=out,
        launcher=launcher,
        notes=notes,
        rebuild=rebuild,
    ), found
