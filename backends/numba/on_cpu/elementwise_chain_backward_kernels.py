"""The elementwise chain's backward kernels on the host CPU: each op's derivative in float32, and the parallel loops
that apply a chain of them.

One kernel factory serves both variants, as in the forward (`backends.numba.on_cpu.elementwise_chain`): the fused
backward is `grad_kernel(ops)` for the whole chain — it reads x and dy, recomputes the chain in float32 and applies
each op's derivative last op first, writing dx — and the unfused backward of one op is the same kernel for a one-op
chain, reading that op's saved input and the running gradient. In float32 storage the two agree bit for bit.

Each op's backward is `d(v, w, g)`: its input v, its output w = op(v) (tanh's and sigmoid's derivatives are written
with it, and a fused kernel already has it from the forward it recomputes), and the incoming gradient g. The
transcendental functions are those of the forward's math mode (`op_table`), so the recomputed forward is the forward.

A chain of several transcendental ops is strip-mined as the forward is (its `stages`): per strip of `STRIP`
elements, one short loop per op fills a row of the thread's float32 scratch with v_1 … v_(k-1), then one loop per
op, last first, updates the gradient row; every loop's body is one op, so each vectorises and its iterations are
independent. The scratch stays in the core's cache, so the ledger is the fused one (x and dy read once, dx written
once), and the values are those of the one-expression kernel, bit for bit.
"""

from __future__ import annotations

import functools
from typing import Any

import numba
import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from backends.numba.on_cpu.elementwise_chain import stages
from backends.numba.op_tables import op_table
from backends.numba.ops import ONE, SCALE, VECTOR_CODECS, ZERO, A, C
from scenarios.elementwise_chain import GELU_A

STRIP = 512
"""Elements of a strip in the staged backward: k+1 float32 rows of it per thread (34 KiB for the longest chain of
16 ops, 18 KiB for eight), beside the strips of x, dy and dx it streams."""
C2, A3 = np.float32(2.0 * C), np.float32(3.0 * GELU_A)
"""2C (exact: doubling only changes the exponent) and 3A, the constants of gelu's derivative."""


@functools.cache
def derivatives(math: str) -> dict[str, Any]:
    """Each op's backward d(v, w, g) -> the gradient of v, in float32, with math mode `math`'s sigmoid."""
    sigmoid = op_table(math)["sigmoid"]

    @register_jitable
    def d_scale(v, w, g):  # type: ignore[no-untyped-def]
        return g * SCALE

    @register_jitable
    def d_shift(v, w, g):  # type: ignore[no-untyped-def]
        return g

    @register_jitable
    def d_relu(v, w, g):  # type: ignore[no-untyped-def]
        return ZERO if v <= ZERO else g  # torch's threshold_backward: 0 at the kink, NaN passes

    @register_jitable
    def d_square(v, w, g):  # type: ignore[no-untyped-def]
        return g * (v + v)

    @register_jitable
    def d_tanh(v, w, g):  # type: ignore[no-untyped-def]
        return g * (ONE - w * w)

    @register_jitable
    def d_sigmoid(v, w, g):  # type: ignore[no-untyped-def]
        return g * (w * (ONE - w))

    @register_jitable
    def d_silu(v, w, g):  # type: ignore[no-untyped-def]
        s = sigmoid(v)
        return g * (s * (ONE + v * (ONE - s)))

    @register_jitable
    def d_gelu(v, w, g):  # type: ignore[no-untyped-def]
        # gelu(v) = v·σ(2u), u = C·(v + A·v³): σ(2u) + 2v·σ(1−σ)·C·(1 + 3A·v²), no cancellation of 1 + tanh u
        s = sigmoid(C2 * (v + A * v * v * v))
        return g * (s + (v + v) * (s * (ONE - s)) * (C * (ONE + A3 * v * v)))

    return {
        "scale": d_scale,
        "shift": d_shift,
        "relu": d_relu,
        "square": d_square,
        "tanh": d_tanh,
        "sigmoid": d_sigmoid,
        "silu": d_silu,
        "gelu": d_gelu,
    }


def _one_expression(k: int) -> list[str]:
    """The kernel of a chain of one stage: per element, v_1 … v_(k-1) in registers, then the derivatives."""
    lines = [
        "def run_grad(x, dy, dx, scratch):",
        "    for i in prange(x.size):",
        "        v0 = load(x[i])",
        *(f"        v{i} = f{i - 1}(v{i - 1})" for i in range(1, k)),
        f"        g = d{k - 1}(v{k - 1}, f{k - 1}(v{k - 1}), load(dy[i]))",
        *(f"        g = d{i}(v{i}, v{i + 1}, g)" for i in reversed(range(k - 1))),
        "        dx[i] = store(g)",
    ]
    return lines


def _strips(k: int) -> list[str]:
    """The kernel of a chain of several stages: per strip, rows r0 … r(k-1) of the thread's scratch take x and
    v_1 … v_(k-1), one loop per op, then row rk the gradient, one loop per op, last op first."""
    rows = [f"r{i}" for i in range(k + 1)]
    lines = [
        "def run_grad(x, dy, dx, scratch):",
        "    n = x.size",
        "    for s in prange((n + STRIP - 1) // STRIP):",
        "        buf = scratch[get_thread_id()]",
        "        lo = s * STRIP",
        "        m = min(STRIP, n - lo)",
        "        xs, dys, dxs = x[lo : lo + m], dy[lo : lo + m], dx[lo : lo + m]",
        f"        {', '.join(rows)} = {', '.join(f'buf[{i}]' for i in range(k + 1))}",
        "        for j in range(m):",
        "            r0[j] = load(xs[j])",
        f"            r{k}[j] = load(dys[j])",
    ]
    for i in range(1, k):
        lines += ["        for j in range(m):", f"            r{i}[j] = f{i - 1}(r{i - 1}[j])"]
    lines += [
        "        for j in range(m):",
        f"            v = r{k - 1}[j]",
        f"            r{k}[j] = d{k - 1}(v, f{k - 1}(v), r{k}[j])",
    ]
    for i in reversed(range(1, k - 1)):
        lines += ["        for j in range(m):", f"            r{k}[j] = d{i}(r{i}[j], r{i + 1}[j], r{k}[j])"]
    lines += ["        for j in range(m):", f"            dxs[j] = store(d0(r0[j], r1[j], r{k}[j]))"]
    return lines


@functools.cache
def grad_kernel(ops: tuple[str, ...], dtype: str, math: str) -> Any:
    """The chain's backward as a parallel loop with arguments (x, dy, dx, scratch); one per (chain, dtype, math).

    A chain of one stage (`stages`) is one expression per element and ignores scratch; a longer one runs over
    strips of `STRIP` elements in the thread's rows of scratch (`grad_scratch`). The kernel's source is written
    out for the chain, with the ops and derivatives as globals f0 … d0 …: one jitted function per chain, where
    composing one per op (as `op_tables.chain` does) costs about half a second of compilation for each."""
    k, table, derivative = len(ops), op_table(math), derivatives(math)
    load, store = VECTOR_CODECS[dtype]
    scope: dict[str, Any] = {"prange": prange, "get_thread_id": numba.get_thread_id, "STRIP": STRIP}
    scope |= {"load": load, "store": store, "min": min}
    scope |= {f"f{i}": table[op] for i, op in enumerate(ops)} | {f"d{i}": derivative[op] for i, op in enumerate(ops)}
    lines = _strips(k) if len(stages(ops)) > 1 else _one_expression(k)
    exec(compile("\n".join(lines), f"<backward of {'+'.join(ops)} ({dtype}, {math})>", "exec"), scope)
    return njit(parallel=True, fastmath=False, cache=False)(scope["run_grad"])


def grad_scratch(ops: tuple[str, ...]) -> np.ndarray:
    """Per thread of Numba's pool, k+1 float32 rows of `STRIP` for a staged chain; an empty block otherwise."""
    rows, width = (len(ops) + 1, STRIP) if len(stages(ops)) > 1 else (1, 0)
    return np.empty((numba.config.NUMBA_NUM_THREADS, rows, width), dtype=np.float32)


def compiled_grad(ops: tuple[str, ...], x: np.ndarray, dy: np.ndarray, dx: np.ndarray, dtype: str, math: str) -> Any:
    """(the chain's backward kernel compiled now for exactly these arrays, so no launch compiles; its scratch)."""
    dispatcher, scratch = grad_kernel(ops, dtype, math), grad_scratch(ops)
    dispatcher.compile(tuple(numba.typeof(a) for a in (x, dy, dx, scratch)))
    return dispatcher, scratch
