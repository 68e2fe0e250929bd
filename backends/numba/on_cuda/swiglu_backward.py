"""swiglu's training step on CUDA with Numba (the same kernels run in the simulator): the forward that keeps what
its backward reads, and the backward, fused and unfused (`scenarios.swiglu.backward` says what each saves and
moves).

The forwards are the forward module's own launches (`backends.numba.on_cuda.swiglu`): fused keeps only a and b;
unfused writes silu(a) into s, keeps it and multiplies it by b. The backward kernels are grid-stride loops over
the flat arrays, as the forward's: fused is one kernel that reads a, b and dy once, recomputes σ(a) and silu(a)
with `backends.numba.ops.sigmoid` (libdevice's expf on CUDA) and writes da = dy·b·silu′(a) and db = dy·silu(a);
unfused is autograd's three, the forward's product kernel twice (db = dy·s, ds = dy·b into a temporary) and then
silu's backward, da = ds·silu′(a). Everything computes in float32 and stores in the case's dtype; the grid is
sized per shape (`elementwise_launch`), as the forward's.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from backends.numba import BACKEND, simulating, stream_arg
from backends.numba.on_cuda import swiglu as forward
from backends.numba.on_cuda.launch import device
from backends.numba.ops import ONE, sigmoid
from backends.numba.record import record_numba
from suite.kit.launch_shape import block_chosen_by, elementwise_launch, launch_notes
from suite.kit.training import Pass, training

try:
    from numba import cuda  # a module global, which the simulator swaps for its per-thread fake
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None

MODES = ("grads", "silu_grad")


@functools.cache
def kernel_source(mode: str) -> Callable[..., None]:
    """grads: (a, b, dy, da, db) -> da = dy·b·silu′(a), db = dy·silu(a); silu_grad: (ds, a, da) -> da = ds·silu′(a)."""
    if mode == "grads":

        def swiglu_backward(a, b, dy, da, db):  # type: ignore[no-untyped-def]
            i = np.int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
            stride = np.int64(cuda.gridDim.x) * cuda.blockDim.x
            while i < da.size:
                v = np.float32(a[i])
                g = np.float32(dy[i])
                sig = sigmoid(v)
                s = v * sig
                db[i] = g * s
                da[i] = g * np.float32(b[i]) * (sig + s * (ONE - sig))
                i += stride

        return swiglu_backward
    if mode != "silu_grad":
        raise ValueError(f"swiglu backward mode {mode!r}; one of {MODES}")

    def silu_backward(ds, a, da):  # type: ignore[no-untyped-def]
        i = np.int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        stride = np.int64(cuda.gridDim.x) * cuda.blockDim.x
        while i < da.size:
            v = np.float32(a[i])
            sig = sigmoid(v)
            da[i] = np.float32(ds[i]) * (sig + v * sig * (ONE - sig))
            i += stride

    return silu_backward


@functools.cache
def _dispatcher(mode: str) -> Any:
    return cuda.jit(kernel_source(mode))


def _check(arrays: dict[str, Any]) -> None:
    found = {k: str(a.dtype) for k, a in arrays.items()}
    if len(set(found.values())) != 1 or next(iter(found.values())) not in ("float32", "float16"):
        raise ValueError(f"numba/cuda swiglu training: {found}; needs one dtype of float32 or float16")


def _backward_launcher(steps: list[tuple[tuple[str, str, str], tuple]], opts: dict) -> Pass:
    """Each step is ((module, factory, mode), args): compiled and recorded now, launched in order by the pass."""
    n, option, stream = steps[0][1][-1].size, BACKEND.option(opts, "block"), stream_arg(opts.get("stream"))
    gpu = device()
    block, grid = elementwise_launch(n, option, gpu)
    prepared = []
    for (module, factory, mode), args in steps:
        dispatcher = getattr(importlib.import_module(module), factory)(mode)
        compiled = None if simulating() else dispatcher.compile(tuple(numba.typeof(a) for a in args))
        record_numba((module, factory, (mode,)), args, block, name=f"swiglu {mode}", compiled=compiled)
        prepared.append((dispatcher, args))

    def run() -> None:
        for dispatcher, args in prepared:
            dispatcher[grid, block, stream](*args)  # configured at each launch (the simulator keeps the last)

    where = {"sms": gpu.sms, "sms_from": gpu.source}
    return Pass(run, notes=launch_notes({"block": block}, grid, block_chosen_by(option), kernels=len(steps), **where))


def _flat(a: Any) -> Any:
    return a.reshape(a.size)


def fused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """The forward's fused kernel; a and b are all it keeps."""
    _check({"a": inputs["a"], "b": inputs["b"], "y": y})
    launch = forward._launcher([(_flat(inputs["a"]), _flat(inputs["b"]), _flat(y), "fused")], opts)
    return Pass(launch.run, saved={"a": inputs["a"], "b": inputs["b"]}, notes=launch.notes)


def fused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One kernel: a, b, dy read once; σ and silu recomputed; da and db written once."""
    arrays = {"a": saved["a"], "b": saved["b"], "dy": inputs["dy"], "da": grads["da"], "db": grads["db"]}
    _check(arrays)
    args = tuple(_flat(t) for t in arrays.values())
    return _backward_launcher([((__name__, "_dispatcher", "grads"), args)], opts)


def unfused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """silu(a) into s (allocated here, kept for the backward), then the product: the forward's two kernels."""
    _check({"a": inputs["a"], "b": inputs["b"], "y": y})
    s = cuda.device_array(inputs["a"].shape, dtype=inputs["a"].dtype)
    a, b, sf = _flat(inputs["a"]), _flat(inputs["b"]), _flat(s)
    launch = forward._launcher([(a, a, sf, "silu"), (sf, b, _flat(y), "mul")], opts)
    return Pass(launch.run, saved={"a": inputs["a"], "b": inputs["b"], "s": s}, notes=launch.notes)


def unfused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """db = dy·s and ds = dy·b (the forward's product kernel; ds a temporary allocated here), then
    da = ds·silu′(a): three launches."""
    arrays = {k: saved[k] for k in ("a", "b", "s")} | {"dy": inputs["dy"], "da": grads["da"], "db": grads["db"]}
    _check(arrays)
    a, b, s, dy, da, db = (_flat(t) for t in arrays.values())
    ds = cuda.device_array(dy.size, dtype=dy.dtype)
    product = (forward.__name__, "_dispatcher", "mul")
    steps = [(product, (dy, s, db)), (product, (dy, b, ds)), ((__name__, "_dispatcher", "silu_grad"), (ds, a, da))]
    return _backward_launcher(steps, opts)


training(
    "swiglu",
    backend="numba",
    device="cuda",
    like=lambda a: cuda.device_array_like(a),
    fused=(fused_forward, fused_backward),
    unfused=(unfused_forward, unfused_backward),
)
