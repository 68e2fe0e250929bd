"""Elementwise chain on the host CPU with Numba: fused (one parallel loop) against unfused (one loop per op).

Both variants come from one kernel factory and the same op code: the fused kernel applies the whole chain to
each element in float32, an unfused kernel is that same kernel for a one-op chain, reading the previous
intermediate in the chain's dtype and writing its own. So the two differ only in fusion. Half-precision
arrays travel as their uint16 bits (Numba's CPU target has no float16) and are converted in the loop by
`VECTOR_CODECS` (F16C where the host has it), and tanh and exp are the vectorisable float32 functions unless
`backend_options.numba.math=libm`: without a scalar call or a branch in the loop, LLVM vectorises it.

A chain of several transcendental ops is fused through an L1-resident strip rather than in one expression per
element. Each exp-based op is a long dependency chain (range reduction, polynomial, division: ~100 cycles of
latency per vector), and a loop body of four of them is one chain the out-of-order core cannot overlap across
iterations; measured here, the 8-op chain ran at 1.2 ns an element fused, twice the sum of its ops run one loop
each. So the fused kernel cuts the chain into stages, each holding one transcendental op and the cheap ops around
it (`stages`), and runs every stage over a strip of `STRIP` elements in a thread's float32 buffer before the
next: each stage's loop is short, its iterations independent. The strip never leaves L1, so the ledger is the
fused one (x read once, out written once), and the values are those of the one-expression kernel, bit for bit.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numba
import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from backends.numba import BACKEND
from backends.numba.on_cpu.arrays import per_thread, storage
from backends.numba.op_tables import LONG_OPS, chain
from backends.numba.ops import VECTOR_CODECS
from suite.core.registry import Launch, Launcher, kernel

STRIP = 2048
"""Elements of a stage's strip: 8 KiB of float32 per thread, in L1 beside the strip of x it reads and of out it
writes. Measured in cache here, 256 to 8192 ran alike (0.55–0.60 ns an element for the 8-op chain)."""


def stages(ops: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The chain cut before every transcendental op but the first, so each stage holds at most one of them:
    [scale, shift, relu, square, tanh, sigmoid, silu, gelu] -> [scale … tanh], [sigmoid], [silu], [gelu]."""
    cuts = [i for i, op in enumerate(ops) if op in LONG_OPS][1:]
    return [ops[a:b] for a, b in itertools.pairwise([0, *cuts, len(ops)])]


@functools.cache
def chain_kernel(ops: tuple[str, ...], dtype: str, math: str) -> Any:
    """out[i] = store(op_k(...op_1(load(x[i])))) as a parallel loop; one per (chain, dtype, math), built once.
    Its arguments are (x, out, scratch); a chain of one stage ignores scratch (see `staged_kernel`)."""
    if len(stages(ops)) > 1:
        return staged_kernel(ops, dtype, math)
    apply = chain(ops, math)
    load, store = VECTOR_CODECS[dtype]

    @njit(parallel=True, fastmath=False, cache=False)
    def run_chain(x, out, scratch):  # type: ignore[no-untyped-def]
        for i in prange(x.size):
            out[i] = store(apply(load(x[i])))

    return run_chain


def _in_place(fns: tuple[Any, ...]) -> Any:
    """passes(buf, m): each of `fns` applied in turn over buf[:m], one loop per function."""
    if not fns:

        @register_jitable
        def nothing(buf, m):  # type: ignore[no-untyped-def]
            return None

        return nothing
    head, rest = fns[0], _in_place(fns[1:])

    @register_jitable
    def passes(buf, m):  # type: ignore[no-untyped-def]
        for j in range(m):
            buf[j] = head(buf[j])
        rest(buf, m)

    return passes


def staged_kernel(ops: tuple[str, ...], dtype: str, math: str) -> Any:
    """The chain stage by stage over strips of `STRIP` elements: the first stage loads x into the thread's
    float32 strip of `scratch` (one row per Numba thread), the middle ones run in place, the last stores out."""
    first, *middle, last = (chain(s, math) for s in stages(ops))
    between = _in_place(tuple(middle))
    load, store = VECTOR_CODECS[dtype]

    @njit(parallel=True, fastmath=False, cache=False)
    def run_staged(x, out, scratch):  # type: ignore[no-untyped-def]
        n = x.size
        for s in prange((n + STRIP - 1) // STRIP):
            buf = scratch[numba.get_thread_id()]
            lo = s * STRIP
            m = min(STRIP, n - lo)
            src, dst = x[lo : lo + m], out[lo : lo + m]
            for j in range(m):
                buf[j] = first(load(src[j]))
            between(buf, m)
            for j in range(m):
                dst[j] = store(last(buf[j]))

    return run_staged


def _scratch(ops: tuple[str, ...]) -> np.ndarray:
    """A float32 strip per thread of Numba's pool for a staged chain (indexed by numba.get_thread_id());
    an empty one for a chain of one stage."""
    return per_thread(STRIP if len(stages(ops)) > 1 else 0)


def _compiled(ops: tuple[str, ...], x: np.ndarray, out: np.ndarray, dtype: str, math: str) -> Any:
    """(the chain's kernel compiled now for exactly these arrays so that no launch compiles, its scratch)."""
    dispatcher, scratch = chain_kernel(ops, dtype, math), _scratch(ops)
    dispatcher.compile((numba.typeof(x), numba.typeof(out), numba.typeof(scratch)))
    return dispatcher, scratch


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
    ops = tuple(params["ops"])
    x, y = storage(inputs["x"]), storage(out)
    dispatcher, scratch = _compiled(ops, x, y, dtype, math)

    def launch() -> None:
        dispatcher(x, y, scratch)

    return Launch(launch, notes={"math": math, "stages": len(stages(ops))})


@kernel(scenario="elementwise_chain", backend="numba", variant="unfused", device="cpu")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """One kernel per op; each intermediate is stored in the chain's dtype and read back by the next kernel."""
    dtype, math = _dtype(inputs, out), BACKEND.option(opts, "math")
    ops = tuple(params["ops"])
    y = storage(out)
    buffers = [storage(inputs["x"]), *(np.empty_like(y) for _ in ops[:-1]), y]
    pairs = zip(ops, itertools.pairwise(buffers), strict=True)
    steps = [(*_compiled((op,), src, dst, dtype, math), src, dst) for op, (src, dst) in pairs]

    def launch() -> None:
        for op_kernel, scratch, src, dst in steps:
            op_kernel(src, dst, scratch)

    return Launch(launch, notes={"math": math})
