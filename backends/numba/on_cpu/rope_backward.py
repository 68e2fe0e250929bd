"""Rope's backward and train passes on the host CPU with Numba: dy rotated back by −θ into dq and dk.

The forward of a training step is the forward's own entry (`backends.numba.on_cpu.rope`): rope is linear, so its
backward needs only cos and sin, which every variant keeps (they are inputs) and nothing else
(`scenarios.rope.backward`). Fused: one parallel loop over tokens reads each head's row of dy and the position's
table rows once and writes the row of dq or dk once, (g₁·cos + g₂·sin, g₂·cos − g₁·sin) per pair. Unfused: the
steps of `BACKWARD_STEPS`, each its own parallel loop over tokens, for q's heads of dy and then k's: u = dy·sin,
v = rotateᵀ(u), w = dy·cos, dx = w + v, with u, v and w stored in the case's dtype in two buffers sized for q
(w takes u's, dead by then), reused for k.

The row functions follow the forward's (`rope._rows`): inlined into the token loop with head_dim/2 a constant of
the compiled kernel, so a row is a few full vectors; halves are read and written as their bits through
`VECTOR_CODECS` with float32 arithmetic. Every array is C-contiguous; a kernel reads dy's rows at dy[t, head0 + j]
and writes dq[t, j] (dy holds q's and k's heads side by side) rather than through a strided view, which would hide
the unit stride from LLVM.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from backends.numba.on_cpu import rope
from backends.numba.on_cpu.arrays import storage
from backends.numba.ops import VECTOR_CODECS
from scenarios.rope.backward import BACKWARD_STEPS
from suite.kit.training import Pass, training

FORWARD_INPUTS = ("q", "k", "cos", "sin")


@functools.cache
def _back_rows(pairing: str, dtype: str, h: int) -> dict[str, Any]:
    """Row functions of the backward (x, y: source rows; c, s: table rows; o: output): the fused rotation by −θ
    and rotateᵀ; the products and the add are the forward's own row functions."""
    load, store = VECTOR_CODECS[dtype]
    if pairing == "half":

        @register_jitable(inline="always")
        def fused(x, y, c, s, o):  # type: ignore[no-untyped-def]
            for i in range(h):
                o[i] = store(load(x[i]) * load(c[i]) + load(x[h + i]) * load(s[i]))
            for i in range(h):
                o[h + i] = store(load(x[h + i]) * load(c[i]) - load(x[i]) * load(s[i]))

        @register_jitable(inline="always")
        def unrotate(x, y, c, s, o):  # type: ignore[no-untyped-def]
            for i in range(h):
                o[i] = store(load(x[h + i]))
            for i in range(h):
                o[h + i] = store(-load(x[i]))

    else:

        @register_jitable(inline="always")
        def fused(x, y, c, s, o):  # type: ignore[no-untyped-def]
            for i in range(h):
                a, b, ci, si = load(x[2 * i]), load(x[2 * i + 1]), load(c[i]), load(s[i])
                o[2 * i] = store(a * ci + b * si)
                o[2 * i + 1] = store(b * ci - a * si)

        @register_jitable(inline="always")
        def unrotate(x, y, c, s, o):  # type: ignore[no-untyped-def]
            for i in range(h):
                a, b = load(x[2 * i]), load(x[2 * i + 1])
                o[2 * i] = store(b)
                o[2 * i + 1] = store(-a)

    forward = rope._rows(pairing, dtype, h)
    return {"fused": fused, "unrotate": unrotate, "mul_cos": forward["mul_cos"], "mul_sin": forward["mul_sin"],
            "add": forward["add"]}  # fmt: skip


@functools.cache
def _step_kernel(op: str, pairing: str, dtype: str, head_dim: int) -> Any:
    """dst[t, j] = row op of (x[t, x0 + j], y[t, j]) for every token t and head j < dst.shape[1], with the
    position's table row (t mod seq) where the op uses one."""
    row = _back_rows(pairing, dtype, head_dim // 2)[op]

    @njit(parallel=True, fastmath=False, cache=False)
    def run(x, x0, y, table, dst, seq):  # type: ignore[no-untyped-def]
        tokens, heads = dst.shape[0], dst.shape[1]
        for t in prange(tokens):
            c = table[t % seq]
            xt, yt, dt = x[t], y[t], dst[t]
            for j in range(heads):
                row(xt[x0 + j], yt[j], c, c, dt[j])

    return run


@functools.cache
def _fused_kernel(pairing: str, dtype: str, head_dim: int) -> Any:
    """One loop over tokens: q's heads of dy into dq, then k's heads into dk, each rotated by −θ."""
    row = _back_rows(pairing, dtype, head_dim // 2)["fused"]

    @njit(parallel=True, fastmath=False, cache=False)
    def run(dy, cos, sin, dq, dk, seq):  # type: ignore[no-untyped-def]
        tokens, heads, kv = dq.shape[0], dq.shape[1], dk.shape[1]
        for t in prange(tokens):
            c, s = cos[t % seq], sin[t % seq]
            gt, qt, kt = dy[t], dq[t], dk[t]
            for j in range(heads):
                row(gt[j], gt[j], c, s, qt[j])
            for j in range(kv):
                row(gt[heads + j], gt[heads + j], c, s, kt[j])

    return run


def _views(inputs: dict[str, Any], grads: Any) -> tuple[str, dict[str, np.ndarray]]:
    """The dtype, and dy, dq, dk as (tokens, heads, head_dim) rows and the tables, halves as bits."""
    dtype = str(inputs["dy"].dtype)
    arrays = {"dy": inputs["dy"], "cos": inputs["cos"], "sin": inputs["sin"], "dq": grads["dq"], "dk": grads["dk"]}
    if dtype not in VECTOR_CODECS or any(a.dtype != inputs["dy"].dtype for a in arrays.values()):
        found = {k: str(a.dtype) for k, a in arrays.items()}
        raise ValueError(f"numba/cpu rope backward: {found}; needs one dtype of {list(VECTOR_CODECS)}")
    rows = {n: storage(a).reshape(-1, *a.shape[2:]) for n, a in arrays.items() if n not in ("cos", "sin")}
    return dtype, rows | {"cos": storage(inputs["cos"]), "sin": storage(inputs["sin"])}


def _forward(entry: Any) -> Any:
    """The forward of a training step: the variant's forward entry; it keeps cos and sin (inputs) and nothing
    else, since the backward of a rotation needs only the angle."""

    def forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
        run = entry({n: inputs[n] for n in FORWARD_INPUTS}, y, params, opts)
        return Pass(run, saved={"cos": inputs["cos"], "sin": inputs["sin"]})

    return forward


def fused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """One kernel: dy and the tables read once, dq and dk written once."""
    dtype, a = _views({**inputs, **saved}, grads)
    args = (a["dy"], a["cos"], a["sin"], a["dq"], a["dk"], int(params["seq_len"]))
    run = rope._compiled(_fused_kernel(params["pairing"], dtype, int(params["head_dim"])), *args)

    def launch() -> None:
        run(*args)

    return Pass(launch)


def unfused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """dy·sin, rotateᵀ, dy·cos and the add for q's heads of dy, then k's; u, v, w stored in the case's dtype."""
    dtype, a = _views({**inputs, **saved}, grads)
    seq, heads, head_dim = int(params["seq_len"]), int(params["heads"]), int(params["head_dim"])
    first, second = np.empty_like(a["dq"]), np.empty_like(a["dq"])  # u and w share the first (u dies first)
    steps = []
    for dx, head0 in (("dq", 0), ("dk", heads)):
        shape = a[dx].shape
        scratch = {name: buf.reshape(-1)[: a[dx].size].reshape(shape) for name, buf in (("u", first),
                                                                                      ("v", second))}  # fmt: skip
        env = {"dy": a["dy"], "cos": a["cos"], "sin": a["sin"], "dx": a[dx], "w": scratch["u"], **scratch}
        for st in BACKWARD_STEPS:
            src = env[st.reads[0]]
            other = env[st.reads[1]] if st.op == "add" else src
            table = env[st.reads[1]] if st.op in ("mul_cos", "mul_sin") else a["cos"]
            args = (src, head0 if st.reads[0] == "dy" else 0, other, table, env[st.writes], seq)
            op = "mul_cos" if st.op == "mul_sin" else st.op  # one kernel multiplies by either table
            steps.append((rope._compiled(_step_kernel(op, params["pairing"], dtype, head_dim), *args), args))

    def launch() -> None:
        for run, args in steps:
            run(*args)

    return Pass(launch)


training(
    "rope",
    backend="numba",
    device="cpu",
    fused=(_forward(rope.fused), fused_backward),
    unfused=(_forward(rope.unfused), unfused_backward),
)
