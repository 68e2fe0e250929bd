"""Rope on the host CPU with Numba: one parallel loop over tokens fused, one per step of the decomposition unfused.

Every kernel walks tokens in parallel and, within a token, its heads' rows of head_dim values; a row is rotated
pair by pair with the position's cos and sin, read from the tables' row and converted to float32 where used.
The `half` pairing reads the row's two halves as contiguous slices and writes the first half of a row before
its second, so that the stores run in address order as a copy's do (stores alternating between the halves cost
the fused kernel about 5% at DRAM sizes); `interleaved` reads its even and odd values (a stride-2 access LLVM
vectorises with shuffles). Fused: q's heads, then k's heads of a token land in their heads of out. Unfused:
rotate, x·cos, rotate(x)·sin and the add, each its own loop, each intermediate stored in the case's dtype in a
buffer sized for q and reused for k (the ledger's peak).

A row is only head_dim values (512 bytes of float32), so what a row costs beyond its loads and stores decides
whether a core keeps up with memory. Called as a function per row (its arguments, its runtime alias checks, a
vector loop of unknown length and its scalar remainder), the fused rotation ran at about 55 GB/s on rows in
cache on the 2-core CI host, where its copy runs at about 140: one core then fell short of its share of memory
bandwidth, and a core shared with another job cost it more than it cost the copy. So the row functions are
inlined into the token loop (`inline="always"`) and head_dim/2 is a constant of the compiled kernel (`_rows` is
built per head_dim): a row becomes a few full vectors with no remainder loop, and the fused kernel runs at
about the copy's in-cache rate. The unfused steps are built the same way, so the two variants differ only in
fusion.

Every array is C-contiguous and a kernel's output rows are addressed as dst[t, head0 + j] (out holds q' and k'
side by side): a strided view of out would hide the unit stride from LLVM and cost the vector stores.
"""

from __future__ import annotations

import functools
from typing import Any

import numba
import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from backends.numba.on_cpu.arrays import storage
from backends.numba.ops import VECTOR_CODECS
from scenarios.rope import STEPS
from suite.core.registry import Launcher, kernel


@functools.cache
def _rows(pairing: str, dtype: str, h: int) -> dict[str, Any]:
    """Row functions over one head's values (x, y: source rows; c, s: the position's table rows, h values each;
    o: output), inlined where they are called: the fused rotation and each unfused step."""
    load, store = VECTOR_CODECS[dtype]
    if pairing == "half":

        @register_jitable(inline="always")
        def fused(x, y, c, s, o):  # type: ignore[no-untyped-def]
            for i in range(h):
                o[i] = store(load(x[i]) * load(c[i]) - load(x[h + i]) * load(s[i]))
            for i in range(h):
                o[h + i] = store(load(x[h + i]) * load(c[i]) + load(x[i]) * load(s[i]))

        @register_jitable(inline="always")
        def rotate(x, y, c, s, o):  # type: ignore[no-untyped-def]
            for i in range(h):
                o[i] = store(-load(x[h + i]))
            for i in range(h):
                o[h + i] = store(load(x[i]))

        @register_jitable(inline="always")
        def times(x, y, c, s, o):  # type: ignore[no-untyped-def]
            for i in range(h):
                o[i] = store(load(x[i]) * load(c[i]))
            for i in range(h):
                o[h + i] = store(load(x[h + i]) * load(c[i]))

    else:

        @register_jitable(inline="always")
        def fused(x, y, c, s, o):  # type: ignore[no-untyped-def]
            for i in range(h):
                a, b, ci, si = load(x[2 * i]), load(x[2 * i + 1]), load(c[i]), load(s[i])
                o[2 * i] = store(a * ci - b * si)
                o[2 * i + 1] = store(b * ci + a * si)

        @register_jitable(inline="always")
        def rotate(x, y, c, s, o):  # type: ignore[no-untyped-def]
            for i in range(h):
                a, b = load(x[2 * i]), load(x[2 * i + 1])
                o[2 * i] = store(-b)
                o[2 * i + 1] = store(a)

        @register_jitable(inline="always")
        def times(x, y, c, s, o):  # type: ignore[no-untyped-def]
            for i in range(h):
                ci = load(c[i])
                o[2 * i] = store(load(x[2 * i]) * ci)
                o[2 * i + 1] = store(load(x[2 * i + 1]) * ci)

    @register_jitable(inline="always")
    def add(x, y, c, s, o):  # type: ignore[no-untyped-def]
        for i in range(2 * h):
            o[i] = store(load(x[i]) + load(y[i]))

    return {"fused": fused, "rotate": rotate, "mul_cos": times, "mul_sin": times, "add": add}


@functools.cache
def _token_kernel(op: str, pairing: str, dtype: str, head_dim: int) -> Any:
    """dst[t, head0 + j] = row op of (x[t, j], y[t, j]) for every token t and head j < x.shape[1], with the
    position's table row (t mod seq) where the op uses one."""
    row = _rows(pairing, dtype, head_dim // 2)[op]

    @njit(parallel=True, fastmath=False, cache=False)
    def run(x, y, table, dst, head0, seq):  # type: ignore[no-untyped-def]
        tokens, heads = x.shape[0], x.shape[1]
        for t in prange(tokens):
            c = table[t % seq]
            xt, yt, dt = x[t], y[t], dst[t]
            for j in range(heads):
                row(xt[j], yt[j], c, c, dt[head0 + j])

    return run


@functools.cache
def _fused_kernel(pairing: str, dtype: str, head_dim: int) -> Any:
    """One loop over tokens: every head of q and of k rotated with the position's cos and sin into its heads of
    out."""
    row = _rows(pairing, dtype, head_dim // 2)["fused"]

    @njit(parallel=True, fastmath=False, cache=False)
    def run(q, k, cos, sin, out, seq):  # type: ignore[no-untyped-def]
        tokens, heads, kv = q.shape[0], q.shape[1], k.shape[1]
        for t in prange(tokens):
            c, s = cos[t % seq], sin[t % seq]
            qt, kt, ot = q[t], k[t], out[t]
            for j in range(heads):
                row(qt[j], qt[j], c, s, ot[j])
            for j in range(kv):
                row(kt[j], kt[j], c, s, ot[heads + j])

    return run


def _compiled(dispatcher: Any, *args: Any) -> Any:
    """The dispatcher, compiled now for exactly these arguments so that no launch compiles."""
    dispatcher.compile(tuple(numba.typeof(a) for a in args))
    return dispatcher


def _views(inputs: dict[str, Any], out: np.ndarray) -> tuple[str, dict[str, np.ndarray]]:
    """The dtype, and every array as the kernels see it: (tokens, heads, head_dim) rows, halves as bits."""
    dtype = str(out.dtype)
    if dtype not in VECTOR_CODECS or any(a.dtype != out.dtype for a in inputs.values()):
        found = {k: str(a.dtype) for k, a in inputs.items()}
        raise ValueError(f"numba/cpu rope: inputs {found} -> out {dtype}; needs one of {list(VECTOR_CODECS)}")
    rows = {n: storage(a).reshape(-1, *a.shape[2:]) for n, a in inputs.items() if n in ("q", "k")}
    return dtype, rows | {
        "cos": storage(inputs["cos"]),
        "sin": storage(inputs["sin"]),
        "out": storage(out).reshape(-1, *out.shape[2:]),
    }


@kernel(scenario="rope", backend="numba", variant="fused", device="cpu")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """One kernel: q, k and the tables read once, out written once."""
    dtype, a = _views(inputs, out)
    args = (a["q"], a["k"], a["cos"], a["sin"], a["out"], int(params["seq_len"]))
    run = _compiled(_fused_kernel(params["pairing"], dtype, int(params["head_dim"])), *args)

    def launch() -> None:
        run(*args)

    return launch


@kernel(scenario="rope", backend="numba", variant="unfused", device="cpu")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """rotate, x·cos, rotate(x)·sin, add for q and then for k; r, a and b stored in the case's dtype."""
    dtype, a = _views(inputs, out)
    seq, heads, head_dim = int(params["seq_len"]), int(params["heads"]), int(params["head_dim"])
    buffers = {name: np.empty_like(a["q"]) for name in ("r", "a", "b")}
    steps = []
    for x, head0 in (("q", 0), ("k", heads)):
        shape = a[x].shape
        env = {"x": a[x], "cos": a["cos"], "sin": a["sin"], "y": a["out"]}
        env |= {name: buf.reshape(-1)[: a[x].size].reshape(shape) for name, buf in buffers.items()}
        for st in STEPS:
            src, other = env[st.reads[0]], env[st.reads[1]] if st.op == "add" else env[st.reads[0]]
            table = env[st.reads[1]] if st.op in ("mul_cos", "mul_sin") else a["cos"]
            args = (src, other, table, env[st.writes], head0 if st.writes == "y" else 0, seq)
            op = "mul_cos" if st.op == "mul_sin" else st.op  # one kernel multiplies by either table
            steps.append((_compiled(_token_kernel(op, params["pairing"], dtype, head_dim), *args), args))

    def launch() -> None:
        for run, args in steps:
            run(*args)

    return launch
