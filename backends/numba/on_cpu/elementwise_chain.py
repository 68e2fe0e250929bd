"""Elementwise chain on the host CPU with Numba: fused (one parallel loop) against unfused (one loop per op).

Both variants come from one kernel factory and the same op code: the fused kernel applies the whole chain to
each element in float32, an unfused kernel is that same kernel for a one-op chain, reading the previous
intermediate in the chain's dtype and writing its own. So the two differ only in fusion. Half-precision
arrays travel as their uint16 bits (Numba's CPU target has no float16) and are converted in the loop by
`VECTOR_CODECS` (F16C where the host has it), and tanh and exp are the vectorisable float32 functions unless
`backend_options.numba.math=libm`: without a scalar call or a branch in the loop, LLVM vectorises it.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numba
import numpy as np
from numba import njit, prange

from backends.numba import BACKEND
from backends.numba.op_tables import chain
from backends.numba.ops import VECTOR_CODECS
from suite.core.registry import Launcher, kernel


@functools.cache
def chain_kernel(ops: tuple[str, ...], dtype: str, math: str) -> Any:
    """out[i] = store(op_k(...op_1(load(x[i])))) as a parallel loop; one per (chain, dtype, math), built once."""
    apply = chain(ops, math)
    load, store = VECTOR_CODECS[dtype]

    @njit(parallel=True, fastmath=False, cache=False)
    def run_chain(x, out):  # type: ignore[no-untyped-def]
        for i in prange(x.size):
            out[i] = store(apply(load(x[i])))

    return run_chain


def _storage(a: np.ndarray) -> np.ndarray:
    """The array as the kernels see it: halves as their uint16 bits (a view, no copy)."""
    return a.view(np.uint16) if a.dtype == np.float16 else a


def _compiled(ops: tuple[str, ...], x: np.ndarray, out: np.ndarray, dtype: str, math: str) -> Any:
    """The chain's kernel, compiled now for exactly these arrays so that no launch compiles."""
    dispatcher = chain_kernel(ops, dtype, math)
    dispatcher.compile((numba.typeof(x), numba.typeof(out)))
    return dispatcher


def _dtype(inputs: dict[str, Any], out: np.ndarray) -> str:
    """The chain's dtype; x and out must share it."""
    dtype = str(out.dtype)
    if dtype not in VECTOR_CODECS or inputs["x"].dtype != out.dtype:
        raise ValueError(
            f"numba/cpu elementwise_chain: x {inputs['x'].dtype} -> out {dtype}; needs one of {list(VECTOR_CODECS)}"
        )
    return dtype


@kernel(scenario="elementwise_chain", backend="numba", variant="fused", device="cpu")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """One kernel: reads x once, applies every op in float32, writes out once."""
    dtype, math = _dtype(inputs, out), BACKEND.option(opts, "math")
    x, y = _storage(inputs["x"]), _storage(out)
    dispatcher = _compiled(tuple(params["ops"]), x, y, dtype, math)

    def launch() -> None:
        dispatcher(x, y)

    launch.notes = {"math": math}  # type: ignore[attr-defined]
    return launch


@kernel(scenario="elementwise_chain", backend="numba", variant="unfused", device="cpu")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """One kernel per op; each intermediate is stored in the chain's dtype and read back by the next kernel."""
    dtype, math = _dtype(inputs, out), BACKEND.option(opts, "math")
    ops = tuple(params["ops"])
    y = _storage(out)
    buffers = [_storage(inputs["x"]), *(np.empty_like(y) for _ in ops[:-1]), y]
    pairs = zip(ops, itertools.pairwise(buffers), strict=True)
    steps = [(_compiled((op,), src, dst, dtype, math), src, dst) for op, (src, dst) in pairs]

    def launch() -> None:
        for op_kernel, src, dst in steps:
            op_kernel(src, dst)

    launch.notes = {"math": math}  # type: ignore[attr-defined]
    return launch
