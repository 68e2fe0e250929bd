"""Rope on the host CPU with Numba: one parallel loop over tokens fused, one per step of the decomposition unfused.

Every kernel walks tokens in parallel and, within a token, its heads' rows of head_dim values; a row is rotated
pair by pair with the position's cos and sin, converted once per token into the thread's float32 scratch. The
`half` pairing reads the row's two halves as contiguous slices, `interleaved` its even and odd values (a
stride-2 access LLVM vectorises with shuffles). Fused: q's heads and k's heads of a token go through one loop
body and land in their heads of out. Unfused: rotate, x·cos, rotate(x)·sin and the add, each its own loop, each
intermediate stored in the case's dtype in a buffer sized for q and reused for k (the ledger's peak).

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

from backends.numba.on_cpu.arrays import per_thread, storage
from backends.numba.ops import VECTOR_CODECS
from scenarios.rope import STEPS
from suite.core.registry import Launcher, kernel


@functools.cache
def _rows(pairing: str, dtype: str) -> dict[str, Any]:
    """Row functions over one head's values (x, y: source rows; c, s: float32 tables of the position; o: output):
    the fused rotation and each unfused step."""
    load, store = VECTOR_CODECS[dtype]
    if pairing == "half":

        @register_jitable
        def fused(x, y, c, s, o):  # type: ignore[no-untyped-def]
            h = c.size
            x1, x2, o1, o2 = x[:h], x[h:], o[:h], o[h:]
            for i in range(h):
                a, b = load(x1[i]), load(x2[i])
                o1[i] = store(a * c[i] - b * s[i])
                o2[i] = store(b * c[i] + a * s[i])

        @register_jitable
        def rotate(x, y, c, s, o):  # type: ignore[no-untyped-def]
            h = o.size // 2
            x1, x2, o1, o2 = x[:h], x[h:], o[:h], o[h:]
            for i in range(h):
                o1[i] = store(-load(x2[i]))
                o2[i] = store(load(x1[i]))

        @register_jitable
        def times(x, y, c, s, o):  # type: ignore[no-untyped-def]
            h = c.size
            x1, x2, o1, o2 = x[:h], x[h:], o[:h], o[h:]
            for i in range(h):
                o1[i] = store(load(x1[i]) * c[i])
                o2[i] = store(load(x2[i]) * c[i])

    else:

        @register_jitable
        def fused(x, y, c, s, o):  # type: ignore[no-untyped-def]
            for i in range(c.size):
                a, b = load(x[2 * i]), load(x[2 * i + 1])
                o[2 * i] = store(a * c[i] - b * s[i])
                o[2 * i + 1] = store(b * c[i] + a * s[i])

        @register_jitable
        def rotate(x, y, c, s, o):  # type: ignore[no-untyped-def]
            for i in range(o.size // 2):
                a, b = load(x[2 * i]), load(x[2 * i + 1])
                o[2 * i] = store(-b)
                o[2 * i + 1] = store(a)

        @register_jitable
        def times(x, y, c, s, o):  # type: ignore[no-untyped-def]
            for i in range(c.size):
                o[2 * i] = store(load(x[2 * i]) * c[i])
                o[2 * i + 1] = store(load(x[2 * i + 1]) * c[i])

    @register_jitable
    def add(x, y, c, s, o):  # type: ignore[no-untyped-def]
        for i in range(o.size):
            o[i] = store(load(x[i]) + load(y[i]))

    return {"fused": fused, "rotate": rotate, "mul_cos": times, "mul_sin": times, "add": add}


@functools.cache
def _token_kernel(op: str, pairing: str, dtype: str) -> Any:
    """dst[t, head0 + j] = row op of (x[t, j], y[t, j]) for every token t and head j < x.shape[1], with the
    position's table row (t mod seq) in float32 where the op uses one."""
    load = VECTOR_CODECS[dtype][0]
    row = _rows(pairing, dtype)[op]
    tabled = op in ("mul_cos", "mul_sin")

    @njit(parallel=True, fastmath=False, cache=False)
    def run(x, y, table, dst, head0, seq, scratch):  # type: ignore[no-untyped-def]
        tokens, heads = x.shape[0], x.shape[1]
        h = table.shape[1]
        for t in prange(tokens):
            c = scratch[numba.get_thread_id()][:h]
            if tabled:
                src = table[t % seq]
                for i in range(h):
                    c[i] = load(src[i])
            for j in range(heads):
                row(x[t, j], y[t, j], c, c, dst[t, head0 + j])

    return run


@functools.cache
def _fused_kernel(pairing: str, dtype: str) -> Any:
    """One loop over tokens: the position's cos and sin converted once, then every head of q and of k rotated
    into its heads of out."""
    load = VECTOR_CODECS[dtype][0]
    row = _rows(pairing, dtype)["fused"]

    @njit(parallel=True, fastmath=False, cache=False)
    def run(q, k, cos, sin, out, seq, scratch):  # type: ignore[no-untyped-def]
        tokens, heads, kv = q.shape[0], q.shape[1], k.shape[1]
        h = cos.shape[1]
        for t in prange(tokens):
            buf = scratch[numba.get_thread_id()]
            c, s = buf[:h], buf[h : 2 * h]
            crow, srow = cos[t % seq], sin[t % seq]
            for i in range(h):
                c[i] = load(crow[i])
                s[i] = load(srow[i])
            for j in range(heads):
                row(q[t, j], q[t, j], c, s, out[t, j])
            for j in range(kv):
                row(k[t, j], k[t, j], c, s, out[t, heads + j])

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
    return dtype, rows | {"cos": storage(inputs["cos"]), "sin": storage(inputs["sin"]),
                          "out": storage(out).reshape(-1, *out.shape[2:])}  # fmt: skip


@kernel(scenario="rope", backend="numba", variant="fused", device="cpu")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """One kernel: q, k and the tables read once, out written once."""
    dtype, a = _views(inputs, out)
    scratch = per_thread(params["head_dim"])
    args = (a["q"], a["k"], a["cos"], a["sin"], a["out"], int(params["seq_len"]), scratch)
    run = _compiled(_fused_kernel(params["pairing"], dtype), *args)

    def launch() -> None:
        run(*args)

    return launch


@kernel(scenario="rope", backend="numba", variant="unfused", device="cpu")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """rotate, x·cos, rotate(x)·sin, add for q and then for k; r, a and b stored in the case's dtype."""
    dtype, a = _views(inputs, out)
    seq, heads, scratch = int(params["seq_len"]), int(params["heads"]), per_thread(params["head_dim"] // 2)
    buffers = {name: np.empty_like(a["q"]) for name in ("r", "a", "b")}
    steps = []
    for x, head0 in (("q", 0), ("k", heads)):
        shape = a[x].shape
        env = {"x": a[x], "cos": a["cos"], "sin": a["sin"], "y": a["out"]}
        env |= {name: buf.reshape(-1)[: a[x].size].reshape(shape) for name, buf in buffers.items()}
        for st in STEPS:
            src, other = env[st.reads[0]], env[st.reads[1]] if st.op == "add" else env[st.reads[0]]
            table = env[st.reads[1]] if st.op in ("mul_cos", "mul_sin") else a["cos"]
            args = (src, other, table, env[st.writes], head0 if st.writes == "y" else 0, seq, scratch)
            op = "mul_cos" if st.op == "mul_sin" else st.op  # one kernel multiplies by either table
            steps.append((_compiled(_token_kernel(op, params["pairing"], dtype), *args), args))

    def launch() -> None:
        for run, args in steps:
            run(*args)

    return launch
