"""swiglu on CUDA with Numba (the same kernels run in the simulator): grid-stride loops, one per mode.

Fused reads a and b and stores silu(a)·b; unfused launches silu (a -> s in the case's dtype) then the product.
silu is `backends.numba.ops.silu`, the function the elementwise chain compiles (libdevice's expf on CUDA), so
every variant computes it alike. The grid is sized per shape (`elementwise_launch`), as the chain's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from backends.numba import BACKEND, simulating, stream_arg
from backends.numba.on_cuda.launch import device
from backends.numba.ops import silu
from backends.numba.record import record_numba
from suite.core.registry import Launch, Launcher, kernel
from suite.kit.launch_shape import block_chosen_by, elementwise_launch, launch_notes

try:
    from numba import cuda  # a module global, which the simulator swaps for its per-thread fake
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None

MODES = ("fused", "silu", "mul")


@functools.cache
def kernel_source(mode: str) -> Callable[..., None]:
    """y = silu(p)·q (fused), silu(p) (q unread) or p·q, as a grid-stride loop over the flat arrays."""
    code = MODES.index(mode)  # an int: string comparisons do not compile for CUDA

    def swiglu(p, q, y):  # type: ignore[no-untyped-def]
        i = np.int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        stride = np.int64(cuda.gridDim.x) * cuda.blockDim.x
        while i < y.size:
            v = np.float32(p[i])
            if code != 2:
                v = silu(v)
            if code != 1:
                v = v * np.float32(q[i])
            y[i] = v
            i += stride

    return swiglu


@functools.cache
def _dispatcher(mode: str) -> Any:
    return cuda.jit(kernel_source(mode))


def kernel_sources(variant: str, params: dict, dtype: str) -> dict[str, tuple[Callable[..., None], str]]:
    """A variant's kernels as name -> (Python function, signature), for compiling without a GPU."""
    sig = f"void({dtype}[::1], {dtype}[::1], {dtype}[::1])"
    return {mode: (kernel_source(mode), sig) for mode in (("fused",) if variant == "fused" else ("silu", "mul"))}


def _launcher(steps: list[tuple[Any, Any, Any, str]], opts: dict) -> Launcher:
    n, option, stream = steps[0][2].size, BACKEND.option(opts, "block"), stream_arg(opts.get("stream"))
    gpu = device()
    block, grid = elementwise_launch(n, option, gpu)
    prepared = []
    for p, q, y, mode in steps:
        if str(y.dtype) not in ("float32", "float16") or p.dtype != y.dtype or q.dtype != y.dtype:
            raise ValueError(f"numba/cuda swiglu: arrays must share float32 or float16, got {y.dtype}")
        dispatcher = _dispatcher(mode)
        args = (p, q, y)
        compiled = None if simulating() else dispatcher.compile(tuple(numba.typeof(a) for a in args))
        record_numba((__name__, "_dispatcher", (mode,)), args, block, name=f"swiglu {mode}", compiled=compiled)
        prepared.append((dispatcher, args))

    def launch() -> None:
        for dispatcher, args in prepared:
            dispatcher[grid, block, stream](*args)  # configured at each launch (the simulator keeps the last)

    where = {"sms": gpu.sms, "sms_from": gpu.source}
    notes = launch_notes({"block": block}, grid, block_chosen_by(option), kernels=len(steps), **where)
    return Launch(launch, notes=notes)


def _flat(a: Any) -> Any:
    return a.reshape(a.size)


@kernel(scenario="swiglu", backend="numba", variant="fused", device="cuda")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    return _launcher([(_flat(inputs["a"]), _flat(inputs["b"]), _flat(out), "fused")], opts)


@kernel(scenario="swiglu", backend="numba", variant="unfused", device="cuda")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    a, b, y = _flat(inputs["a"]), _flat(inputs["b"]), _flat(out)
    s = cuda.device_array(y.size, dtype=y.dtype)
    return _launcher([(a, a, s, "silu"), (s, b, y, "mul")], opts)
