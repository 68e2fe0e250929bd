"""Rope in Triton: one program per token, walking the token's heads; fused rotates q and k in one kernel.

A program loads its position's cos and sin (head_dim/2 values, HALF = the next power of two, masked) once and
then, head by head, the two members of every pair: the row's halves for the `half` pairing, its even and odd
values for `interleaved` (PAIR, a constexpr). Fused writes x₁·cos − x₂·sin and x₂·cos + x₁·sin straight into
the head's place in out (q's heads first, then k's). Unfused runs the decomposition with one template (OP:
rotate, multiply by a table, add), each step reading and writing whole tensors in the case's dtype; the
buffers of q's steps serve k's. Offsets are 64-bit; num_warps follows HALF, a warp per 256 pair values.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import triton
import triton.language as tl

from backends.triton import BACKEND
from backends.triton.record import record_triton
from scenarios.rope import STEPS
from suite.core.registry import Launch, Launcher, kernel
from suite.kit.launch import next_power_of_two
from suite.kit.launch_shape import chosen_by, launch_notes

ROTATE, MUL, ADD = 0, 1, 2
OPS = {"rotate": ROTATE, "mul_cos": MUL, "mul_sin": MUL, "add": ADD}
ROTATE_: tl.constexpr = tl.constexpr(ROTATE)
MUL_: tl.constexpr = tl.constexpr(MUL)


@triton.jit
def _pair_offsets(h, PAIR: tl.constexpr, HALF: tl.constexpr):
    """Offsets of the first and second member of every pair within a head row, and the mask of real pairs."""
    i = tl.arange(0, HALF)
    if PAIR == 0:
        return i, i + h, i < h
    return 2 * i, 2 * i + 1, i < h


@triton.jit
def _rope_fused(q_ptr, k_ptr, cos_ptr, sin_ptr, out_ptr, heads, kv, seq, h, PAIR: tl.constexpr, HALF: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    d = 2 * h
    first, second, mask = _pair_offsets(h, PAIR, HALF)
    i = tl.arange(0, HALF)
    c = tl.load(cos_ptr + (t % seq) * h + i, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + (t % seq) * h + i, mask=mask, other=0.0).to(tl.float32)
    for j in range(heads + kv):
        if j < heads:  # noqa: SIM108 - a runtime branch in Triton, not a Python conditional expression
            src = q_ptr + (t * heads + j) * d
        else:
            src = k_ptr + (t * kv + j - heads) * d
        dst = out_ptr + (t * (heads + kv) + j) * d
        a = tl.load(src + first, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(src + second, mask=mask, other=0.0).to(tl.float32)
        tl.store(dst + first, (a * c - b * s).to(out_ptr.dtype.element_ty), mask=mask)
        tl.store(dst + second, (b * c + a * s).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rope_step(
    x_ptr,
    y_ptr,
    t_ptr,
    dst_ptr,
    heads,
    dst_heads,
    head0,
    seq,
    h,
    OP: tl.constexpr,
    PAIR: tl.constexpr,
    HALF: tl.constexpr,
):
    """dst's heads head0.. of token t = rotate(x), x·table or x + y over the token's `heads` rows."""
    t = tl.program_id(0).to(tl.int64)
    d = 2 * h
    first, second, mask = _pair_offsets(h, PAIR, HALF)
    if OP == MUL_:
        tab = tl.load(t_ptr + (t % seq) * h + tl.arange(0, HALF), mask=mask, other=0.0).to(tl.float32)
    for j in range(heads):
        src = x_ptr + (t * heads + j) * d
        dst = dst_ptr + (t * dst_heads + head0 + j) * d
        a = tl.load(src + first, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(src + second, mask=mask, other=0.0).to(tl.float32)
        if OP == ROTATE_:
            o1, o2 = -b, a
        elif OP == MUL_:
            o1, o2 = a * tab, b * tab
        else:
            other = y_ptr + (t * heads + j) * d
            o1 = a + tl.load(other + first, mask=mask, other=0.0).to(tl.float32)
            o2 = b + tl.load(other + second, mask=mask, other=0.0).to(tl.float32)
        tl.store(dst + first, o1.to(dst_ptr.dtype.element_ty), mask=mask)
        tl.store(dst + second, o2.to(dst_ptr.dtype.element_ty), mask=mask)


Step = tuple[Any, tuple[Any, ...], dict[str, Any]]


def _launcher(launches: list[Step], tokens: int, half: int, opts: dict) -> Launcher:
    """Compile every launch now (a no-op in the interpreter) and return a closure that only launches."""
    warps = int(opts.get("num_warps") or max(1, min(8, half // 128)))
    grid = (tokens,)
    context: Callable[[], contextlib.AbstractContextManager] = BACKEND.launch_stream(opts.get("stream"))
    for fn, args, const in launches:
        compiled = fn.warmup(*args, HALF=half, num_warps=warps, grid=grid, **const)
        record_triton(fn, args, {"HALF": half, **const}, warps, compiled=compiled)

    def launch() -> None:
        with context():
            for fn, args, const in launches:
                fn[grid](*args, HALF=half, num_warps=warps, **const)

    settings = {"half": half, "num_warps": warps}
    return Launch(launch, notes=launch_notes(settings, grid, chosen_by(opts, ("num_warps",)), kernels=len(launches)))


def _shape(params: dict) -> tuple[int, int, int, int, int, int]:
    """(tokens, heads, kv_heads, seq_len, head_dim/2, HALF)."""
    h = params["head_dim"] // 2
    tokens = params["batch"] * params["seq_len"]
    return tokens, params["heads"], params["kv_heads"], params["seq_len"], h, next_power_of_two(h)


@kernel(scenario="rope", backend="triton", variant="fused", device="cuda")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    tokens, heads, kv, seq, h, half = _shape(params)
    args = (inputs["q"], inputs["k"], inputs["cos"], inputs["sin"], out, heads, kv, seq, h)
    return _launcher([(_rope_fused, args, {"PAIR": int(params["pairing"] != "half")})], tokens, half, opts)


@kernel(scenario="rope", backend="triton", variant="unfused", device="cuda")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    tokens, heads, kv, seq, h, half = _shape(params)
    pair = int(params["pairing"] != "half")
    buffers = {name: inputs["q"].new_empty(inputs["q"].shape) for name in ("r", "a", "b")}  # reused for k
    launches = []
    for x, n, head0 in (("q", heads, 0), ("k", kv, heads)):
        env = dict(inputs) | {"x": inputs[x], "y": out}
        env |= {name: buf.view(-1)[: inputs[x].numel()] for name, buf in buffers.items()}
        for st in STEPS:
            src = env[st.reads[0]]
            other = env[st.reads[1]] if st.op == "add" else src
            table = env[st.reads[1]] if st.op in ("mul_cos", "mul_sin") else inputs["cos"]
            dst_heads, start = (heads + kv, head0) if st.writes == "y" else (n, 0)
            args = (src, other, table, env[st.writes], n, dst_heads, start, seq, h)
            launches.append((_rope_step, args, {"OP": OPS[st.op], "PAIR": pair}))
    return _launcher(launches, tokens, half, opts)
