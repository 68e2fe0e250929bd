"""Rope's backward and train passes on CUDA with Numba (the same kernels run in the simulator): dy rotated back
by −θ into dq and dk (`scenarios.rope.backward`).

The forward of a training step is the forward's own entry (`backends.numba.on_cuda.rope`): rope is linear, so its
backward needs only cos and sin, which every variant keeps (they are inputs) and nothing else. Both backward
kernels follow the forward's layout: a block per token, a thread per pair (striding over head_dim/2), which loads
its position's table values once and walks the token's heads; which two values pair up is a compile-time
constant (`half`: i and i + head_dim/2; `interleaved`: 2i and 2i + 1).

Fused: one kernel reads each head row of dy (q's heads [0, heads) then k's [heads, heads + kv_heads)) and the
tables once and writes the row of dq or dk once, (g₁·cos + g₂·sin, g₂·cos − g₁·sin) per pair. Unfused: the steps
of `BACKWARD_STEPS`, one launch each, for q's heads of dy and then k's: u = dy·sin, v = rotateᵀ(u) = (u₂, −u₁),
w = dy·cos, dx = w + v, with u, v and w stored in the case's dtype in two buffers sized for q (w takes u's, dead
by then), reused for k. A step reads its source rows from head x0 on, so the dy-reading steps address q's or k's
heads of dy in place. Every value is computed in float32 (np.float32 conversions: a bare Python float would
promote to float64).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from backends.numba import simulating, stream_arg
from backends.numba.on_cuda import rope
from backends.numba.record import record_numba
from scenarios.rope.backward import BACKWARD_STEPS
from suite.kit.training import Pass, training

try:
    from numba import cuda  # a module global, which the simulator swaps for its per-thread fake
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None

FORWARD_INPUTS = ("q", "k", "cos", "sin")
UNROTATE, MUL, ADD = 0, 1, 2
OPS = {"unrotate": UNROTATE, "mul_cos": MUL, "mul_sin": MUL, "add": ADD}


@functools.cache
def fused_source(pairing: str) -> Callable[..., None]:
    """dy (T, H + KV, D), tables (S, D/2) -> dq (T, H, D), dk (T, KV, D), each pair rotated by −θ."""
    interleaved = pairing == "interleaved"

    def rope_backward_fused(dy, cos, sin, dq, dk, seq):  # type: ignore[no-untyped-def]
        t = cuda.blockIdx.x
        heads, kv, h = dq.shape[1], dk.shape[1], cos.shape[1]
        pos = t % seq
        i = cuda.threadIdx.x
        while i < h:
            first, second = (2 * i, 2 * i + 1) if interleaved else (i, i + h)
            c, s = np.float32(cos[pos, i]), np.float32(sin[pos, i])
            for j in range(heads + kv):
                a, b = np.float32(dy[t, j, first]), np.float32(dy[t, j, second])
                if j < heads:
                    dq[t, j, first] = a * c + b * s
                    dq[t, j, second] = b * c - a * s
                else:
                    dk[t, j - heads, first] = a * c + b * s
                    dk[t, j - heads, second] = b * c - a * s
            i += cuda.blockDim.x

    return rope_backward_fused


@functools.cache
def step_source(op: str, pairing: str) -> Callable[..., None]:
    """One unfused step: dst[t, j] = rotateᵀ(x), x·table or x + y over dst's heads, x's rows from head x0 on."""
    interleaved, code = pairing == "interleaved", OPS[op]

    def rope_backward_step(x, x0, y, table, dst, seq):  # type: ignore[no-untyped-def]
        t = cuda.blockIdx.x
        heads, h = dst.shape[1], dst.shape[2] // 2
        i = cuda.threadIdx.x
        while i < h:
            first, second = (2 * i, 2 * i + 1) if interleaved else (i, i + h)
            tab = np.float32(table[t % seq, i]) if code == MUL else np.float32(0.0)
            for j in range(heads):
                a, b = np.float32(x[t, x0 + j, first]), np.float32(x[t, x0 + j, second])
                if code == UNROTATE:
                    dst[t, j, first] = b
                    dst[t, j, second] = -a
                elif code == MUL:
                    dst[t, j, first] = a * tab
                    dst[t, j, second] = b * tab
                else:
                    dst[t, j, first] = a + np.float32(y[t, j, first])
                    dst[t, j, second] = b + np.float32(y[t, j, second])
            i += cuda.blockDim.x

    return rope_backward_step


@functools.cache
def _dispatcher(kind: str, op: str, pairing: str) -> Any:
    """The `cuda.jit` dispatcher of the fused kernel or a step (importable: the resource report rebuilds it)."""
    return cuda.jit(fused_source(pairing) if kind == "fused" else step_source(op, pairing))


def _check(arrays: dict[str, Any]) -> None:
    found = {k: str(a.dtype) for k, a in arrays.items()}
    if len(set(found.values())) != 1 or next(iter(found.values())) not in ("float32", "float16"):
        raise ValueError(f"numba/cuda rope training: {found}; needs one dtype of float32 or float16")


def _prepared(key: tuple[str, str, str], tokens: int, threads: int, stream: Any, args: tuple) -> Callable[[], None]:
    dispatcher = _dispatcher(*key)
    compiled = None if simulating() else dispatcher.compile(tuple(numba.typeof(a) for a in args))
    name = f"rope backward {key[0]} {key[1]}".rstrip()
    record_numba((__name__, "_dispatcher", key), args, threads, name=name, compiled=compiled)

    def launch() -> None:
        dispatcher[(tokens,), threads, stream](*args)  # configured at each launch: the simulator keeps the last

    return launch


def _pass(steps: list[Callable[[], None]], threads: int, tokens: int, opts: dict) -> Pass:
    def run() -> None:
        for step in steps:
            step()

    return Pass(run, notes=rope._notes(threads, tokens, len(steps), opts))


def _forward(entry: Any) -> Any:
    """The forward of a training step: the variant's forward entry; it keeps cos and sin (inputs) and nothing
    else, since the backward of a rotation needs only the angle."""

    def forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
        launch = entry({n: inputs[n] for n in FORWARD_INPUTS}, y, params, opts)
        return Pass(launch.run, saved={"cos": inputs["cos"], "sin": inputs["sin"]}, notes=launch.notes)

    return forward


def fused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """One kernel: dy and the tables read once, dq and dk written once."""
    dy, cos, sin, dq, dk = inputs["dy"], saved["cos"], saved["sin"], grads["dq"], grads["dk"]
    _check({"dy": dy, "cos": cos, "sin": sin, "dq": dq, "dk": dk})
    tokens, threads = params["batch"] * params["seq_len"], rope._threads(params, opts)
    args = (rope._rows(dy), cos, sin, rope._rows(dq), rope._rows(dk), params["seq_len"])
    key = ("fused", "", params["pairing"])
    return _pass([_prepared(key, tokens, threads, stream_arg(opts.get("stream")), args)], threads, tokens, opts)


def unfused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """dy·sin, rotateᵀ, dy·cos and the add for q's heads of dy, then k's; u, v, w stored in the case's dtype."""
    dy, cos, sin, dq, dk = inputs["dy"], saved["cos"], saved["sin"], grads["dq"], grads["dk"]
    _check({"dy": dy, "cos": cos, "sin": sin, "dq": dq, "dk": dk})
    tokens, threads = params["batch"] * params["seq_len"], rope._threads(params, opts)
    stream = stream_arg(opts.get("stream"))
    rows = rope._rows(dy)
    first, second = (cuda.device_array(dq.size, dtype=dq.dtype) for _ in range(2))  # u and w share the first
    steps = []
    for dx, head0 in ((rope._rows(dq), 0), (rope._rows(dk), params["heads"])):
        env = {"dy": rows, "cos": cos, "sin": sin, "dx": dx}
        env |= {name: buf[: dx.size].reshape(dx.shape) for name, buf in (("u", first), ("w", first), ("v", second))}
        for st in BACKWARD_STEPS:
            src = env[st.reads[0]]
            other = env[st.reads[1]] if st.op == "add" else src
            table = env[st.reads[1]] if st.op in ("mul_cos", "mul_sin") else cos
            args = (src, head0 if st.reads[0] == "dy" else 0, other, table, env[st.writes], params["seq_len"])
            steps.append(_prepared(("step", st.op, params["pairing"]), tokens, threads, stream, args))
    return _pass(steps, threads, tokens, opts)


training(
    "rope",
    backend="numba",
    device="cuda",
    like=lambda a: cuda.device_array_like(a),
    fused=(_forward(rope.fused), fused_backward),
    unfused=(_forward(rope.unfused), unfused_backward),
)
