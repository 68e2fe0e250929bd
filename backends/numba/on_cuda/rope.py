"""Rope on CUDA with Numba (the same kernels run in the simulator): a block per token, a thread per pair.

Each block owns one token: its threads stride over the head's pairs (head_dim/2 of them), load the position's
cos and sin for their pair once, and walk the token's heads. Which two values pair up is a compile-time
constant of the kernel (`half`: j and j + head_dim/2; `interleaved`: 2i and 2i + 1). Fused rotates every head of
q and of k into its place in out; unfused runs the decomposition's steps (rotate, multiply by a table, add), one
kernel each, its intermediates in the case's dtype in buffers sized for q and reused for k. Every value is
computed in float32 (np.float32 constants and conversions: a bare Python float would promote to float64).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from backends.numba import BACKEND, simulating, stream_arg
from backends.numba.record import record_numba
from scenarios.rope import STEPS
from suite.core.registry import Launch, Launcher, kernel
from suite.kit.launch_shape import block_chosen_by, launch_notes

try:
    from numba import cuda  # a module global, which the simulator swaps for its per-thread fake
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None

ROTATE, MUL, ADD = 0, 1, 2
OPS = {"rotate": ROTATE, "mul_cos": MUL, "mul_sin": MUL, "add": ADD}


@functools.cache
def fused_source(pairing: str) -> Callable[..., None]:
    """The fused kernel as a Python function: q (T, H, D), k (T, KV, D), tables (S, D/2), out (T, H + KV, D)."""
    interleaved = pairing == "interleaved"

    def rope_fused(q, k, cos, sin, out, seq):  # type: ignore[no-untyped-def]
        t = cuda.blockIdx.x
        heads, kv, h = q.shape[1], k.shape[1], cos.shape[1]
        pos = t % seq
        i = cuda.threadIdx.x
        while i < h:
            first, second = (2 * i, 2 * i + 1) if interleaved else (i, i + h)
            c, s = np.float32(cos[pos, i]), np.float32(sin[pos, i])
            for j in range(heads + kv):
                if j < heads:
                    a, b = np.float32(q[t, j, first]), np.float32(q[t, j, second])
                else:
                    a, b = np.float32(k[t, j - heads, first]), np.float32(k[t, j - heads, second])
                out[t, j, first] = a * c - b * s
                out[t, j, second] = b * c + a * s
            i += cuda.blockDim.x

    return rope_fused


@functools.cache
def step_source(op: str, pairing: str) -> Callable[..., None]:
    """One unfused step: dst[t, head0 + j] = rotate(x), x·table or x + y over the token's rows of x."""
    interleaved, code = pairing == "interleaved", OPS[op]

    def rope_step(x, y, table, dst, head0, seq):  # type: ignore[no-untyped-def]
        t = cuda.blockIdx.x
        heads, h = x.shape[1], x.shape[2] // 2
        i = cuda.threadIdx.x
        while i < h:
            first, second = (2 * i, 2 * i + 1) if interleaved else (i, i + h)
            tab = np.float32(table[t % seq, i]) if code == MUL else np.float32(0.0)
            for j in range(heads):
                a, b = np.float32(x[t, j, first]), np.float32(x[t, j, second])
                if code == ROTATE:
                    dst[t, head0 + j, first] = -b
                    dst[t, head0 + j, second] = a
                elif code == MUL:
                    dst[t, head0 + j, first] = a * tab
                    dst[t, head0 + j, second] = b * tab
                else:
                    dst[t, head0 + j, first] = a + np.float32(y[t, j, first])
                    dst[t, head0 + j, second] = b + np.float32(y[t, j, second])
            i += cuda.blockDim.x

    return rope_step


def kernel_sources(variant: str, params: dict, dtype: str) -> dict[str, tuple[Callable[..., None], str]]:
    """A variant's kernels as name -> (Python function, signature), for compiling without a GPU."""
    rows, table, pairing = f"{dtype}[:, :, ::1]", f"{dtype}[:, ::1]", params["pairing"]
    if variant == "fused":
        return {"rope fused": (fused_source(pairing), f"void({rows}, {rows}, {table}, {table}, {rows}, int64)")}
    signature = f"void({rows}, {rows}, {table}, {rows}, int64, int64)"
    return {f"rope {op}": (step_source(op, pairing), signature) for op in dict.fromkeys(st.op for st in STEPS)}


@functools.cache
def _dispatcher(kind: str, op: str, pairing: str) -> Any:
    """The `cuda.jit` dispatcher of the fused kernel or a step (importable: the resource report rebuilds it)."""
    return cuda.jit(fused_source(pairing) if kind == "fused" else step_source(op, pairing))


def _threads(params: dict, opts: dict) -> int:
    """A thread per pair, in whole warps, up to the `block` option (128 by default)."""
    pairs = params["head_dim"] // 2
    return max(32, min(int(BACKEND.option(opts, "block") or 128), -(-pairs // 32) * 32))


def _prepared(key: tuple[str, str, str], tokens: int, threads: int, stream: Any, args: tuple) -> Launcher:
    dispatcher = _dispatcher(*key)
    compiled = None
    if not simulating():
        compiled = dispatcher.compile(tuple(numba.typeof(a) for a in args))
    record_numba((__name__, "_dispatcher", key), args, threads, name=f"rope {key[0]} {key[1]}", compiled=compiled)

    def launch() -> None:
        dispatcher[(tokens,), threads, stream](*args)  # configured at each launch: the simulator keeps the last

    return launch


def _rows(a: Any) -> Any:
    """(batch, seq, heads, head_dim) as (tokens, heads, head_dim): a contiguous reshape, no copy."""
    return a.reshape(a.shape[0] * a.shape[1], a.shape[2], a.shape[3])


def _check(inputs: dict[str, Any], out: Any) -> None:
    if str(out.dtype) not in ("float32", "float16") or any(a.dtype != out.dtype for a in inputs.values()):
        raise ValueError(f"numba/cuda rope: inputs and out must share float32 or float16, got out {out.dtype}")


def _notes(threads: int, tokens: int, kernels: int, opts: dict) -> dict:
    return launch_notes(
        {"threads": threads}, (tokens,), block_chosen_by(BACKEND.option(opts, "block")), kernels=kernels
    )


@kernel(scenario="rope", backend="numba", variant="fused", device="cuda")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    _check(inputs, out)
    tokens, threads = params["batch"] * params["seq_len"], _threads(params, opts)
    args = (_rows(inputs["q"]), _rows(inputs["k"]), inputs["cos"], inputs["sin"], _rows(out), params["seq_len"])
    launch = _prepared(("fused", "", params["pairing"]), tokens, threads, stream_arg(opts.get("stream")), args)
    return Launch(launch, notes=_notes(threads, tokens, 1, opts))


@kernel(scenario="rope", backend="numba", variant="unfused", device="cuda")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    _check(inputs, out)
    tokens, threads, stream = (
        params["batch"] * params["seq_len"],
        _threads(params, opts),
        stream_arg(opts.get("stream")),
    )
    q = _rows(inputs["q"])
    buffers = {name: cuda.device_array(q.size, dtype=q.dtype) for name in ("r", "a", "b")}  # sized for q, reused for k
    steps = []
    for x, head0 in (("q", 0), ("k", params["heads"])):
        src = _rows(inputs[x])
        env = {"x": src, "cos": inputs["cos"], "sin": inputs["sin"], "y": _rows(out)}
        env |= {name: buf[: src.size].reshape(src.shape) for name, buf in buffers.items()}
        for st in STEPS:
            other = env[st.reads[1]] if st.op == "add" else env[st.reads[0]]
            table = env[st.reads[1]] if st.op in ("mul_cos", "mul_sin") else inputs["cos"]
            args = (env[st.reads[0]], other, table, env[st.writes], head0 if st.writes == "y" else 0, params["seq_len"])
            steps.append(_prepared(("step", st.op, params["pairing"]), tokens, threads, stream, args))

    def launch() -> None:
        for step in steps:
            step()

    return Launch(launch, notes=_notes(threads, tokens, len(steps), opts))
