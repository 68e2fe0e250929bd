"""The checks that hold a kernel honest, plug-ins included: leaderboards were won by kernels that wrote their
inputs, replayed a cached result or patched the timer, so passing the numerics check once proves too little.

- Inputs unchanged: an implementation whose call changed an input is an `error` naming it (`inputs_written`).
- Output following its inputs: one run natively is built once more on fresh inputs of the same shape (another
  seed) and must match their own reference, or it is a `mismatch` (`follows_inputs`).
- Timed repetitions unable to reuse a result: timing blocks run on fresh buffers at shifted offsets, and each
  block's rounds rotate through several sets of them (`rebuilder`, `input_sets`, `offset_copy`).

Beside them, the same watch on the measurement itself: an implementation that replaced the suite's timer is an
`error` naming what (`timer_replaced`), and a CUDA one with a kernel off the shared stream, outside the timer's
events, is an `error` too (`stream_discipline`, `suite.run.stream_check`). The build-and-check
(`suite.run.check`) applies them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from suite.core import dtypes, registry, targets
from suite.core.registry import KernelKey
from suite.core.scenario import Params, Scenario
from suite.run import build, faults, footprint, outputs, stream_check, timing
from suite.run.case_inputs import Inputs
from suite.run.job import Job
from suite.run.stages import Availability


def inputs_written(inputs: dict[str, np.ndarray], dev_inputs: dict[str, Any], target: targets.Target) -> str:
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


def timer_replaced() -> str:
    """Why the implementation just judged is an `error` where it replaced the suite's timer, naming what (the
    timer restored); empty where it did not."""
    if replaced := timing.tampered():
        timing.restore()
        return f"the implementation replaced the suite's timer ({', '.join(replaced)})"
    return ""


def follows_inputs(
    key: KernelKey, avail: Availability, job: Job, scn: Scenario, data: Inputs, params: Params
) -> tuple[str, str]:
    """('ok', '') where the implementation, built again on a fresh draw of inputs of the same shapes, matches
    their own reference: a kernel that caches or replays a result (keyed by shape, by a global, by anything but
    the values) is a `mismatch` saying so. One more build and call per implementation; the fresh reference is
    made once per case."""
    target = avail.target
    assert target is not None
    inputs, ref, tol = data.get(params, fresh=True)
    try:
        launcher, device_out, _ = build.build(
            key, avail, job, scn, params, {n: np.array(a) for n, a in inputs.items()}, []
        )
        registry.as_launch(launcher).checked()
        target.synchronize()
        got = outputs.to_host(target, device_out)
    except Exception as exc:
        fault = faults.classify(exc) if key.device == "cuda" else None
        if fault is not None and fault.sticky:
            raise faults.ContextLost(fault.what, fault.detail) from exc
        return "error", f"on fresh inputs of the same shape: {type(exc).__name__}: {exc}".splitlines()[0]
    _, problem, _, _ = outputs.judge(got, ref, tol)
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
    per_set = sum(a.nbytes for a in inputs.values()) + (outputs.nbytes(out) if out is not None else 0)
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


def rebuilder(
    key: KernelKey, avail: Availability, job: Job, scn: Scenario, data: Inputs, params: Params, checked: np.ndarray
) -> Any:
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
            launcher, device_out, _ = build.build(key, avail, job, scn, params, host, [])
            registry.as_launch(launcher).checked()
            target.synchronize()
            got = outputs.to_host(target, device_out)
        except Exception as exc:  # a sticky CUDA error loses the context: only the worker's restart helps
            fault = faults.classify(exc) if key.device == "cuda" else None
            if fault is not None and fault.sticky:
                raise faults.ContextLost(fault.what, fault.detail) from exc
            raise
        err = outputs.rel_err(outputs.each(got, _spots), outputs.each(checked, _spots))
        if not np.isfinite(err) or err > 2 * outputs.loosest(tol):
            raise RuntimeError(f"buffer set {block}: output differs from the checked one by {err:.3g}")
        return launcher

    return rebuild


def _spots(a: np.ndarray, most: int = 1 << 16) -> np.ndarray:
    """At most about `most` elements of `a`, evenly strided, the first and last among them."""
    flat = a.reshape(-1)
    step = max(1, flat.size // most)
    return np.concatenate([flat[::step], flat[-1:]])


def stream_discipline(
    launcher: Any, device_out: Any, target: targets.Target, job: Job, key: KernelKey, avail: Availability
) -> stream_check.Discipline:
    """Whether every kernel of a CUDA launcher runs on the shared stream (`suite.run.stream_check`); a check
    that cannot be made (an output without `__cuda_array_interface__`, a driver call failing) is unchecked."""
    try:
        stream = build.options(job, key, avail.mode)["stream"]
        return stream_check.check(launcher, stream_check.device_probe(outputs.first(device_out), target, stream))
    except Exception as exc:
        fault = faults.classify(exc)
        if fault is not None and fault.sticky:
            raise faults.ContextLost(fault.what, fault.detail) from exc
        return stream_check.Discipline(None, f"stream discipline not checked: {type(exc).__name__}: {exc}")
