"""Elementwise chain on CUDA with Numba: fused (one kernel) against unfused (one kernel per op).

As on the CPU, one kernel factory and the same op code make both variants: a thread loads its element, widens
it to float32, applies the chain and stores the result in the array's dtype (float32 or float16). The fused
kernel is built for the whole chain, an unfused kernel for a single op, reading the previous intermediate
from device memory and writing its own. Each op's kernel is shared by every chain that uses the op.

Threads walk the array with a grid-stride loop, so the grid is sized per shape (`suite.kit.launch_shape.
elementwise_launch`): one element per thread up to a few waves of resident blocks, a loop beyond; the threads
per block are the `block` option's, fewer for an array smaller than a block.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from backends.numba import BACKEND, simulating, stream_arg
from backends.numba.on_cuda.launch import device
from backends.numba.op_tables import chain
from backends.numba.record import record_numba
from suite.core.registry import Launch, Launcher, kernel
from suite.kit.launch_shape import block_chosen_by, elementwise_launch, launch_notes

try:
    from numba import cuda  # a module global, which the simulator swaps for its per-thread fake
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None


DTYPES = ("float32", "float16")
"""Stored dtypes; numba-cuda converts float16 to and from float32 natively (cvt.f32.f16 / cvt.rn.f16.f32)."""


@functools.cache
def kernel_source(ops: tuple[str, ...]) -> Callable[..., None]:
    """The kernel as a Python function (what `cuda.jit` and `cuda.compile_ptx` take): a grid-stride loop."""
    apply = chain(ops)

    def chain_kernel(x, out):  # type: ignore[no-untyped-def]
        i = np.int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x  # cuda.grid(1) is 32-bit
        stride = np.int64(cuda.gridDim.x) * cuda.blockDim.x
        while i < x.size:
            out[i] = apply(np.float32(x[i]))
            i += stride

    return chain_kernel


@functools.cache
def _chain_kernel(ops: tuple[str, ...]) -> Any:
    """One dispatcher per chain; it specialises per dtype on first compile."""
    return cuda.jit(kernel_source(ops))


def kernel_sources(variant: str, params: dict, dtype: str) -> dict[str, tuple[Callable[..., None], str]]:
    """A variant's kernels as name -> (Python function, signature), for compiling without a GPU."""
    ops = tuple(params["ops"])
    chains = [ops] if variant == "fused" else [(op,) for op in dict.fromkeys(ops)]
    return {"+".join(c): (kernel_source(c), f"void({dtype}[::1], {dtype}[::1])") for c in chains}


def _launcher(ops: tuple[str, ...], x: Any, out: Any, option: int | None, stream: Any) -> Launcher:
    """Compile (on a GPU) and configure the kernel of `ops` for these arrays: the launch is all that is left."""
    if str(out.dtype) not in DTYPES or x.dtype != out.dtype:
        raise ValueError(f"numba/cuda elementwise_chain: x {x.dtype} -> out {out.dtype}; needs one of {DTYPES}")
    dispatcher = _chain_kernel(ops)
    compiled = None
    if not simulating():
        compiled = dispatcher.compile((numba.typeof(x), numba.typeof(out)))
    gpu = device()
    block, grid = elementwise_launch(x.size, option, gpu)
    array = f"{out.dtype}[::1]"
    record_numba((__name__, "kernel_source", (ops,)), (array, array), block, name="+".join(ops), compiled=compiled)

    def launch() -> None:
        # Configured at each launch: the simulator's kernel object keeps its last configuration, and the
        # dispatcher (one per chain) is shared by every entry built from it.
        dispatcher[grid, block, stream](x, out)

    where = {"sms": gpu.sms, "sms_from": gpu.source}  # threads: the option or n, capped by n; the grid: n and SMs
    return Launch(launch, notes=launch_notes({"block": block}, grid, block_chosen_by(option), **where))


@kernel(scenario="elementwise_chain", backend="numba", variant="fused", device="cuda")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """One kernel: reads x once, applies every op in float32, writes out once."""
    stream = stream_arg(opts.get("stream"))
    return _launcher(tuple(params["ops"]), inputs["x"], out, BACKEND.option(opts, "block"), stream)


@kernel(scenario="elementwise_chain", backend="numba", variant="unfused", device="cuda")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """One kernel per op; each intermediate is stored in the chain's dtype and read back by the next kernel."""
    ops, block, stream = tuple(params["ops"]), BACKEND.option(opts, "block"), stream_arg(opts.get("stream"))
    buffers = [inputs["x"], *(cuda.device_array(out.shape, dtype=out.dtype) for _ in ops[:-1]), out]
    pairs = zip(ops, itertools.pairwise(buffers), strict=True)
    steps = [_launcher((op,), src, dst, block, stream) for op, (src, dst) in pairs]

    def launch() -> None:
        for step in steps:
            step()

    return Launch(launch, notes={"launch": {**steps[0].notes["launch"], "kernels": len(steps)}})
